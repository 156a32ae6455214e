#include "base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "base/clock.h"
#include "base/cpu_relax.h"
#include "base/metrics.h"
#include "base/options.h"

namespace tpu {

namespace {
std::atomic<int (*)()> g_budget{nullptr};
thread_local bool t_queue_worker = false;
std::atomic<int> g_producers_waiting{0};
std::atomic<int64_t> g_last_enqueue_ns{0};
std::atomic<ThreadPool*> g_global_pool{nullptr};  // Get()'s, once made
}  // namespace

ThreadPool& ThreadPool::Get() {
  static ThreadPool* pool = [] {
    int64_t n = Flags().num_threads;
    if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
    auto* p = new ThreadPool(static_cast<int>(n));
    g_global_pool.store(p, std::memory_order_release);
    return p;
  }();
  return *pool;
}

// Note [Sharing the cores with the producer]: in strict mode the Python thread issues ops while
// the queue's worker runs earlier ones, so a busy step has one thread more than the budget: the
// producer, the queue worker and its helpers. A helper that shares a core with the producer is
// preempted in the middle of its chunks, and the job (every chunk of which the worker waits for)
// stalls for the scheduler's time slice: on 2 cores the Llama step's kernels showed outliers of
// 2.7-4.4 ms where they take ~0.15 ms. So a job the queue worker starts while a producer is
// issuing holds its last helper back, and the producer keeps a core to itself; kernels plan for the
// whole budget, and the worker (with the other helpers) takes the held helper's chunks. When a
// producer starts to wait for the device (a sync, back-pressure) it releases the held helper into
// the running job, and later jobs use the whole budget: a loop that issues a few large kernels and
// synchronizes loses almost nothing. Measured on the 2-core VM (bench_models, strict, alternating
// pool_producer_share_us=0 and 1000): Llama 41.1-41.5 -> 36.8-37.8 ms, HF Llama 44.8-48.5 ->
// 37.5-38.2, ResNet-18 train 7.1-7.5 -> 5.9-6.0, with bench_kernels unchanged.
void ThreadPool::MarkQueueWorker() { t_queue_worker = true; }
void ThreadPool::NoteProducerActive() { g_last_enqueue_ns.store(SteadyNowNs(), std::memory_order_relaxed); }
ThreadPool::ProducerWait::ProducerWait() {
  // Pairs with ParallelFor's store of helpers_held_ and its load of g_producers_waiting (both
  // seq_cst): either this wait sees the job's held helper, or the job sees this wait.
  g_producers_waiting.fetch_add(1, std::memory_order_seq_cst);
  // (Not Get(): a backend that never runs host kernels has no pool, and a wait makes none.)
  ThreadPool* pool = g_global_pool.load(std::memory_order_acquire);
  if (pool && pool->helpers_held_.load(std::memory_order_seq_cst)) pool->ReleaseHelpers();
}
ThreadPool::ProducerWait::~ProducerWait() { g_producers_waiting.fetch_sub(1, std::memory_order_relaxed); }

bool ThreadPool::ProducerIssuing() {
  if (!t_queue_worker || g_producers_waiting.load(std::memory_order_seq_cst) > 0) return false;
  const int64_t share_ns = Flags().pool_producer_share_us * 1000;
  return share_ns > 0 && SteadyNowNs() - g_last_enqueue_ns.load(std::memory_order_relaxed) < share_ns;
}

void ThreadPool::ReleaseHelpers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!helpers_held_.load(std::memory_order_relaxed)) return;
    helpers_held_.store(false, std::memory_order_relaxed);
    posted_.store(generation_, std::memory_order_release);
  }
  cv_.notify_all();
}

void ThreadPool::SetBudget(int (*budget)()) { g_budget.store(budget); }

bool ThreadPool::Worth(int64_t elements) { return elements >= Flags().parallel_min_elements; }

int ThreadPool::num_threads() const {
  int n = size();
  if (int (*budget)() = g_budget.load(std::memory_order_relaxed)) n = std::max(1, std::min(n, budget()));
  return n;
}

struct ThreadPool::Sleep {
  bool blocked = false;  // waiting on cv_ (not spinning, not running chunks)
  bool steered = false;  // its affinity was narrowed for this wake; `restore` is its own
#if defined(__linux__)
  cpu_set_t restore;
#endif
};

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
  sleep_.clear();  // (all made before any worker runs: the vector never moves under them)
  for (int i = 1; i < num_threads; ++i) sleep_.push_back(std::make_unique<Sleep>());
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
  sleep_.clear();
  size_.store(1, std::memory_order_relaxed);
}

void ThreadPool::Resize(int num_threads) {
  std::lock_guard<std::mutex> call(call_mu_);
  if (num_threads < 1) num_threads = 1;
  if (num_threads == size()) return;
  Stop();
  Start(num_threads);
}

namespace {

// Note [Pool spinning]: after a job, workers (and a caller waiting for the last chunks) spin for
// a short while before they block: kernels come back to back in a program, and waking a blocked
// thread costs several microseconds each time. An idle pool sleeps: the spin is bounded.
template <typename Done>
void SpinUntil(Done&& done) {
  const int64_t us = Flags().pool_spin_us;
  if (us == 0) return;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (int i = 1; !done(); ++i) {
    CpuRelax();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() > deadline) return;
  }
}

}  // namespace

// Note [Unstacking the pool]: a worker blocked on the pool's condition variable is woken by the
// job's caller, and the scheduler may place it on the caller's own core -- it does, on the 2-vCPU
// VM, when the other core is busy at that moment (the Python thread still issuing ops) -- where
// the two then share one core while the job waits for both. The balancer leaves such a pair
// alone as long as both ran within its migration-cost window, which a worker spinning between
// back-to-back kernels always has: after a pause of 50 ms, a batch of 15 gelus over a
// (4096, 1024) float32 tensor ran at 2.0-2.4 ms each, one thread's speed (0.82 ms back to back),
// with the worker and its helper runnable on the same core in most samples of /proc's placement.
// So a worker that finds itself on the caller's core when it wakes for a job moves away: its
// affinity set to the allowed cores but that one (the kernel migrates it at once), then restored
// in full, so it stays free to move later. Only where the process may use another core; the call
// costs two system calls, and only in that case.
int CurrentCpu() {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

#if defined(__linux__)
namespace {
// Narrows thread t's affinity to its allowed cores but `cpu`, the allowed set left in *allowed;
// false (nothing changed) where `cpu` is not among them, is the only one, or the call fails.
bool AllowAllBut(pthread_t t, int cpu, cpu_set_t* allowed) {
  if (cpu < 0 || cpu >= CPU_SETSIZE || pthread_getaffinity_np(t, sizeof(*allowed), allowed) != 0 ||
      !CPU_ISSET(cpu, allowed))
    return false;
  cpu_set_t others = *allowed;
  CPU_CLR(cpu, &others);
  return CPU_COUNT(&others) > 0 && pthread_setaffinity_np(t, sizeof(others), &others) == 0;
}
}  // namespace
#endif

bool MoveOffCpu(int cpu) {
#if defined(__linux__)
  cpu_set_t allowed;
  if (!AllowAllBut(pthread_self(), cpu, &allowed)) return false;  // (the kernel migrates it at once)
  pthread_setaffinity_np(pthread_self(), sizeof(allowed), &allowed);
  return true;
#else
  (void)cpu;
  return false;
#endif
}

// Note [Steering a sleeping helper]: a worker blocked on the condition variable is woken where
// the scheduler likes, and on the 2-vCPU VM it often likes the poster's own core even while the
// other one idles (an idle vCPU the hypervisor has descheduled does not count as an idle choice):
// the wakee is queued behind the poster, which then runs every chunk of the job itself, until
// the balancer moves the helper 1-4 ms later. A sched trace of a layer norm over (4096, 1024)
// issued 9 at a time after 20 ms pauses showed it at most kernels: the helper waited 36 times
// more than 0.5 ms (73 ms in all) in the poster's run queue, and the kernels took 1.7-1.8 ms each
// against 0.8 back to back. So a poster waking a blocked worker first narrows the worker's
// affinity to the allowed cores but its own, and the worker restores its affinity as soon as it
// runs (the same trace: 3 waits over 0.5 ms, 8 ms in all; 0.9-1.2 ms a kernel). Three system
// calls a wake, only for a worker that was blocked (not spinning): a char_gpt strict step makes
// ~18 such wakes. Note [Unstacking the pool] covers a worker that was spinning on the poster's
// core.
void ThreadPool::SteerSleepers(int threads) {
#if defined(__linux__)
  const int cpu = job_cpu_;
  if (!Flags().pool_steer || cpu < 0) return;
  for (int i = 0; i + 1 < threads && i < static_cast<int>(workers_.size()); ++i) {
    Sleep& sleep = *sleep_[i];
    if (Held(i) || sleep.steered || !sleep.blocked) continue;
    sleep.steered = AllowAllBut(workers_[i].native_handle(), cpu, &sleep.restore);
    if (sleep.steered) {
      static Counter* const steered = GetCounter("pool_steered_wakes");
      steered->Add();
    }
  }
#else
  (void)threads;
#endif
}

void ThreadPool::RestoreAffinity(const Sleep& sleep) {
#if defined(__linux__)
  pthread_setaffinity_np(pthread_self(), sizeof(sleep.restore), &sleep.restore);
#else
  (void)sleep;
#endif
}

int64_t ThreadPool::NextChunk(int p) const {
  // Participant q owns chunks [first(q), first(q + 1)); it runs those in order, then takes the
  // last unclaimed chunk of the others (their owners work from the front).
  const int t = job_threads_;
  auto first = [&](int q) { return q * num_chunks_ / t; };
  for (int64_t c = first(p); c < first(p + 1); ++c)
    if (!taken_[c]) return c;
  for (int d = 1; d < t; ++d) {
    int q = (p + d) % t;
    for (int64_t c = first(q + 1) - 1; c >= first(q); --c)
      if (!taken_[c]) return c;
  }
  return -1;
}

void ThreadPool::RunChunks(int p) {
  // Called with mu_ held; releases it while running a chunk.
  while (job_ != nullptr) {
    int64_t c = NextChunk(p);
    if (c < 0) return;
    taken_[c] = 1;
    const auto* fn = job_;
    // Even split: every chunk holds floor or ceil of n / num_chunks (>= grain) indices.
    int64_t b = c * job_n_ / num_chunks_, e = (c + 1) * job_n_ / num_chunks_;
    mu_.unlock();
    (*fn)(b, e);
    mu_.lock();
    if (chunks_done_.fetch_add(1, std::memory_order_release) + 1 == num_chunks_) done_cv_.notify_all();
  }
}

void ThreadPool::WorkerLoop(uint64_t seen, int index) {
  bool took_part = false;  // only a worker that ran the last job spins for the next one
  while (true) {
    if (took_part) SpinUntil([&] { return posted_.load(std::memory_order_acquire) != seen; });
    std::unique_lock<std::mutex> lock(mu_);
    Sleep& sleep = *sleep_[index];
    sleep.blocked = true;
    cv_.wait(lock, [&] { return stop_ || (generation_ != seen && !Held(index)); });
    sleep.blocked = false;
    if (stop_) return;
    seen = generation_;
    if (sleep.steered) {  // Note [Steering a sleeping helper]: free to move again
      sleep.steered = false;
      lock.unlock();
      RestoreAffinity(sleep);
      lock.lock();
      if (generation_ != seen || job_ == nullptr) continue;  // (that job ended meanwhile)
    }
    took_part = index + 1 < job_threads_;  // beyond the job's budget: sit this one out
    if (!took_part) continue;
    if (const int cpu = job_cpu_; cpu >= 0 && Flags().pool_unstack && CurrentCpu() == cpu) {
      lock.unlock();  // Note [Unstacking the pool]
      MoveOffCpu(cpu);
      lock.lock();
      if (generation_ != seen || job_ == nullptr) continue;  // (that job ended meanwhile)
    }
    RunChunks(index + 1);
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
  job_cpu_ = CurrentCpu();  // Note [Unstacking the pool]
  num_chunks_ = chunks;
  taken_.assign(static_cast<size_t>(chunks), 0);
  chunks_done_.store(0, std::memory_order_relaxed);
  ++generation_;
  // Note [Sharing the cores with the producer]: while a producer issues, the last helper sits
  // the job out (not woken, not spinning for it); a producer that starts to wait releases it, and
  // it takes the chunks nobody has started.
  bool held = this == g_global_pool.load(std::memory_order_relaxed) && ProducerIssuing();
  if (held) {
    helpers_held_.store(true, std::memory_order_seq_cst);
    // A producer that began to wait before the store above is seen here.
    held = g_producers_waiting.load(std::memory_order_seq_cst) == 0;
    if (!held) helpers_held_.store(false, std::memory_order_relaxed);
  }
  if (!held || threads > 2) {
    SteerSleepers(threads);
    posted_.store(generation_, std::memory_order_release);
    cv_.notify_all();
  }
  RunChunks(0);
  if (chunks_done_.load(std::memory_order_acquire) != num_chunks_) {
    lock.unlock();
    SpinUntil([&] { return chunks_done_.load(std::memory_order_acquire) == chunks; });
    lock.lock();
    done_cv_.wait(lock, [&] { return chunks_done_.load(std::memory_order_relaxed) == num_chunks_; });
  }
  job_ = nullptr;
  helpers_held_.store(false, std::memory_order_relaxed);
}

}  // namespace tpu
