// Note [Fork]: the device counts as initialised once torch_tpu registered it (import), as
// torch.tpu.is_initialized() says: from then on, threads may exist that a forked child does not
// inherit (the queue worker, the thread pool, autograd's device thread), and device work in the
// child would wait for them forever. A child handler marks the child; DeviceFor, where every
// allocation, launch, copy and sync starts, refuses in it. CPU work in the child is unaffected,
// and a child that exits through os._exit (multiprocessing does) frees nothing on the device.
#include "torch/fork.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <atomic>
#include <mutex>

namespace tpu::torch_bridge {
namespace {

std::atomic<bool> g_in_bad_fork{false};

void OnForkChild() { g_in_bad_fork.store(true, std::memory_order_relaxed); }

}  // namespace

void RegisterForkHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    TORCH_CHECK(pthread_atfork(nullptr, nullptr, &OnForkChild) == 0,
                "torch_tpu: pthread_atfork failed");
  });
}

bool InBadFork() { return g_in_bad_fork.load(std::memory_order_relaxed); }

void CheckNotInBadFork() {
  TORCH_CHECK(!InBadFork(),
              "cannot re-initialize the tpu device in a forked subprocess: the parent had "
              "initialized it, and its worker threads do not exist in the child. To use the tpu "
              "device with multiprocessing, use the 'spawn' start method "
              "(multiprocessing.set_start_method('spawn'), or "
              "DataLoader(..., multiprocessing_context='spawn')); CPU work in a forked worker "
              "is fine.");
}

}  // namespace tpu::torch_bridge
