// The one thread pool the host executor's kernels share. Sized explicitly (option num_threads)
// so that it never oversubscribes the cores together with PyTorch's own intra-op pool.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tpu {

class ThreadPool {
 public:
  static ThreadPool& Get();
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Resizes the pool (the caller counts as one thread). Not thread-safe against ParallelFor.
  void Resize(int num_threads);
  // Runs fn(begin, end) over [0, n) in chunks of at least `grain`, on the pool and the caller.
  // While the pool runs another caller's job (or when called from inside a chunk), fn runs on the
  // calling thread alone: callers never wait for each other.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void Start(int num_threads);
  void Stop();
  void WorkerLoop(uint64_t seen_generation);
  void RunChunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, next_chunk_ = 0, num_chunks_ = 0, chunks_done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::mutex call_mu_;  // held by the ParallelFor that owns the pool
};

}  // namespace tpu
