// TpuBackend: the c10d backend of tpu tensors ("tpu" / "tpu_dist" in torch.distributed).
// Every collective c10d defines is queued on the tensors' device queue (Note [Collectives on the
// device queue]) and exchanged by the group's transport: shared memory when all ranks share a
// host (ShmTransport), PyTorch's Gloo across hosts (GlooTransport). torch_tpu/distributed.py
// registers it and creates it for each process group.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "torch/distributed/issue.h"
#include "torch/distributed/transport.h"

namespace tpu::dist {

class TpuBackend final : public c10d::Backend {
 public:
  struct Config {
    c10::intrusive_ptr<c10d::Store> store;
    int rank = 0, size = 1;
    double timeout = 1800;       // seconds
    std::string name;            // the process group, for messages
    std::string transport;       // "shm" or "gloo"
    c10::intrusive_ptr<c10d::Backend> gloo;  // the Gloo process group (transport "gloo")
  };
  // Rendezvous through the store (every rank of the group calls it).
  explicit TpuBackend(const Config& config);
  ~TpuBackend() override;

  const std::string getBackendName() const override { return "tpu"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void abort() override;
  void shutdown() override {}
  const std::string& transport_name() const { return transport_name_; }
  double timeout_seconds() const { return timeout_; }  // for collectives with no timeout of their own

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // One collective: checks the tensors, fills the descriptor, queues it; `outputs` are what the
  // Work and its future hold.
  Issued Issue(TensorCall& call, const std::string& what, int device);
  c10::intrusive_ptr<c10d::Work> Finish(c10d::OpType type, std::vector<Issued> parts, std::vector<at::Tensor> outputs,
                                        bool blocking = false);
  // The device of a collective's tensors (all on one tpu device, the group's).
  int DeviceOf(const std::vector<at::Tensor>& tensors, const char* op);
  double TimeoutOf(std::chrono::milliseconds op_timeout) const;
  // Reduction of c10d's op; PREMUL_SUM multiplies `tensors` (in place, or into new ones) by its
  // factor on the device first and becomes SUM.
  RedOp Reduction(const c10d::ReduceOp& op, std::vector<at::Tensor>& tensors, bool in_place);
  // The collectives that coalesced variants repeat.
  Issued AllReduceOf(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op, std::chrono::milliseconds timeout,
                     const char* name);
  Issued AllGatherOf(const std::vector<at::Tensor>& outputs, const at::Tensor& input, const c10d::AllgatherOptions& opts);
  Issued AllGatherBaseOf(const at::Tensor& output, const at::Tensor& input, const c10d::AllgatherOptions& opts);
  Issued ReduceScatterBaseOf(const at::Tensor& output, const at::Tensor& input, const c10d::ReduceScatterOptions& opts);

  std::shared_ptr<Transport> transport_;
  std::string transport_name_;
  const std::string name_;
  std::atomic<double> timeout_;  // seconds; setTimeout (torch.distributed's _set_pg_timeout) changes it
  std::recursive_mutex mu_;  // collectives are issued one at a time, in order
  int device_ = -1;          // the tpu device the group runs on, bound by its first collective
  uint64_t seq_ = 0;         // collectives issued
  bool coalescing_ = false;
  std::vector<Issued> coalesced_;
  std::vector<at::Tensor> coalesced_outputs_;
};

}  // namespace tpu::dist
