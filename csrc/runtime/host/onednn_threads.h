// oneDNN state that belongs to the calling thread. Kernels run on the queue worker, on the thread
// that submitted a small program, or on autograd's device thread, and a cached primitive runs on
// whichever of them calls next:
// - OpenMP's team size (Debian's oneDNN parallelizes with OpenMP) is a per-thread setting: each
//   thread would otherwise get OpenMP's default team (all cores), oversubscribing the machine
//   next to PyTorch's own pool and our thread pool.
// - Streams are not meant to be shared between threads: one per thread, on the one engine.
// - Scratchpads: in oneDNN's default (library) mode a primitive's scratchpad is memory of the
//   thread that created it, sized for it there, and a run on another thread reads that thread's
//   (smaller, or none): "could not execute a primitive", or a heap overrun. So every cached
//   primitive is created with a user scratchpad (UserScratchpad()) and each run passes this
//   thread's buffer (AddThreadScratchpad), which also makes concurrent runs of one primitive safe.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#if __has_include(<omp.h>)
#include <omp.h>
#else
// A compiler without OpenMP headers of its own (clang for the sanitizer builds) still links
// libgomp, oneDNN's runtime: the two calls used here.
extern "C" int omp_get_max_threads(void);
extern "C" void omp_set_num_threads(int);
#endif

#include "base/thread_pool.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tpu::host {

// Makes oneDNN calls from this thread use the executor's thread count.
inline void MatchOneDnnThreads() {
  int n = ThreadPool::Get().num_threads();
  if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

// The one CPU engine every primitive is made on (a stream runs only its own engine's primitives).
inline const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

inline dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

// Attributes for a primitive that is cached and may run on any thread (see above).
inline dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// This thread's scratchpad as the memory a run of a primitive with descriptor `md` needs; it grows
// to the largest asked for on this thread and lives as long as the thread. Adds it to `args`
// (nothing when the primitive needs none); false when the memory cannot be had.
[[nodiscard]] inline bool AddThreadScratchpad(const dnnl::memory::desc& md, const dnnl::engine& engine,
                                              std::unordered_map<int, dnnl::memory>& args) {
  const size_t bytes = md.get_size();
  if (bytes == 0) return true;
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<void, Free> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    buffer.reset();  // (free first: the peak is the new size, not both)
    capacity = (bytes + 63) / 64 * 64;
    buffer.reset(std::aligned_alloc(64, capacity));
    if (!buffer) {
      capacity = 0;
      return false;
    }
  }
  args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(md, engine, buffer.get());
  return true;
}

}  // namespace tpu::host
