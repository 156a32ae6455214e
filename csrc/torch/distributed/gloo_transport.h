// GlooTransport: the collectives of a process group whose ranks are on several hosts, through a
// PyTorch Gloo process group (TCP) over the same store. The device bytes are staged in host
// tensors; data-movement collectives move them as bytes, reductions run in Gloo on the dtype
// (bf16/f16 sums and products in float32, rounded once; AVG as a SUM divided here; bool as uint8
// with OR/AND). Every collective is preceded by an all-gather of the ranks' descriptors (Note
// [Collective descriptors]); point to point relies on Gloo's own matching. A Gloo send completes
// only once the peer has posted its receive, so a send step only starts it: the next receive or
// collective step waits for the sends in flight (after its own exchange) and reports their errors,
// so that sends and receives in flight at once (batch_isend_irecv, rings) do not deadlock.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <memory>
#include <mutex>

#include "torch/distributed/transport.h"

namespace tpu::dist {

class GlooTransport final : public Transport, public std::enable_shared_from_this<GlooTransport> {
 public:
  GlooTransport(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int world, std::string group);
  const char* name() const override { return "gloo"; }
  StatusOr<Plan> Build(const Collective& c, const std::shared_ptr<CollState>& st) override;
  void Abort(const std::string& why) override;
  Status Aborted() override;

 private:
  Status Run(const Collective& c, const std::shared_ptr<CollState>& st, const std::shared_ptr<void>& keep,
             at::Tensor in, at::Tensor out, int* source);
  Status RunExchange(const Collective& c, const CollState& st, at::Tensor in, at::Tensor out, int* source, bool p2p);
  // Waits for the sends started by earlier steps; their first error fails them and is returned.
  Status FinishSends();
  Status CheckDescriptors(const Collective& c, const CollDesc& mine);
  Status Reduction(const Collective& c, const at::Tensor& bytes);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  const int rank_, world_;
  const std::string group_;
  std::mutex mu_;
  std::string aborted_;
  struct PendingSend {
    c10::intrusive_ptr<c10d::Work> work;
    std::shared_ptr<CollState> state;
    std::shared_ptr<void> keep;  // the staged bytes
    CollDesc desc;
    double timeout;
  };
  std::vector<PendingSend> sends_;  // steps run on one device queue, in order
};

}  // namespace tpu::dist
