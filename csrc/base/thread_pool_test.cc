#include "base/thread_pool.h"

#include "base/cpu_relax.h"
#include "base/metrics.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace tpu {
namespace {

// Keeps this thread busy (not asleep) for d.
void BusyFor(std::chrono::microseconds d) {
  auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Runs ParallelFor and checks that [0, n) is covered exactly once, by non-empty chunks of at
// least min(grain, n) elements.
void CheckCoverage(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  for (auto& h : hits) h.store(0);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(b, e);
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[i].load(), 1) << "index " << i << " n=" << n << " grain=" << grain;
  if (n <= 0) {
    EXPECT_TRUE(chunks.empty());
    return;
  }
  for (auto [b, e] : chunks) {
    EXPECT_LT(b, e) << "empty chunk, n=" << n << " grain=" << grain;
    EXPECT_GE(e - b, std::min<int64_t>(std::max<int64_t>(grain, 1), n)) << "n=" << n << " grain=" << grain;
  }
}

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  for (int64_t n : {0, 1, 2, 5, 7, 10, 64, 1000, 4099, 100003})
    for (int64_t grain : {0, 1, 3, 4, 16, 1000, 1 << 20}) CheckCoverage(pool, n, grain);
}

TEST(ThreadPoolTest, UsesSeveralThreads) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> arrived{0};
  pool.ParallelFor(64, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    // Keep this chunk busy for a moment so other threads pick up chunks too.
    arrived.fetch_add(1);
    BusyFor(std::chrono::milliseconds(2));
  });
  EXPECT_GT(arrived.load(), 1);
  EXPECT_GE(ids.size(), 2u);
  EXPECT_LE(ids.size(), 3u);
}

TEST(ThreadPoolTest, BudgetCapsTheThreadsOfAJob) {
  ThreadPool pool(4);
  ThreadPool::SetBudget([] { return 2; });
  EXPECT_EQ(pool.num_threads(), 2);
  EXPECT_EQ(pool.size(), 4);
  std::mutex mu;
  std::set<std::thread::id> ids;
  pool.ParallelFor(64, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    BusyFor(std::chrono::milliseconds(2));
  });
  ThreadPool::SetBudget(nullptr);
  EXPECT_LE(ids.size(), 2u);
  EXPECT_EQ(pool.num_threads(), 4);
  CheckCoverage(pool, 1000, 3);
}

TEST(ThreadPoolTest, ConcurrentCallersNeverWait) {
  // Two threads calling ParallelFor at once, and a call nested in a chunk: all complete (the one
  // that finds the pool busy runs its range itself) and cover their ranges exactly once.
  ThreadPool pool(3);
  std::atomic<int64_t> a{0}, b{0}, nested{0};
  std::thread other([&] {
    for (int r = 0; r < 50; ++r) pool.ParallelFor(1000, 10, [&](int64_t lo, int64_t hi) { a += hi - lo; });
  });
  for (int r = 0; r < 50; ++r)
    pool.ParallelFor(1000, 10, [&](int64_t lo, int64_t hi) {
      b += hi - lo;
      pool.ParallelFor(10, 1, [&](int64_t l2, int64_t h2) { nested += h2 - l2; });
    });
  other.join();
  EXPECT_EQ(a.load(), 50 * 1000);
  EXPECT_EQ(b.load(), 50 * 1000);
  EXPECT_GT(nested.load(), 0);
  EXPECT_EQ(nested.load() % 10, 0);
}

TEST(ThreadPoolTest, SingleThreadRunsInline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.num_threads(), 1);
  std::vector<std::pair<int64_t, int64_t>> chunks;
  const std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(1000, 10, [&](int64_t b, int64_t e) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    chunks.emplace_back(b, e);
  });
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0], std::make_pair(int64_t{0}, int64_t{1000}));
}

TEST(ThreadPoolTest, ResizeKeepsWorking) {
  ThreadPool pool(2);
  CheckCoverage(pool, 999, 7);
  pool.Resize(5);
  EXPECT_EQ(pool.num_threads(), 5);
  CheckCoverage(pool, 999, 7);
  pool.Resize(0);  // clamped to the caller alone
  EXPECT_EQ(pool.num_threads(), 1);
  CheckCoverage(pool, 999, 7);
}

TEST(ThreadPoolTest, ManyBackToBackJobs) {
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 500; ++rep)
    pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
  EXPECT_EQ(sum.load(), 500 * 4950);
}

TEST(ThreadPoolTest, GlobalPool) {
  ThreadPool& p = ThreadPool::Get();
  EXPECT_EQ(&p, &ThreadPool::Get());
  EXPECT_GE(p.num_threads(), 1);
  CheckCoverage(p, 12345, 100);
}

}  // namespace
}  // namespace tpu

namespace tpu {
namespace {

// Resize on one thread while others run jobs and read the size: every job still covers its range
// exactly once, and (under TSan, scripts/sanitize.sh) nothing races.
TEST(ThreadPoolTest, ResizeRacesWithParallelFor) {
  ThreadPool pool(3);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> jobs{0};
  std::vector<std::thread> users;
  for (int u = 0; u < 2; ++u) {
    users.emplace_back([&] {
      while (!stop.load()) {
        std::atomic<int64_t> sum{0};
        pool.ParallelFor(1000, 10, [&](int64_t b, int64_t e) {
          int64_t s = 0;
          for (int64_t i = b; i < e; ++i) s += i;
          sum.fetch_add(s);
        });
        EXPECT_EQ(sum.load(), 999 * 1000 / 2);
        int n = pool.num_threads();
        EXPECT_GE(n, 1);
        EXPECT_LE(n, 4);
        jobs.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 200; ++i) pool.Resize(1 + i % 4);
  // Let the users finish some jobs against the final size too.
  int64_t seen = jobs.load();
  while (jobs.load() < seen + 10) std::this_thread::yield();
  stop.store(true);
  for (auto& t : users) t.join();
  EXPECT_GT(jobs.load(), 0);
}

// Note [Chunk owners]: the caller starts at the front of the range, a worker in its own share (the
// back half for two threads), and neither leaves an index out.
TEST(ThreadPoolTest, EachThreadStartsWithTheChunksItOwns) {
  ThreadPool pool(2);
  std::mutex mu;
  std::vector<std::pair<std::thread::id, int64_t>> starts;  // each chunk's thread and begin
  std::atomic<int> started{0};
  const std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(8, 1, [&](int64_t b, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      starts.emplace_back(std::this_thread::get_id(), b);
    }
    started.fetch_add(1);
    // The caller's first chunk waits (up to 2 s) for the worker to take one, so both take part.
    if (b == 0)
      for (int i = 0; i < 2000 && started.load() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  ASSERT_EQ(starts.size(), 8u);
  std::vector<int64_t> firsts;
  std::set<std::thread::id> seen;
  for (auto& [id, b] : starts)
    if (seen.insert(id).second) firsts.push_back(id == caller ? -1 - b : b);
  ASSERT_EQ(seen.size(), 2u) << "the worker never took a chunk";
  for (int64_t f : firsts) {
    if (f < 0) EXPECT_EQ(-1 - f, 0) << "the caller starts at the front";
    else EXPECT_GE(f, 4) << "the worker starts in its own half";
  }
}

// Note [Sharing the cores with the producer]: runs a job of `chunks` chunks on the global pool
// from a thread marked as a queue worker, right after an op was "issued"; while a
// chunk runs, `during_chunk` may act. Returns the threads that ran chunks.
template <typename DuringChunk>
std::set<std::thread::id> RunAsQueueWorker(int64_t chunks, DuringChunk&& during_chunk) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int64_t> covered{0};
  std::thread worker([&] {
    ThreadPool::MarkQueueWorker();
    ThreadPool::NoteProducerActive();
    ThreadPool::Get().ParallelFor(chunks, 1, [&](int64_t b, int64_t e) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      during_chunk(b);
      covered += e - b;
    });
  });
  worker.join();
  EXPECT_EQ(covered.load(), chunks);
  return ids;
}

TEST(ThreadPoolTest, AJobStartedWhileAProducerIssuesLeavesTheProducerACore) {
  ThreadPool& pool = ThreadPool::Get();
  const int size = pool.size();
  pool.Resize(2);
  // Chunks long enough that an idle helper would take some: it is held back.
  auto ids = RunAsQueueWorker(8, [](int64_t) { BusyFor(std::chrono::microseconds(500)); });
  EXPECT_EQ(ids.size(), 1u);
  // Only the last helper is held back: with three threads, two run the job.
  pool.Resize(3);
  ids = RunAsQueueWorker(12, [](int64_t) { BusyFor(std::chrono::microseconds(500)); });
  EXPECT_EQ(ids.size(), 2u);
  pool.Resize(2);
  // A producer that starts to wait releases it into the running job: it takes the chunks nobody
  // has started (the first chunk waits for the wait to begin, the others are long).
  std::atomic<bool> started{false}, waiting{false};
  std::thread producer([&] {
    while (!started.load()) std::this_thread::yield();
    ThreadPool::ProducerWait wait;
    waiting.store(true);
    BusyFor(std::chrono::milliseconds(20));
  });
  ids = RunAsQueueWorker(8, [&](int64_t b) {
    started.store(true);
    if (b == 0)
      while (!waiting.load()) std::this_thread::yield();
    BusyFor(std::chrono::milliseconds(1));
  });
  producer.join();
  EXPECT_EQ(ids.size(), 2u);
  // Outside a queue worker (a small program run inline on the producer's thread) jobs use the
  // whole budget.
  ThreadPool::NoteProducerActive();
  std::set<std::thread::id> inline_ids;
  std::mutex mu;
  pool.ParallelFor(8, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      inline_ids.insert(std::this_thread::get_id());
    }
    BusyFor(std::chrono::milliseconds(1));
  });
  EXPECT_EQ(inline_ids.size(), 2u);
  pool.Resize(size);
}

#if defined(__linux__)
// Note [Unstacking the pool]: a thread moved off its core runs elsewhere at once, and its
// affinity is what it was (free to move back later).
TEST(ThreadPoolTest, MoveOffCpuLeavesTheCoreAndKeepsTheAffinity) {
  cpu_set_t before, after;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(before), &before), 0);
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "one allowed core";
  bool moved = false;
  for (int attempt = 0; attempt < 5 && !moved; ++attempt) {  // (the scheduler may move it back)
    const int cpu = CurrentCpu();
    ASSERT_GE(cpu, 0);
    ASSERT_TRUE(MoveOffCpu(cpu));
    moved = CurrentCpu() != cpu;
  }
  EXPECT_TRUE(moved);
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
  cpu_set_t only;
  CPU_ZERO(&only);
  CPU_SET(CurrentCpu(), &only);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(only), &only), 0);
  EXPECT_FALSE(MoveOffCpu(CurrentCpu()));  // nowhere else to go
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(before), &before), 0);
}

// Note [Steering a sleeping helper]: a helper blocked when a job is posted is woken off the
// poster's core (its affinity narrowed for the wake: counted), runs its chunk there while the
// poster's chunk waits for it, and has its own affinity back by the next job.
TEST(ThreadPoolTest, ABlockedHelperIsWokenOffThePostersCore) {
  cpu_set_t all;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(all), &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one allowed core";
  ThreadPool pool(2);
  const int cpu = CurrentCpu();
  cpu_set_t only;
  CPU_ZERO(&only);
  CPU_SET(cpu, &only);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(only), &only), 0);  // the poster stays put
  Counter* steered = GetCounter("pool_steered_wakes");
  const auto caller = std::this_thread::get_id();
  for (int job = 0; job < 3; ++job) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the helper blocks (spin: 50 us)
    const int64_t before = steered->value();
    std::atomic<int> helper_cpu{-1};
    std::atomic<bool> helper_ran{false};
    cpu_set_t helper_mask;
    CPU_ZERO(&helper_mask);
    pool.ParallelFor(2, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() == caller) {  // wait (up to 2 s) for the helper's chunk
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!helper_ran.load() && std::chrono::steady_clock::now() < deadline) CpuRelax();
        return;
      }
      helper_cpu = CurrentCpu();
      pthread_getaffinity_np(pthread_self(), sizeof(helper_mask), &helper_mask);
      helper_ran = true;
    });
    ASSERT_TRUE(helper_ran.load()) << "job " << job;
    EXPECT_EQ(steered->value(), before + 1) << "job " << job;
    EXPECT_NE(helper_cpu.load(), cpu) << "job " << job;
    // The affinity the helper runs with: its own again (restored when it woke).
    EXPECT_TRUE(CPU_EQUAL(&helper_mask, &all)) << "job " << job;
  }
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(all), &all), 0);
}
#endif

}  // namespace
}  // namespace tpu
