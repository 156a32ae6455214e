#include "torch/distributed/work.h"

#include <thread>

#include "torch/tensor_utils.h"

namespace tpu::dist {

TpuWork::TpuWork(int rank, c10d::OpType type, std::vector<Issued> parts, std::vector<at::Tensor> outputs,
                 bool blocking, uint64_t seq)
    : c10d::Work(rank, type),
      parts_(std::move(parts)),
      outputs_(std::move(outputs)),
      blocking_(blocking),
      seq_(seq),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {
  future_->markCompleted(c10::IValue(outputs_));
}

bool TpuWork::Done() const {
  for (const Issued& p : parts_)
    if (!p.queue->Done(p.seq)) return false;
  return true;
}

bool TpuWork::isCompleted() { return Done(); }

bool TpuWork::isSuccess() const {
  if (!Done()) return false;
  for (const Issued& p : parts_)
    if (p.state->failed()) return false;
  return true;
}

std::exception_ptr TpuWork::exception() const {
  if (!Done()) return nullptr;
  for (const Issued& p : parts_) {
    Status s = p.state->Get();
    if (!s.ok()) return std::make_exception_ptr(std::runtime_error(s.message()));
  }
  return nullptr;
}

int TpuWork::sourceRank() const {
  for (const Issued& p : parts_) {
    torch_bridge::Check(p.queue->WaitFor(p.seq));
    std::lock_guard<std::mutex> lock(p.state->mu);
    if (p.state->source >= 0) return p.state->source;
  }
  return -1;
}

bool TpuWork::wait(std::chrono::milliseconds timeout) {
  if (blocking_) {
    if (timeout.count() > 0) {
      auto until = std::chrono::steady_clock::now() + timeout;
      while (!Done()) {
        TORCH_CHECK(std::chrono::steady_clock::now() < until, "torch_tpu distributed: Work.wait timed out after ",
                    timeout.count(), " ms");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    for (const Issued& p : parts_) torch_bridge::Check(p.queue->WaitFor(p.seq));
    return true;
  }
  // Ordered already (one in-order queue per device): raise only what is known to have failed.
  for (const Issued& p : parts_)
    if (p.queue->Done(p.seq) && p.state->failed()) torch_bridge::Check(p.queue->WaitFor(p.seq));
  return true;
}

}  // namespace tpu::dist
