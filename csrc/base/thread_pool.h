// The one thread pool the host executor's kernels share. Its size is the option num_threads (0:
// all cores), and a job uses at most the budget on top of that: the torch layer makes the budget
// PyTorch's intra-op thread count, so torch.set_num_threads(n) caps the kernels at n threads too
// (one thread budget for both, whichever runs).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tpu {

class ThreadPool {
 public:
  static ThreadPool& Get();
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  // Threads a ParallelFor uses now: the pool's size capped by the budget.
  int num_threads() const;
  // Threads the pool has (the caller counts as one); readable without a lock.
  int size() const { return size_.load(std::memory_order_relaxed); }
  // Caps every job at budget() threads (null: no cap). Set once, by the torch layer.
  static void SetBudget(int (*budget)());
  // Resizes the pool (the caller counts as one thread). Safe against ParallelFor on other
  // threads: it waits for a running job to finish (and a ParallelFor meanwhile runs on its
  // caller). Never call it from inside a job.
  void Resize(int num_threads);
  // Runs fn(begin, end) over [0, n) in chunks of at least `grain`, on the pool and the caller.
  // While the pool runs another caller's job (or when called from inside a chunk), fn runs on the
  // calling thread alone: callers never wait for each other. Note [Chunk owners]: each thread
  // first runs the chunks it owns (an even, contiguous share of [0, n)), then takes chunks nobody
  // has started; so the same thread touches the same part of a tensor from one kernel to the
  // next, and its cache still holds it.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // Whether a memory-bound kernel touching `elements` is worth splitting (option
  // parallel_min_elements): waking the pool and waiting for it costs tens of microseconds on a
  // busy machine, more than a small kernel takes on one thread.
  static bool Worth(int64_t elements);

  // Note [Sharing the cores with the producer]: a queue's producer (the Python thread issuing
  // ops) needs a core while it issues; a pool thread that shares its core stalls every job it
  // takes part in. The queue's worker thread calls MarkQueueWorker() once; producers call
  // NoteProducerActive() at each enqueue and hold a ProducerWait while they wait for the device.
  // A job the queue worker starts while a producer issues (an enqueue within the last
  // pool_producer_share_us, none waiting) leaves its last helper out until a producer starts to
  // wait: that helper then joins and takes the chunks nobody has started. Kernels still plan
  // their splits for num_threads(). Only the global pool (Get()) does this.
  static void MarkQueueWorker();
  static void NoteProducerActive();
  class ProducerWait {
   public:
    ProducerWait();
    ~ProducerWait();
    ProducerWait(const ProducerWait&) = delete;
    ProducerWait& operator=(const ProducerWait&) = delete;
  };

 private:
  struct Sleep;  // thread_pool.cc
  static bool ProducerIssuing();
  void ReleaseHelpers();
  // Whether worker `index` sits the current job out (mu_ held).
  bool Held(int index) const {
    return helpers_held_.load(std::memory_order_relaxed) && index + 2 == job_threads_;
  }
  void Start(int num_threads);
  void Stop();
  void WorkerLoop(uint64_t seen_generation, int index);
  // Note [Steering a sleeping helper] (thread_pool.cc); mu_ held.
  void SteerSleepers(int threads);
  static void RestoreAffinity(const Sleep& sleep);
  // Runs chunks for participant p (0: the caller, i + 1: worker i) until none is left.
  void RunChunks(int p);
  int64_t NextChunk(int p) const;

  std::vector<std::thread> workers_;  // changed only with call_mu_ held
  // Per worker (Note [Steering a sleeping helper]): whether it is blocked, and the affinity to
  // restore after a steered wake; with mu_ held.
  std::vector<std::unique_ptr<Sleep>> sleep_;
  std::atomic<int> size_{1};          // workers_.size() + 1
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, num_chunks_ = 0;
  std::vector<uint8_t> taken_;              // per chunk of the job: claimed by a participant
  std::atomic<int64_t> chunks_done_{0};     // written with mu_ held; read while spinning
  int job_threads_ = 1;  // workers with index + 1 < job_threads_ take part
  int job_cpu_ = -1;     // the core the job's caller ran on when it posted it (Note [Unstacking the pool])
  uint64_t generation_ = 0;
  std::atomic<uint64_t> posted_{0};  // generation_, readable without the lock (spinning workers)
  bool stop_ = false;
  // The job's last helper is held back (Note [Sharing the cores ...]); written with mu_ held, read
  // without it by a producer that starts to wait.
  std::atomic<bool> helpers_held_{false};
  std::mutex call_mu_;  // held by the ParallelFor that owns the pool, or by Resize
};

// Note [Unstacking the pool] (thread_pool.cc): the core the calling thread runs on (-1 where
// unknown), and moving the calling thread off core `cpu` onto another core it may use, its
// affinity left as it was; false where it could not (one allowed core, not Linux).
int CurrentCpu();
bool MoveOffCpu(int cpu);

}  // namespace tpu
