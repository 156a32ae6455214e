#include "torch/sync_wait.h"

#include <Python.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/autograd.h>
#include <pybind11/pybind11.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "backends/backends.h"
#include "torch/deferred/window.h"
#include "torch/fork.h"

namespace tpu::torch_bridge {
namespace {

// How long a sync point waits before it first looks for a signal, and between looks: short
// waits never touch the GIL; a Ctrl-C is seen within this period.
constexpr int64_t kSignalPeriodUs = 20 * 1000;

void CancelEveryDevice() {
  Backend& backend = GetBackend();
  for (int i = 0; i < backend.device_count(); ++i)
    backend.device(i).queue().Cancel(
        Cancelled("interrupted: the program was interrupted (KeyboardInterrupt) at a sync point, and the device "
                  "work queued until then that had not started was cancelled"));
}

std::atomic<bool> g_errors_at_exit{false};

}  // namespace

void WaitInterruptibly(Queue& queue, uint64_t seq) {
  if (queue.Done(seq) || queue.WaitDone(seq, kSignalPeriodUs)) return;
  if (!Py_IsInitialized()) {
    while (!queue.WaitDone(seq, kSignalPeriodUs)) {
    }
    return;
  }
  while (!queue.WaitDone(seq, kSignalPeriodUs)) {
    PyGILState_STATE gil = PyGILState_Ensure();
    if (PyErr_CheckSignals() != 0) {  // a handler raised: KeyboardInterrupt, usually
      python_error error;
      error.persist();
      PyGILState_Release(gil);
      CancelEveryDevice();
      throw error;
    }
    PyGILState_Release(gil);
  }
}

std::string TakeErrorsAtExit() {
  if (InBadFork() || !BackendCreated()) return "";
  std::string out;
  Backend& backend = GetBackend();
  try {
    CutAllWindows(CutReason::kSynchronize);
  } catch (const c10::Error& e) {  // out of memory for a window's results: that is lost work too
    out += std::string("the pending fused window could not run: ") + e.what_without_backtrace() + "\n";
  }
  for (int i = 0; i < backend.device_count(); ++i) {
    Queue& q = backend.device(i).queue();
    WaitInterruptibly(q, q.submitted());
    Status st = q.Synchronize();
    for (; !st.ok(); st = q.TakeAnyError()) out += "tpu:" + std::to_string(i) + ": " + st.message() + "\n";
  }
  if (!out.empty()) g_errors_at_exit.store(true);
  return out;
}

void DrainAutogradDeviceThreads() {
  if (InBadFork() || !BackendCreated()) return;
  for (int i = 0; i < GetBackend().device_count(); ++i) {
    try {
      at::AutoGradMode grad_mode(true);
      at::TensorOptions options = at::TensorOptions().device(c10::DeviceType::PrivateUse1, i);
      at::Tensor x = at::empty({1}, options).requires_grad_();
      at::Tensor y = x.view({-1});  // ViewBackward: its task runs on the thread of device index i
      at::Tensor g = at::empty({1}, options);
      pybind11::gil_scoped_release no_gil;
      torch::autograd::grad({y}, {x}, {g}, /*retain_graph=*/false, /*create_graph=*/false,
                            /*allow_unused=*/true);
    } catch (const std::exception&) {
      // A device that cannot run even this (out of memory, a failed backend) has no autograd work
      // of its own either; exit goes on.
    }
  }
}

void RegisterExitStatusHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef __GLIBC__
    on_exit(
        [](int status, void*) {
          if (status != 0 || !g_errors_at_exit.load() || InBadFork()) return;
          std::fflush(nullptr);
          _exit(1);
        },
        nullptr);
#endif
  });
}

}  // namespace tpu::torch_bridge
