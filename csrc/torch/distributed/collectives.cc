// TpuBackend's collectives: each checks its arguments at the caller's line (c10d's own messages
// where it has them), describes itself for the ranks' comparison (Note [Collective descriptors])
// and is queued on the device (Note [Collectives on the device queue]).
#include <numeric>

#include "torch/distributed/backend.h"
#include "torch/distributed/work.h"
#include "torch/tensor_utils.h"

namespace tpu::dist {
namespace {

using torch_bridge::ToDType;

int64_t Bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

std::string Dims(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// "float32[4, 8]"
std::string Shape(const at::Tensor& t) { return std::string(TorchDTypeName(ToDType(t.scalar_type()))) + Dims(t.sizes()); }

DType DTypeOf(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(!ts.empty(), "torch_tpu distributed: ", op, " got no tensors");
  for (const at::Tensor& t : ts)
    TORCH_CHECK(t.scalar_type() == ts[0].scalar_type(), "torch_tpu distributed: ", op, " needs tensors of one dtype, got ",
                ts[0].scalar_type(), " and ", t.scalar_type());
  return ToDType(ts[0].scalar_type());
}

void CheckSizes(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* op, const char* what) {
  for (const at::Tensor& t : list) {
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "torch_tpu distributed: ", op, ": ", what, " has dtype ",
                t.scalar_type(), ", expected ", like.scalar_type());
    TORCH_CHECK(t.numel() == like.numel(), "torch_tpu distributed: ", op, ": ", what, " has ", t.numel(),
                " elements, expected ", like.numel(), " (every tensor the same size)");
  }
}

TensorCall Call(const char* task, CollOp op, DType dtype, double timeout) {
  TensorCall call;
  call.task_name = task;
  call.coll.op = op;
  call.coll.dtype = dtype;
  call.coll.timeout = timeout;
  return call;
}

void SetSize(TensorCall& call, const at::Tensor& t) {
  call.coll.desc.bytes = Bytes(t);
  call.coll.desc.count = t.numel();
}

std::vector<at::Tensor> Concat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

RedOp TpuBackend::Reduction(const c10d::ReduceOp& op, std::vector<at::Tensor>& tensors, bool in_place) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return RedOp::kSum;
    case c10d::ReduceOp::AVG: return RedOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return RedOp::kProduct;
    case c10d::ReduceOp::MIN: return RedOp::kMin;
    case c10d::ReduceOp::MAX: return RedOp::kMax;
    case c10d::ReduceOp::BAND: return RedOp::kBand;
    case c10d::ReduceOp::BOR: return RedOp::kBor;
    case c10d::ReduceOp::BXOR: return RedOp::kBxor;
    case c10d::ReduceOp::PREMUL_SUM: {
      // The factor (a number, or a one-element tensor on any device) multiplies each tensor on
      // the device, queued before the sum: no host read of a device factor.
      TORCH_CHECK(op.supplement_, "torch_tpu distributed: ReduceOp.PREMUL_SUM without its factor");
      auto* factor = static_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      for (at::Tensor& t : tensors) {
        if (factor->tensor_factor.defined())
          t = in_place ? t.mul_(factor->tensor_factor) : t * factor->tensor_factor;
        else
          t = in_place ? t.mul_(factor->double_factor) : t * factor->double_factor;
      }
      return RedOp::kSum;
    }
    default: break;
  }
  TORCH_CHECK(false, "torch_tpu distributed: unsupported ReduceOp ", static_cast<int>(op.op_));
}

Issued TpuBackend::AllReduceOf(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op,
                               std::chrono::milliseconds timeout, const char* name) {
  int device = DeviceOf(tensors, name);
  DTypeOf(tensors, name);
  std::vector<at::Tensor> work = tensors;  // PREMUL_SUM multiplies these in place
  RedOp red = Reduction(op, work, true);
  TensorCall call = Call("c10d::allreduce", CollOp::kAllReduce, ToDType(tensors[0].scalar_type()), TimeoutOf(timeout));
  call.coll.red = red;
  torch_bridge::Check(CheckReduction(red, call.coll.dtype));
  call.inputs = tensors;
  call.in_place = true;
  int64_t bytes = 0, count = 0;
  for (const at::Tensor& t : tensors) {
    bytes += Bytes(t);
    count += t.numel();
  }
  call.coll.desc.bytes = bytes;
  call.coll.desc.count = count;
  std::string what = tensors.size() == 1
      ? std::string(name) + "(" + Shape(tensors[0]) + ", " + RedOpName(red) + ")"
      : std::string(name) + "(" + std::to_string(tensors.size()) + " tensors of " + TorchDTypeName(call.coll.dtype) +
            ", " + std::to_string(count) + " elements, " + RedOpName(red) + ")";
  return Issue(call, what, device);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(!opts.sparseIndices.has_value(), "torch_tpu distributed: sparse all_reduce is not supported");
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return Finish(c10d::OpType::ALLREDUCE, {AllReduceOf(tensors, opts.reduceOp, opts.timeout, "all_reduce")}, tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceCoalescedOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  // One collective over the concatenation when the dtypes agree, else one per tensor.
  bool one_dtype = true;
  for (const at::Tensor& t : tensors) one_dtype = one_dtype && t.scalar_type() == tensors[0].scalar_type();
  std::vector<Issued> parts;
  if (one_dtype) {
    parts.push_back(AllReduceOf(tensors, opts.reduceOp, opts.timeout, "all_reduce_coalesced"));
  } else {
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{t};
      parts.push_back(AllReduceOf(one, opts.reduceOp, opts.timeout, "all_reduce_coalesced"));
    }
  }
  return Finish(c10d::OpType::ALLREDUCE_COALESCED, std::move(parts), tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  int device = DeviceOf(tensors, "broadcast");
  TORCH_CHECK(tensors.size() == 1, "torch_tpu distributed: broadcast takes one tensor per rank, got ", tensors.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "torch_tpu distributed: broadcast from rank ", opts.rootRank,
              " of a group of ", size_);
  TensorCall call = Call("c10d::broadcast", CollOp::kBroadcast, DTypeOf(tensors, "broadcast"), TimeoutOf(opts.timeout));
  call.coll.root = static_cast<int>(opts.rootRank);
  call.coll.desc.root = call.coll.root;
  call.inputs = tensors;
  call.in_place = true;
  SetSize(call, tensors[0]);
  Issued issued = Issue(call, "broadcast(" + Shape(tensors[0]) + ", src=" + std::to_string(opts.rootRank) + ")", device);
  return Finish(c10d::OpType::BROADCAST, {issued}, tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  int device = DeviceOf(tensors, "reduce");
  TORCH_CHECK(tensors.size() == 1, "torch_tpu distributed: reduce takes one tensor per rank, got ", tensors.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "torch_tpu distributed: reduce to rank ", opts.rootRank,
              " of a group of ", size_);
  std::vector<at::Tensor> work = tensors;
  RedOp red = Reduction(opts.reduceOp, work, true);
  TensorCall call = Call("c10d::reduce", CollOp::kReduce, DTypeOf(tensors, "reduce"), TimeoutOf(opts.timeout));
  call.coll.red = red;
  torch_bridge::Check(CheckReduction(red, call.coll.dtype));
  call.coll.root = static_cast<int>(opts.rootRank);
  call.coll.desc.root = call.coll.root;
  call.inputs = tensors;
  call.in_place = true;
  SetSize(call, tensors[0]);
  Issued issued = Issue(call, "reduce(" + Shape(tensors[0]) + ", dst=" + std::to_string(opts.rootRank) + ", " +
                                  RedOpName(red) + ")", device);
  return Finish(c10d::OpType::REDUCE, {issued}, tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "torch_tpu distributed: all_gather takes one input and one "
              "output list per rank");
  return Finish(c10d::OpType::ALLGATHER, {AllGatherOf(outputs[0], inputs[0], opts)}, outputs[0]);
}

Issued TpuBackend::AllGatherOf(const std::vector<at::Tensor>& outputs, const at::Tensor& input,
                               const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> inputs{input};
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "torch_tpu distributed: all_gather needs ", size_,
              " output tensors (the group's size), got ", outputs.size());
  int device = DeviceOf(Concat(outputs, inputs), "all_gather");
  CheckSizes(outputs, input, "all_gather", "an output tensor");
  TensorCall call = Call("c10d::allgather", CollOp::kAllGather, DTypeOf(inputs, "all_gather"), TimeoutOf(opts.timeout));
  call.inputs = inputs;
  call.outputs = outputs;
  SetSize(call, input);
  return Issue(call, "all_gather(" + Shape(input) + " -> " + std::to_string(size_) + " x " + Dims(input.sizes()) + ")",
               device);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                           const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return Finish(c10d::OpType::_ALLGATHER_BASE, {AllGatherBaseOf(output, input, opts)}, {output});
}

Issued TpuBackend::AllGatherBaseOf(const at::Tensor& output, const at::Tensor& input,
                                   const c10d::AllgatherOptions& opts) {
  int device = DeviceOf({output, input}, "all_gather_into_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "torch_tpu distributed: all_gather_into_tensor: output dtype ",
              output.scalar_type(), " differs from the input's ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_, "torch_tpu distributed: all_gather_into_tensor: the output has ",
              output.numel(), " elements, expected ", input.numel() * size_, " (the input's times the group size ",
              size_, ")");
  TensorCall call = Call("c10d::allgather_into_tensor", CollOp::kAllGather, ToDType(input.scalar_type()),
                         TimeoutOf(opts.timeout));
  call.inputs = {input};
  call.outputs = {output};
  SetSize(call, input);
  return Issue(call, "all_gather_into_tensor(" + Shape(input) + " -> " + Dims(output.sizes()) + ")", device);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  // outputs[r][i] is input i gathered from rank r.
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "torch_tpu distributed: all_gather_coalesced needs ", size_,
              " output lists (the group's size), got ", outputs.size());
  std::vector<Issued> parts;
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<at::Tensor> gathered;
    for (int r = 0; r < size_; ++r) {
      TORCH_CHECK(outputs[r].size() == inputs.size(), "torch_tpu distributed: all_gather_coalesced needs one output per "
                  "input in each list");
      gathered.push_back(outputs[r][i]);
    }
    parts.push_back(AllGatherOf(gathered, inputs[i], opts));
    outs.insert(outs.end(), gathered.begin(), gathered.end());
  }
  return Finish(c10d::OpType::ALLGATHER_COALESCED, std::move(parts), std::move(outs));
}

c10::intrusive_ptr<c10d::Work> TpuBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::AllgatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(outputs.size() == inputs.size(), "torch_tpu distributed: allgather_into_tensor_coalesced needs one output "
              "per input");
  std::vector<Issued> parts;
  for (size_t i = 0; i < inputs.size(); ++i) parts.push_back(AllGatherBaseOf(outputs[i], inputs[i], opts));
  return Finish(c10d::OpType::COALESCED, std::move(parts), outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                  std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(inputs.size() == 1, "torch_tpu distributed: gather takes one input tensor per rank");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "torch_tpu distributed: gather to rank ", opts.rootRank,
              " of a group of ", size_);
  const bool root = rank_ == opts.rootRank;
  std::vector<at::Tensor> outs;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "torch_tpu distributed: gather "
                "needs ", size_, " output tensors on the destination rank");
    outs = outputs[0];
    CheckSizes(outs, inputs[0], "gather", "an output tensor");
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "torch_tpu distributed: gather takes output tensors only on the "
                "destination rank");
  }
  int device = DeviceOf(Concat(outs, inputs), "gather");
  TensorCall call = Call("c10d::gather", CollOp::kGather, DTypeOf(inputs, "gather"), TimeoutOf(opts.timeout));
  call.coll.root = static_cast<int>(opts.rootRank);
  call.coll.desc.root = call.coll.root;
  call.inputs = inputs;
  call.outputs = outs;
  SetSize(call, inputs[0]);
  Issued issued = Issue(call, "gather(" + Shape(inputs[0]) + ", dst=" + std::to_string(opts.rootRank) + ")", device);
  return Finish(c10d::OpType::GATHER, {issued}, outs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::scatter(std::vector<at::Tensor>& outputs,
                                                   std::vector<std::vector<at::Tensor>>& inputs,
                                                   const c10d::ScatterOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(outputs.size() == 1, "torch_tpu distributed: scatter takes one output tensor per rank");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "torch_tpu distributed: scatter from rank ", opts.rootRank,
              " of a group of ", size_);
  const bool root = rank_ == opts.rootRank;
  std::vector<at::Tensor> ins;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "torch_tpu distributed: scatter "
                "needs ", size_, " input tensors on the source rank");
    ins = inputs[0];
    CheckSizes(ins, outputs[0], "scatter", "an input tensor");
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "torch_tpu distributed: scatter takes input tensors only on the "
                "source rank");
  }
  int device = DeviceOf(Concat(ins, outputs), "scatter");
  TensorCall call = Call("c10d::scatter", CollOp::kScatter, DTypeOf(outputs, "scatter"), TimeoutOf(opts.timeout));
  call.coll.root = static_cast<int>(opts.rootRank);
  call.coll.desc.root = call.coll.root;
  call.inputs = ins;
  call.outputs = outputs;
  SetSize(call, outputs[0]);
  Issued issued = Issue(call, "scatter(" + Shape(outputs[0]) + ", src=" + std::to_string(opts.rootRank) + ")", device);
  return Finish(c10d::OpType::SCATTER, {issued}, outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1, "torch_tpu distributed: reduce_scatter takes one output and "
              "one input list per rank");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == size_, "torch_tpu distributed: reduce_scatter needs ", size_,
              " input tensors (the group's size), got ", inputs[0].size());
  int device = DeviceOf(Concat(inputs[0], outputs), "reduce_scatter");
  CheckSizes(inputs[0], outputs[0], "reduce_scatter", "an input tensor");
  std::vector<at::Tensor> ins = inputs[0];
  RedOp red = Reduction(opts.reduceOp, ins, false);
  TensorCall call = Call("c10d::reduce_scatter", CollOp::kReduceScatter, DTypeOf(outputs, "reduce_scatter"),
                         TimeoutOf(opts.timeout));
  call.coll.red = red;
  torch_bridge::Check(CheckReduction(red, call.coll.dtype));
  call.inputs = ins;
  call.outputs = outputs;
  SetSize(call, outputs[0]);
  Issued issued = Issue(call, "reduce_scatter(" + std::to_string(size_) + " x " + Shape(outputs[0]) + " -> " +
                                  Dims(outputs[0].sizes()) + ", " + RedOpName(red) + ")", device);
  return Finish(c10d::OpType::REDUCE_SCATTER, {issued}, outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                const c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return Finish(c10d::OpType::_REDUCE_SCATTER_BASE, {ReduceScatterBaseOf(output, input, opts)}, {output});
}

Issued TpuBackend::ReduceScatterBaseOf(const at::Tensor& output, const at::Tensor& input,
                                       const c10d::ReduceScatterOptions& opts) {
  int device = DeviceOf({output, input}, "reduce_scatter_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "torch_tpu distributed: reduce_scatter_tensor: output dtype ",
              output.scalar_type(), " differs from the input's ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_, "torch_tpu distributed: reduce_scatter_tensor: the input has ",
              input.numel(), " elements, expected ", output.numel() * size_, " (the output's times the group size ",
              size_, ")");
  std::vector<at::Tensor> ins{input};
  RedOp red = Reduction(opts.reduceOp, ins, false);
  TensorCall call = Call("c10d::reduce_scatter_tensor", CollOp::kReduceScatter, ToDType(output.scalar_type()),
                         TimeoutOf(opts.timeout));
  call.coll.red = red;
  torch_bridge::Check(CheckReduction(red, call.coll.dtype));
  call.inputs = ins;
  call.outputs = {output};
  SetSize(call, output);
  return Issue(call, "reduce_scatter_tensor(" + Shape(input) + " -> " + Dims(output.sizes()) + ", " + RedOpName(red) +
                   ")", device);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::ReduceScatterOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(outputs.size() == inputs.size(), "torch_tpu distributed: reduce_scatter_tensor_coalesced needs one output "
              "per input");
  std::vector<Issued> parts;
  for (size_t i = 0; i < inputs.size(); ++i) parts.push_back(ReduceScatterBaseOf(outputs[i], inputs[i], opts));
  return Finish(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, std::move(parts), outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                         std::vector<int64_t>& output_splits,
                                                         std::vector<int64_t>& input_splits,
                                                         const c10d::AllToAllOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  int device = DeviceOf({output, input}, "all_to_all_single");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "torch_tpu distributed: all_to_all_single: output dtype ",
              output.scalar_type(), " differs from the input's ", input.scalar_type());
  // Splits count rows (dim 0); none given: equal parts.
  auto row_bytes = [](const at::Tensor& t) { return t.dim() == 0 || t.size(0) == 0 ? 0 : Bytes(t) / t.size(0); };
  auto splits = [&](const at::Tensor& t, const std::vector<int64_t>& given, const char* which) {
    int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    std::vector<int64_t> s = given;
    if (s.empty()) {
      TORCH_CHECK(rows % size_ == 0, "torch_tpu distributed: all_to_all_single: the ", which, "'s first dimension (",
                  rows, ") does not divide into ", size_, " equal parts; give ", which, "_split_sizes");
      s.assign(size_, rows / size_);
    }
    TORCH_CHECK(static_cast<int>(s.size()) == size_, "torch_tpu distributed: all_to_all_single: ", which,
                "_split_sizes has ", s.size(), " entries, expected ", size_);
    TORCH_CHECK(std::accumulate(s.begin(), s.end(), int64_t{0}) == rows, "torch_tpu distributed: all_to_all_single: ",
                which, "_split_sizes sum to ", std::accumulate(s.begin(), s.end(), int64_t{0}), ", but the ", which,
                " has ", rows, " rows");
    for (int64_t& v : s) v *= row_bytes(t);
    return s;
  };
  TensorCall call = Call("c10d::alltoall_base", CollOp::kAllToAll, ToDType(input.scalar_type()), TimeoutOf(opts.timeout));
  call.coll.send_bytes = splits(input, input_splits, "input");
  call.coll.recv_bytes = splits(output, output_splits, "output");
  call.inputs = {input};
  call.outputs = {output};
  Issued issued = Issue(call, "all_to_all_single(" + Shape(input) + " -> " + Dims(output.sizes()) + ")", device);
  return Finish(c10d::OpType::ALLTOALL_BASE, {issued}, {output});
}

c10::intrusive_ptr<c10d::Work> TpuBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                    const c10d::AllToAllOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "torch_tpu distributed: all_to_all needs ", size_, " input and output tensors (the group's size)");
  int device = DeviceOf(Concat(outputs, inputs), "all_to_all");
  DType dtype = DTypeOf(Concat(outputs, inputs), "all_to_all");
  TensorCall call = Call("c10d::alltoall", CollOp::kAllToAll, dtype, TimeoutOf(opts.timeout));
  for (int q = 0; q < size_; ++q) {
    call.coll.send_bytes.push_back(Bytes(inputs[q]));
    call.coll.recv_bytes.push_back(Bytes(outputs[q]));
  }
  call.inputs = inputs;
  call.outputs = outputs;
  Issued issued = Issue(call, "all_to_all(" + std::to_string(size_) + " x " + Shape(inputs[0]) + ")", device);
  return Finish(c10d::OpType::ALLTOALL, {issued}, outputs);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(tensors.size() == 1, "torch_tpu distributed: send takes one tensor");
  TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_, "torch_tpu distributed: send to rank ", dst, " from rank ", rank_,
              " of a group of ", size_);
  int device = DeviceOf(tensors, "send");
  TensorCall call = Call("c10d::send", CollOp::kSend, DTypeOf(tensors, "send"), timeout_);
  call.coll.root = dst;
  call.coll.tag = tag;
  call.inputs = tensors;
  SetSize(call, tensors[0]);
  Issued issued = Issue(call, "send(" + Shape(tensors[0]) + ", dst=" + std::to_string(dst) + ", tag=" +
                                  std::to_string(tag) + ")", device);
  return Finish(c10d::OpType::SEND, {issued}, tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(tensors.size() == 1, "torch_tpu distributed: recv takes one tensor");
  TORCH_CHECK(src == -1 || (src >= 0 && src < size_ && src != rank_), "torch_tpu distributed: recv from rank ", src,
              " on rank ", rank_, " of a group of ", size_);
  int device = DeviceOf(tensors, "recv");
  TensorCall call = Call("c10d::recv", CollOp::kRecv, DTypeOf(tensors, "recv"), timeout_);
  call.coll.root = src;
  call.coll.tag = tag;
  call.outputs = tensors;
  SetSize(call, tensors[0]);
  Issued issued = Issue(call, "recv(" + Shape(tensors[0]) + ", src=" + (src < 0 ? "any" : std::to_string(src)) +
                                  ", tag=" + std::to_string(tag) + ")", device);
  return Finish(src < 0 ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV, {issued}, tensors);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return recv(tensors, -1, tag);
}

c10::intrusive_ptr<c10d::Work> TpuBackend::barrier(const c10d::BarrierOptions& opts) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  // The device the barrier is ordered on: the one named, else the group's.
  int device = device_;
  if (opts.device.has_value() && opts.device->type() == c10::DeviceType::PrivateUse1 && opts.device->has_index())
    device = opts.device->index();
  else if (!opts.device_ids.empty())
    device = static_cast<int>(opts.device_ids[0]);
  if (device < 0) device = torch_bridge::CurrentDeviceIndex();
  if (device_ < 0) device_ = device;
  TensorCall call = Call("c10d::barrier", CollOp::kBarrier, DType::kU8, TimeoutOf(opts.timeout));
  Issued issued = Issue(call, "barrier()", device);
  // A barrier is a host rendezvous: wait() returns once every rank reached it.
  return Finish(c10d::OpType::BARRIER, {issued}, {}, /*blocking=*/true);
}

}  // namespace tpu::dist
