#include "torch/distributed/gloo_transport.h"

#include <cstring>

#include "torch/tensor_utils.h"

namespace tpu::dist {
namespace {

c10d::ReduceOp::RedOpType GlooOp(RedOp op, DType dtype) {
  if (dtype == DType::kBool) {
    switch (op) {
      case RedOp::kSum:
      case RedOp::kMax: return c10d::ReduceOp::MAX;
      case RedOp::kProduct:
      case RedOp::kMin: return c10d::ReduceOp::MIN;
      default: break;
    }
  }
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return c10d::ReduceOp::SUM;
    case RedOp::kProduct: return c10d::ReduceOp::PRODUCT;
    case RedOp::kMin: return c10d::ReduceOp::MIN;
    case RedOp::kMax: return c10d::ReduceOp::MAX;
    case RedOp::kBand: return c10d::ReduceOp::BAND;
    case RedOp::kBor: return c10d::ReduceOp::BOR;
    case RedOp::kBxor: return c10d::ReduceOp::BXOR;
  }
  return c10d::ReduceOp::SUM;
}

void Wait(const c10::intrusive_ptr<c10d::Work>& work, double timeout) {
  work->wait(std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
}

}  // namespace

GlooTransport::GlooTransport(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int world, std::string group)
    : gloo_(std::move(gloo)), rank_(rank), world_(world), group_(std::move(group)) {}

void GlooTransport::Abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.empty()) aborted_ = why;
}

Status GlooTransport::Aborted() {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_.empty() ? Status::Ok() : FailedPrecondition(aborted_);
}

StatusOr<Plan> GlooTransport::Build(const Collective& c, const std::shared_ptr<CollState>& st) {
  TPU_RETURN_IF_ERROR(Aborted());
  struct Staging {
    at::Tensor in, out;
    std::shared_ptr<GlooTransport> transport;  // the steps call into it
  };
  auto mem = std::make_shared<Staging>();
  auto bytes = at::TensorOptions().dtype(at::kByte);
  mem->in = at::empty({c.in_bytes}, bytes);
  // All-reduce, broadcast and reduce work in place on one staging tensor.
  bool in_place = c.op == CollOp::kAllReduce || c.op == CollOp::kBroadcast || c.op == CollOp::kReduce;
  mem->out = in_place ? mem->in : at::empty({c.out_bytes}, bytes);
  mem->transport = shared_from_this();
  Plan plan;
  plan.keep = mem;
  Step s;
  if (c.in_bytes) s.reads.push_back({0, c.in_bytes, static_cast<char*>(mem->in.data_ptr())});
  s.run = [self = mem->transport.get(), c, st, mem]() -> Status {
    TPU_RETURN_IF_ERROR(self->Aborted());
    int source = -1;
    Status result;
    try {
      result = self->Run(c, st, mem, mem->in, mem->out, &source);
    } catch (const std::exception& e) {
      result = FailedPrecondition(std::string("torch_tpu distributed: ") + Describe(c.desc) + " on process group '" +
                                  self->group_ + "' failed in Gloo: " + e.what());
    }
    if (!result.ok()) self->Abort(result.message());
    std::lock_guard<std::mutex> lock(st->mu);
    st->source = source;
    return result;
  };
  if (c.out_bytes && (c.op != CollOp::kBroadcast || rank_ != c.root) && (c.op != CollOp::kReduce || rank_ == c.root))
    s.writes.push_back({0, c.out_bytes, static_cast<char*>(mem->out.data_ptr())});
  plan.steps.push_back(std::move(s));
  return plan;
}

Status GlooTransport::CheckDescriptors(const Collective& c, const CollDesc& mine) {
  auto bytes = at::TensorOptions().dtype(at::kByte);
  at::Tensor one = at::empty({static_cast<int64_t>(sizeof(CollDesc))}, bytes);
  std::memcpy(one.data_ptr(), &mine, sizeof(CollDesc));
  at::Tensor all = at::empty({world_ * static_cast<int64_t>(sizeof(CollDesc))}, bytes);
  Wait(gloo_->_allgather_base(all, one), c.timeout);
  std::vector<CollDesc> descs(world_);
  std::memcpy(descs.data(), all.data_ptr(), sizeof(CollDesc) * world_);
  bool agree = true;
  for (const CollDesc& d : descs) agree = agree && Agree(d, mine);
  if (!agree) {
    std::string msg = "torch_tpu distributed: the ranks of process group '" + group_ + "' issued different collectives:";
    for (int q = 0; q < world_; ++q) msg += " rank " + std::to_string(q) + ": " + Describe(descs[q]) + ";";
    msg += " every rank must issue the same collectives (same op, sizes, dtype, reduction and root) in the same "
           "order on a process group";
    return FailedPrecondition(msg);
  }
  for (int q = 0; q < world_; ++q)
    if (!descs[q].valid)
      return FailedPrecondition("torch_tpu distributed: rank " + std::to_string(q) + "'s input to " + Describe(mine) +
                                " on process group '" + group_ + "' holds no value: a device op that was to compute "
                                "it failed (rank " + std::to_string(q) + " reports that error)");
  return Status::Ok();
}

Status GlooTransport::Reduction(const Collective& c, const at::Tensor& bytes) {
  at::ScalarType type = torch_bridge::ToScalarType(c.dtype);
  at::Tensor data = bytes.view(type);
  bool widen = (c.dtype == DType::kBF16 || c.dtype == DType::kF16) &&
               (c.red == RedOp::kSum || c.red == RedOp::kAvg || c.red == RedOp::kProduct);
  at::Tensor t = widen ? data.to(at::kFloat) : c.dtype == DType::kBool ? bytes : data;
  std::vector<at::Tensor> ts{t};
  if (c.op == CollOp::kAllReduce) {
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp(GlooOp(c.red, c.dtype));
    Wait(gloo_->allreduce(ts, o), c.timeout);
  } else {
    c10d::ReduceOptions o;
    o.reduceOp = c10d::ReduceOp(GlooOp(c.red, c.dtype));
    o.rootRank = c.root;
    Wait(gloo_->reduce(ts, o), c.timeout);
  }
  if (c.red == RedOp::kAvg) t.div_(world_);
  if (widen) data.copy_(t);
  return Status::Ok();
}

Status GlooTransport::FinishSends() {
  Status first;
  for (PendingSend& p : sends_) {
    Status s;
    try {
      Wait(p.work, p.timeout);
    } catch (const std::exception& e) {
      s = FailedPrecondition(std::string("torch_tpu distributed: ") + Describe(p.desc) + " on process group '" + group_ +
                             "' failed in Gloo: " + e.what());
      p.state->Fail(s);
    }
    if (first.ok() && !s.ok()) first = s;
  }
  sends_.clear();
  return first;
}

Status GlooTransport::Run(const Collective& c, const std::shared_ptr<CollState>& st, const std::shared_ptr<void>& keep,
                          at::Tensor in, at::Tensor out, int* source) {
  const bool p2p = c.op == CollOp::kSend || c.op == CollOp::kRecv;
  if (c.op == CollOp::kSend) {
    if (!st->InputsValid())
      return FailedPrecondition("torch_tpu distributed: rank " + std::to_string(rank_) + "'s tensor for " +
                                Describe(c.desc) + " holds no value: a device op that was to compute it failed");
    std::vector<at::Tensor> ins{in};
    sends_.push_back({gloo_->send(ins, c.root, c.tag), st, keep, c.desc, c.timeout});
    return Status::Ok();
  }
  Status own = RunExchange(c, *st, in, out, source, p2p);
  Status sends = FinishSends();
  return own.ok() ? sends : own;
}

Status GlooTransport::RunExchange(const Collective& c, const CollState& st, at::Tensor in, at::Tensor out,
                                  int* source, bool p2p) {
  if (!p2p) {
    CollDesc mine = c.desc;
    bool offers = !((c.op == CollOp::kBroadcast || c.op == CollOp::kScatter) && rank_ != c.root);
    mine.valid = offers ? st.InputsValid() : 1;
    TPU_RETURN_IF_ERROR(CheckDescriptors(c, mine));
  }
  std::vector<at::Tensor> ins{in}, outs{out};
  switch (c.op) {
    case CollOp::kAllReduce:
    case CollOp::kReduce: return Reduction(c, in);
    case CollOp::kBroadcast: {
      c10d::BroadcastOptions o;
      o.rootRank = c.root;
      Wait(gloo_->broadcast(ins, o), c.timeout);
      return Status::Ok();
    }
    case CollOp::kAllGather: Wait(gloo_->_allgather_base(out, in), c.timeout); return Status::Ok();
    case CollOp::kGather: {
      std::vector<std::vector<at::Tensor>> lists;
      if (rank_ == c.root) lists.push_back(out.chunk(world_));
      c10d::GatherOptions o;
      o.rootRank = c.root;
      Wait(gloo_->gather(lists, ins, o), c.timeout);
      return Status::Ok();
    }
    case CollOp::kScatter: {
      std::vector<std::vector<at::Tensor>> lists;
      if (rank_ == c.root) lists.push_back(in.chunk(world_));
      c10d::ScatterOptions o;
      o.rootRank = c.root;
      Wait(gloo_->scatter(outs, lists, o), c.timeout);
      return Status::Ok();
    }
    case CollOp::kReduceScatter: {
      at::ScalarType type = torch_bridge::ToScalarType(c.dtype);
      bool widen = (c.dtype == DType::kBF16 || c.dtype == DType::kF16);
      at::Tensor i = widen ? in.view(type).to(at::kFloat) : in.view(type);
      at::Tensor o = widen ? at::empty({out.numel() / 2}, at::kFloat) : out.view(type);
      c10d::ReduceScatterOptions opts;
      opts.reduceOp = c10d::ReduceOp(GlooOp(c.red, c.dtype));
      Wait(gloo_->_reduce_scatter_base(o, i, opts), c.timeout);
      if (c.red == RedOp::kAvg) o.div_(world_);
      if (widen) out.view(type).copy_(o);
      return Status::Ok();
    }
    case CollOp::kAllToAll: {
      std::vector<int64_t> o(c.recv_bytes), i(c.send_bytes);
      Wait(gloo_->alltoall_base(out, in, o, i), c.timeout);
      return Status::Ok();
    }
    case CollOp::kBarrier: return Status::Ok();  // the descriptor all-gather was the barrier
    case CollOp::kSend: return Internal("send is started by Run");
    case CollOp::kRecv: {
      auto work = c.root >= 0 ? gloo_->recv(outs, c.root, c.tag) : gloo_->recvAnysource(outs, c.tag);
      Wait(work, c.timeout);
      *source = c.root >= 0 ? c.root : work->sourceRank();
      return Status::Ok();
    }
  }
  return Internal("unknown collective");
}

}  // namespace tpu::dist
