#include "base/thread_pool.h"

#include <algorithm>
#include <atomic>

#include "base/options.h"

namespace tpu {

ThreadPool& ThreadPool::Get() {
  static ThreadPool* pool = [] {
    int64_t n = Flags().num_threads;
    if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
    return new ThreadPool(static_cast<int>(n));
  }();
  return *pool;
}

namespace {
std::atomic<int (*)()> g_budget{nullptr};
}  // namespace

void ThreadPool::SetBudget(int (*budget)()) { g_budget.store(budget); }

bool ThreadPool::Worth(int64_t elements) { return elements >= Flags().parallel_min_elements; }

int ThreadPool::num_threads() const {
  int n = size();
  if (int (*budget)() = g_budget.load(std::memory_order_relaxed)) n = std::max(1, std::min(n, budget()));
  return n;
}

ThreadPool::ThreadPool(int num_threads) {
  std::lock_guard<std::mutex> call(call_mu_);
  Start(num_threads);
}
ThreadPool::~ThreadPool() { Stop(); }

void ThreadPool::Start(int num_threads) {
  stop_ = false;
  // Workers start from the generation current now: a job posted before a new thread first takes
  // the lock must still wake it.
  uint64_t generation = generation_;
  for (int i = 1; i < num_threads; ++i)
    workers_.emplace_back([this, generation, i] { WorkerLoop(generation, i - 1); });
  size_.store(static_cast<int>(workers_.size()) + 1, std::memory_order_relaxed);
}

void ThreadPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  size_.store(1, std::memory_order_relaxed);
}

void ThreadPool::Resize(int num_threads) {
  std::lock_guard<std::mutex> call(call_mu_);
  if (num_threads < 1) num_threads = 1;
  if (num_threads == size()) return;
  Stop();
  Start(num_threads);
}

void ThreadPool::RunChunks() {
  // Called with mu_ held; releases it while running a chunk.
  while (job_ != nullptr && next_chunk_ < num_chunks_) {
    int64_t c = next_chunk_++;
    const auto* fn = job_;
    // Even split: every chunk holds floor or ceil of n / num_chunks (>= grain) indices.
    int64_t b = c * job_n_ / num_chunks_, e = (c + 1) * job_n_ / num_chunks_;
    mu_.unlock();
    (*fn)(b, e);
    mu_.lock();
    if (++chunks_done_ == num_chunks_) done_cv_.notify_all();
  }
}

void ThreadPool::WorkerLoop(uint64_t seen, int index) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index + 1 < job_threads_) RunChunks();  // beyond the job's budget: sit this one out
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = num_threads();
  if (threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // One job at a time on the pool; a caller that finds it busy (another virtual device's kernel,
  // or a kernel nested inside a chunk) runs its loop itself instead of waiting for the pool, so
  // no kernel ever blocks behind another one.
  std::unique_lock<std::mutex> call(call_mu_, std::try_to_lock);
  if (!call.owns_lock()) {
    fn(0, n);
    return;
  }
  // A racing Resize may have changed the size: read it again now that it cannot change.
  threads = num_threads();
  if (threads == 1) {
    fn(0, n);
    return;
  }
  // At most n / grain chunks, so that every chunk gets at least `grain` indices.
  int64_t chunks = std::min<int64_t>(threads * 4, n / grain);
  std::unique_lock<std::mutex> lock(mu_);
  job_threads_ = threads;
  job_ = &fn;
  job_n_ = n;
  num_chunks_ = chunks;
  next_chunk_ = 0;
  chunks_done_ = 0;
  ++generation_;
  cv_.notify_all();
  RunChunks();
  done_cv_.wait(lock, [&] { return chunks_done_ == num_chunks_; });
  job_ = nullptr;
}

}  // namespace tpu
