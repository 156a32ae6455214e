// oneDNN (Debian's build) parallelizes with OpenMP, whose thread count is a per-thread setting of
// the calling thread. Kernels run on the queue worker, on the thread that submitted a small
// program, or on autograd's device thread: each would otherwise get OpenMP's default team (all
// cores), oversubscribing the machine next to PyTorch's own pool and our thread pool.
#pragma once

#if __has_include(<omp.h>)
#include <omp.h>
#else
// A compiler without OpenMP headers of its own (clang for the sanitizer builds) still links
// libgomp, oneDNN's runtime: the two calls used here.
extern "C" int omp_get_max_threads(void);
extern "C" void omp_set_num_threads(int);
#endif

#include "base/thread_pool.h"

namespace tpu::host {

// Makes oneDNN calls from this thread use the executor's thread count.
inline void MatchOneDnnThreads() {
  int n = ThreadPool::Get().num_threads();
  if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

}  // namespace tpu::host
