#include "torch/deferred/capture.h"

#include <c10/util/Exception.h>

#include "torch/tensor_utils.h"

namespace tpu::torch_bridge {
namespace {

thread_local CaptureScope* g_active = nullptr;

}  // namespace

CaptureScope::CaptureScope(int device, bool dense) : device_(device), window_(device, /*capture=*/true, dense) {
  TORCH_CHECK(g_active == nullptr, "torch_tpu: a graph is already being captured on this thread");
  g_active = this;
}

CaptureScope::~CaptureScope() {
  Deactivate();
  window_.Discard();
}

void CaptureScope::Deactivate() {
  if (active_ && g_active == this) g_active = nullptr;
  active_ = false;
}

CaptureScope* ActiveCapture() { return g_active; }

void CaptureBreak(const std::string& why) {
  if (g_active) g_active->set_break_reason(why);
  TORCH_CHECK(false, "torch_tpu: this graph cannot be captured as one program: ", why);
}

// ---- hooks for the rest of the torch layer (tensor_utils.h) ---------------------------------

void NoteNewBuffer(const Buffer* buffer) {
  if (g_active) g_active->NoteCreated(buffer);
}

}  // namespace tpu::torch_bridge
