// Capture: a compiled graph (torch.compile(backend="tpu"), torch_tpu/compile/) recorded as one
// program by the deferred engine, then replayed on new inputs without re-tracing.
//
// Note [Capture]: the graph's ATen ops run once, on the real inputs, inside a CaptureScope. Every
// op lowers as in any mode (the same lowerings) and Lowering::Run records it into the scope's own
// Window (capture mode: it never cuts). Inputs' storages enter as parameters bound to their
// buffers; values the graph computes stay IR values; writes into inputs are pending values of
// their storages. Nothing runs while capturing, and nothing that would need a value on the host
// may happen: a host read, a device sync, a CPU-fallback op or a dtype-reinterpreting view ends the
// capture with a reason (CaptureBreak), and the caller runs that graph in fused eager instead.
//
// FinishCapture (captured_graph.h) names the graph's inputs and outputs and turns the recording into a CapturedGraph:
// the program (results: the new values of written inputs, then the storages of the outputs),
// compiled through the compile cache, and the recipe that binds a call's arguments to it --
// each window parameter is (input i, the same byte offset/sizes/strides in its storage), a
// buffer held by the graph (a constant), a scalar (its value at capture: constant per graph), or
// a random op's {seed, offset} (drawn again from its generator at each replay). Replay() checks a
// call's arguments against the capture's (dtypes, sizes, strides, storage offsets and sizes,
// which inputs share a storage, the values of non-tensor and CPU-tensor arguments), binds them,
// allocates the outputs' storages and queues one launch. Outputs that are views of inputs (or of
// each other) come back as views of the same storages, with PyTorch's geometry.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "torch/deferred/window.h"

namespace tpu::torch_bridge {

class CaptureScope {
 public:
  // Makes a capture on `device` the calling thread's active one (one at a time per thread).
  // `dense`: storages enter as whole-buffer parameters (Window's `dense`), for export.
  explicit CaptureScope(int device, bool dense = false);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

  Window& window() { return window_; }
  int device() const { return device_; }
  // Buffers allocated while capturing (the graph's own intermediates and outputs).
  void NoteCreated(const Buffer* b) { created_.insert(b); }
  bool Created(const Buffer* b) const { return created_.count(b) != 0; }
  // Why the capture had to stop ("" while it has not).
  const std::string& break_reason() const { return break_reason_; }
  void set_break_reason(std::string why) {
    if (break_reason_.empty()) break_reason_ = std::move(why);
  }
  // Stops being the thread's active capture (Finish and discarding do it).
  void Deactivate();

 private:
  int device_;
  Window window_;
  std::unordered_set<const Buffer*> created_;
  std::string break_reason_;
  bool active_ = true;
};

// The calling thread's active capture, or null.
CaptureScope* ActiveCapture();
// Ends the active capture with `why` ("the graph cannot be one program because <why>").
[[noreturn]] void CaptureBreak(const std::string& why);

}  // namespace tpu::torch_bridge
