// ShmTransport: the collectives of a process group whose ranks share one host, through one
// shared-memory segment (Note [Shared-memory collectives] in shm_group.h).
#pragma once

#include <memory>

#include "torch/distributed/shm_group.h"
#include "torch/distributed/transport.h"

namespace tpu::dist {

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(std::shared_ptr<ShmGroup> group) : g_(std::move(group)) {}
  const char* name() const override { return "shm"; }
  StatusOr<Plan> Build(const Collective& c, const std::shared_ptr<CollState>& st) override;
  void Abort(const std::string& why) override { g_->Abort(why).IgnoreError(); }
  Status Aborted() override { return g_->Aborted(); }

 private:
  Plan Reduction(const Collective& c, const std::shared_ptr<CollState>& st, bool all);
  Plan Broadcast(const Collective& c, const std::shared_ptr<CollState>& st);
  Plan Gather(const Collective& c, const std::shared_ptr<CollState>& st, bool all);
  Plan Scatter(const Collective& c, const std::shared_ptr<CollState>& st);
  Plan ReduceScatter(const Collective& c, const std::shared_ptr<CollState>& st);
  Plan AllToAll(const Collective& c, const std::shared_ptr<CollState>& st);
  Plan PointToPoint(const Collective& c, const std::shared_ptr<CollState>& st);
  Plan Barrier(const Collective& c, const std::shared_ptr<CollState>& st);
  // Bytes of each rank's block in one round of a collective whose slot holds a block per rank.
  int64_t BlockBytes() const { return (g_->chunk() / g_->world()) & ~int64_t{63}; }

  std::shared_ptr<ShmGroup> g_;
};

}  // namespace tpu::dist
