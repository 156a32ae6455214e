// TpuWork: c10d's handle on queued collectives (Note [Collectives on the device queue]).
//
// Note [Waiting on collectives]: as with any device op, the issuing thread never waits for a
// collective; wait() orders what follows after it, which the device's in-order queue already
// does, so it returns at once -- raising the collective's error if it has already failed. With
// option dist_blocking_wait (TORCH_TPU_DIST_BLOCKING_WAIT=1), in debug eager mode, and for
// barrier(), wait() blocks until the collective has run on this rank and raises its error there.
// A failed collective's outputs hold no value: the sync point that reads one raises its error
// (the collective and the user's line). get_future() is completed at once with the outputs,
// ordered like them on the device (a callback's device ops queue behind the collective).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

#include "torch/distributed/issue.h"

namespace tpu::dist {

class TpuWork final : public c10d::Work {
 public:
  TpuWork(int rank, c10d::OpType type, std::vector<Issued> parts, std::vector<at::Tensor> outputs, bool blocking,
          uint64_t seq);
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override { return future_; }
  uint64_t getSequencenumber() const override { return seq_; }

 private:
  bool Done() const;
  std::vector<Issued> parts_;
  std::vector<at::Tensor> outputs_;
  const bool blocking_;
  const uint64_t seq_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace tpu::dist
