// oneDNN state that belongs to the calling thread. Kernels run on the queue worker, on the thread
// that submitted a small program, on autograd's device thread or on a pool thread, and a cached
// primitive runs on whichever of them calls next:
// - Note [oneDNN on one thread]: Debian's oneDNN parallelizes with OpenMP (libgomp, the runtime
//   PyTorch's CPU ops use too). Every thread that opens a parallel region gets a team of its own:
//   a oneDNN call on the queue worker beside PyTorch's team on the main thread puts more OpenMP
//   threads in the process than cores, and libgomp then stops spinning between regions for *every*
//   team ("throttled" waiting): PyTorch's small CPU ops in the same process became ~3.5x slower
//   (a 256x1024 add: 15.7 -> 54.5 us) after the first device matmul, and forcing spinning instead
//   (OMP_WAIT_POLICY=ACTIVE) halved the device's speed. So oneDNN runs each call on the calling
//   thread (a team size of 1 while it runs: no team is made), and the kernels split large problems
//   over our pool themselves (matmul by batch, rows or columns; convolution by images): one set
//   of threads, one thread budget.
// - Streams are not meant to be shared between threads: one per thread, on the one engine.
// - Scratchpads: in oneDNN's default (library) mode a primitive's scratchpad is memory of the
//   thread that created it, sized for it there, and a run on another thread reads that thread's
//   (smaller, or none): "could not execute a primitive", or a heap overrun. So every cached
//   primitive is created with a user scratchpad (UserScratchpad()) and each run passes this
//   thread's buffer (AddThreadScratchpad), which also makes concurrent runs of one primitive safe.
#pragma once

#include <algorithm>
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

#include "oneapi/dnnl/dnnl.hpp"

namespace tpu::host {

// While alive, oneDNN calls (primitive creation too: oneDNN sizes a kernel's blocking for the team
// it expects) run on this thread alone (Note [oneDNN on one thread]). Restores the thread's team
// size after: the submitting thread may be PyTorch's main thread, whose setting is PyTorch's.
class OneDnnOnThisThread {
 public:
  OneDnnOnThisThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneDnnOnThisThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneDnnOnThisThread(const OneDnnOnThisThread&) = delete;
  OneDnnOnThisThread& operator=(const OneDnnOnThisThread&) = delete;

 private:
  int saved_;
};

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

struct FreeAligned {
  void operator()(void* p) const { std::free(p); }
};

// Memory for this thread's reordered operands of a primitive (slot: the operand's role, 0-2),
// reused by the next call instead of allocated afresh: a fresh multi-megabyte block comes from
// mmap and every call paid its page faults again (~2,300 for a 4-image 64x56x56 convolution, a
// third of the call's time on two threads). Kept up to kKeptOperandBytes per slot (so at most
// 48 MiB per thread that runs convolutions, outside the device's memory accounting); a larger
// block goes to `own`, the caller's, and is freed with it: its page faults are small next to the
// convolution of so large an operand. Null when the memory cannot be had.
constexpr size_t kKeptOperandBytes = size_t{16} << 20;
inline void* ThreadOperandBuffer(int slot, size_t bytes, std::unique_ptr<void, FreeAligned>& own) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  if (bytes > kKeptOperandBytes) {
    own.reset(std::aligned_alloc(64, bytes));
    return own.get();
  }
  thread_local std::unique_ptr<void, FreeAligned> kept[3];
  thread_local size_t capacity[3] = {0, 0, 0};
  if (bytes > capacity[slot]) {
    kept[slot].reset();
    capacity[slot] = bytes;
    kept[slot].reset(std::aligned_alloc(64, bytes));
    if (!kept[slot]) {
      capacity[slot] = 0;
      return nullptr;
    }
  }
  return kept[slot].get();
}

// This thread's scratchpad as the memory a run of a primitive with descriptor `md` needs; it grows
// to the largest asked for on this thread and lives as long as the thread. Adds it to `args`
// (nothing when the primitive needs none); false when the memory cannot be had.
[[nodiscard]] inline bool AddThreadScratchpad(const dnnl::memory::desc& md, const dnnl::engine& engine,
                                              std::unordered_map<int, dnnl::memory>& args) {
  const size_t bytes = md.get_size();
  if (bytes == 0) return true;
  thread_local std::unique_ptr<void, FreeAligned> buffer;
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
