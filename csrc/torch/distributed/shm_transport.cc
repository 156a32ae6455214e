#include "torch/distributed/shm_transport.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tpu::dist {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A transfer of n bytes in rounds of `unit` bytes: at least one round (an empty collective still
// meets its peers), round r covering [offset(r), offset(r) + length(r)).
struct RoundSplit {
  int64_t n, unit;
  int64_t count() const { return std::max<int64_t>(1, CeilDiv(n, unit)); }
  int64_t offset(int64_t r) const { return r * unit; }
  int64_t length(int64_t r) const { return std::max<int64_t>(0, std::min(unit, n - r * unit)); }
};

// The descriptor a rank publishes: valid only when the inputs it offers hold values.
CollDesc Published(const Collective& c, const CollState& st, bool offers_input) {
  CollDesc d = c.desc;
  d.valid = offers_input ? st.InputsValid() : 1;
  return d;
}

}  // namespace

StatusOr<Plan> ShmTransport::Build(const Collective& c, const std::shared_ptr<CollState>& st) {
  TPU_RETURN_IF_ERROR(g_->Aborted());
  if (BlockBytes() == 0)
    return InvalidArgument("torch_tpu distributed: the shared-memory chunk (" + std::to_string(g_->chunk()) +
                           " bytes, option dist_shm_chunk) is too small for " + std::to_string(g_->world()) + " ranks");
  switch (c.op) {
    case CollOp::kAllReduce: return Reduction(c, st, true);
    case CollOp::kReduce: return Reduction(c, st, false);
    case CollOp::kBroadcast: return Broadcast(c, st);
    case CollOp::kAllGather: return Gather(c, st, true);
    case CollOp::kGather: return Gather(c, st, false);
    case CollOp::kScatter: return Scatter(c, st);
    case CollOp::kReduceScatter: return ReduceScatter(c, st);
    case CollOp::kAllToAll: return AllToAll(c, st);
    case CollOp::kSend:
    case CollOp::kRecv: return PointToPoint(c, st);
    case CollOp::kBarrier: return Barrier(c, st);
  }
  return Internal("unknown collective");
}

// All-reduce and reduce: per round, every rank's chunk lands in its slot; rank q reduces the
// q-th part of the chunk over all slots into its own slot; after a second barrier every rank
// (all-reduce) or the root (reduce) writes each part from the slot that holds it.
Plan ShmTransport::Reduction(const Collective& c, const std::shared_ptr<CollState>& st, bool all) {
  Plan plan;
  plan.keep = g_;
  const int n_ranks = g_->world(), me = g_->rank();
  const int64_t es = DTypeSize(c.dtype), n = c.in_bytes, chunk = g_->chunk();
  const RoundSplit split{n, chunk};
  const int64_t rounds = split.count();
  for (int64_t r = 0; r < rounds; ++r) {
    const uint64_t k = g_->NextRound();
    const int64_t off = split.offset(r), len = split.length(r);
    const int64_t count = len / es, per = CeilDiv(count, n_ranks);
    auto part = [count, per, es](int q) {
      int64_t b = std::min(count, q * per), e = std::min(count, (q + 1) * per);
      return std::make_pair(b * es, (e - b) * es);
    };
    Step s;
    if (len) s.reads.push_back({off, len, g_->Slot(me, k)});
    s.run = [g = g_, c, st, k, part, n_ranks, me, es] {
      Deadline dl = Deadline::After(c.timeout);
      CollDesc d = Published(c, *st, true);
      TPU_RETURN_IF_ERROR(g->Check(k, d, nullptr, dl));
      auto [b, l] = part(me);
      if (l > 0) {
        std::vector<const void*> srcs(n_ranks);
        for (int q = 0; q < n_ranks; ++q) srcs[q] = g->Slot(q, k) + b;
        Reduce(g->Slot(me, k) + b, srcs.data(), n_ranks, l / es, c.dtype, c.red, n_ranks);
      }
      return g->Barrier(d, dl);
    };
    if (all || me == c.root)
      for (int q = 0; q < n_ranks; ++q)
        if (auto [b, l] = part(q); l > 0) s.writes.push_back({off + b, l, g_->Slot(q, k) + b});
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

Plan ShmTransport::Broadcast(const Collective& c, const std::shared_ptr<CollState>& st) {
  Plan plan;
  plan.keep = g_;
  const int me = g_->rank();
  const int64_t n = c.in_bytes, chunk = g_->chunk();
  const RoundSplit split{n, chunk};
  const int64_t rounds = split.count();
  for (int64_t r = 0; r < rounds; ++r) {
    const uint64_t k = g_->NextRound();
    const int64_t off = split.offset(r), len = split.length(r);
    Step s;
    if (me == c.root && len) s.reads.push_back({off, len, g_->Slot(c.root, k)});
    s.run = [g = g_, c, st, k, me] {
      return g->Check(k, Published(c, *st, me == c.root), nullptr, Deadline::After(c.timeout));
    };
    if (me != c.root && len) s.writes.push_back({off, len, g_->Slot(c.root, k)});
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

// All-gather and gather: each rank's chunk lands in its slot; after the check every rank (or the
// root) writes rank q's chunk into the q-th block of its output.
Plan ShmTransport::Gather(const Collective& c, const std::shared_ptr<CollState>& st, bool all) {
  Plan plan;
  plan.keep = g_;
  const int n_ranks = g_->world(), me = g_->rank();
  const int64_t n = c.in_bytes, chunk = g_->chunk();
  const RoundSplit split{n, chunk};
  const int64_t rounds = split.count();
  for (int64_t r = 0; r < rounds; ++r) {
    const uint64_t k = g_->NextRound();
    const int64_t off = split.offset(r), len = split.length(r);
    Step s;
    if (len) s.reads.push_back({off, len, g_->Slot(me, k)});
    s.run = [g = g_, c, st, k] { return g->Check(k, Published(c, *st, true), nullptr, Deadline::After(c.timeout)); };
    if ((all || me == c.root) && len)
      for (int q = 0; q < n_ranks; ++q) s.writes.push_back({q * n + off, len, g_->Slot(q, k)});
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

// Scatter: per round the root's slot holds a block for each rank; each takes its own.
Plan ShmTransport::Scatter(const Collective& c, const std::shared_ptr<CollState>& st) {
  Plan plan;
  plan.keep = g_;
  const int n_ranks = g_->world(), me = g_->rank();
  const int64_t n = c.out_bytes, block = BlockBytes();
  const RoundSplit split{n, block};
  const int64_t rounds = split.count();
  for (int64_t r = 0; r < rounds; ++r) {
    const uint64_t k = g_->NextRound();
    const int64_t off = split.offset(r), len = split.length(r);
    Step s;
    if (me == c.root && len)
      for (int q = 0; q < n_ranks; ++q) s.reads.push_back({q * n + off, len, g_->Slot(c.root, k) + q * block});
    s.run = [g = g_, c, st, k, me] {
      return g->Check(k, Published(c, *st, me == c.root), nullptr, Deadline::After(c.timeout));
    };
    if (len) s.writes.push_back({off, len, g_->Slot(c.root, k) + me * block});
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

// Reduce-scatter: per round each rank's slot holds a block for each rank; rank q reduces the
// q-th blocks of all slots into its own q-th block and writes it out.
Plan ShmTransport::ReduceScatter(const Collective& c, const std::shared_ptr<CollState>& st) {
  Plan plan;
  plan.keep = g_;
  const int n_ranks = g_->world(), me = g_->rank();
  const int64_t es = DTypeSize(c.dtype), n = c.out_bytes, block = BlockBytes();
  const RoundSplit split{n, block};
  const int64_t rounds = split.count();
  for (int64_t r = 0; r < rounds; ++r) {
    const uint64_t k = g_->NextRound();
    const int64_t off = split.offset(r), len = split.length(r);
    Step s;
    if (len)
      for (int q = 0; q < n_ranks; ++q) s.reads.push_back({q * n + off, len, g_->Slot(me, k) + q * block});
    s.run = [g = g_, c, st, k, me, n_ranks, block, len, es] {
      TPU_RETURN_IF_ERROR(g->Check(k, Published(c, *st, true), nullptr, Deadline::After(c.timeout)));
      if (len > 0) {
        std::vector<const void*> srcs(n_ranks);
        for (int q = 0; q < n_ranks; ++q) srcs[q] = g->Slot(q, k) + me * block;
        Reduce(g->Slot(me, k) + me * block, srcs.data(), n_ranks, len / es, c.dtype, c.red, n_ranks);
      }
      return Status::Ok();
    };
    if (len) s.writes.push_back({off, len, g_->Slot(me, k) + me * block});
    plan.steps.push_back(std::move(s));
  }
  return plan;
}

// All-to-all (equal or uneven splits): one group round. The inputs go to private host memory
// first (the number of sub-rounds depends on every rank's splits, known only once they are
// published); in each sub-round every rank puts up to one block per destination in its slot, and
// each rank copies its blocks out of every slot.
Plan ShmTransport::AllToAll(const Collective& c, const std::shared_ptr<CollState>& st) {
  struct Staging {
    std::vector<char> in, out;
    std::shared_ptr<ShmGroup> g;
  };
  auto mem = std::make_shared<Staging>();
  mem->in.resize(c.in_bytes);
  mem->out.resize(c.out_bytes);
  mem->g = g_;
  Plan plan;
  plan.keep = mem;
  const uint64_t k = g_->NextRound();
  Step s;
  if (c.in_bytes) s.reads.push_back({0, c.in_bytes, mem->in.data()});
  s.run = [g = g_, c, st, k, mem, block = BlockBytes()]() -> Status {
    const int n_ranks = g->world(), me = g->rank();
    Deadline dl = Deadline::After(c.timeout);
    CollDesc d = Published(c, *st, true);
    std::vector<int64_t> send_off(n_ranks + 1, 0), recv_off(n_ranks + 1, 0);
    for (int q = 0; q < n_ranks; ++q) {
      send_off[q + 1] = send_off[q] + c.send_bytes[q];
      recv_off[q + 1] = recv_off[q] + c.recv_bytes[q];
    }
    auto put = [&](int64_t j) {
      for (int q = 0; q < n_ranks; ++q) {
        int64_t len = std::clamp<int64_t>(c.send_bytes[q] - j * block, 0, block);
        if (len) std::memcpy(g->Slot(me, k) + q * block, mem->in.data() + send_off[q] + j * block, len);
      }
    };
    put(0);
    TPU_RETURN_IF_ERROR(g->Check(k, d, c.send_bytes.data(), dl));
    int64_t sub_rounds = 1;
    for (int q = 0; q < n_ranks; ++q) {
      const int64_t* sends = g->Sends(q, k);
      if (sends[me] != c.recv_bytes[q])
        return g->Abort("torch_tpu distributed: in " + Describe(d) + " on process group '" + g->name() + "', rank " +
                        std::to_string(q) + " sends " + std::to_string(sends[me]) + " bytes to rank " +
                        std::to_string(me) + ", which expects " + std::to_string(c.recv_bytes[q]) +
                        " (the output splits must match the other ranks' input splits)");
      for (int t = 0; t < n_ranks; ++t) sub_rounds = std::max(sub_rounds, CeilDiv(sends[t], block));
    }
    for (int64_t j = 0; j < sub_rounds; ++j) {
      if (j > 0) {
        put(j);
        TPU_RETURN_IF_ERROR(g->Barrier(d, dl));
      }
      for (int q = 0; q < n_ranks; ++q) {
        int64_t len = std::clamp<int64_t>(c.recv_bytes[q] - j * block, 0, block);
        if (len) std::memcpy(mem->out.data() + recv_off[q] + j * block, g->Slot(q, k) + me * block, len);
      }
      if (j + 1 < sub_rounds) TPU_RETURN_IF_ERROR(g->Barrier(d, dl));  // all read before the next put
    }
    return Status::Ok();
  };
  if (c.out_bytes) s.writes.push_back({0, c.out_bytes, mem->out.data()});
  plan.steps.push_back(std::move(s));
  return plan;
}

// Point to point: a small message goes through private host memory into the pair's channel; a
// large one is read from the device straight into its own segment, which the receiver opens.
Plan ShmTransport::PointToPoint(const Collective& c, const std::shared_ptr<CollState>& st) {
  struct Staging {
    std::vector<char> bytes;
    std::unique_ptr<ShmSegment> segment;
    std::shared_ptr<ShmGroup> g;
  };
  const bool send = c.op == CollOp::kSend;
  const int64_t n = send ? c.in_bytes : c.out_bytes;
  auto mem = std::make_shared<Staging>();
  mem->g = g_;
  const bool large = send && n > ShmGroup::kInlineBytes;
  Status no_segment;
  if (large) {
    auto seg = ShmSegment::Create(NewSegmentName("msg"), static_cast<size_t>(n));
    if (seg.ok()) mem->segment = std::move(seg).value();
    else no_segment = seg.status();
  }
  if (!mem->segment) mem->bytes.resize(large ? 0 : n);
  char* host = mem->segment ? mem->segment->data() : mem->bytes.data();
  Plan plan;
  plan.keep = mem;
  Step s;
  if (send && n && !(large && !mem->segment)) s.reads.push_back({0, n, host});
  s.run = [g = g_, c, st, mem, send, n, host, no_segment]() -> Status {
    Deadline dl = Deadline::After(c.timeout);
    if (send) {
      if (!st->InputsValid())
        return g->Abort("torch_tpu distributed: rank " + std::to_string(g->rank()) + "'s tensor for " + Describe(c.desc) +
                        " holds no value: a device op that was to compute it failed");
      if (!no_segment.ok())
        return FailedPrecondition("torch_tpu distributed: " + Describe(c.desc) + ": no shared memory segment of " +
                                  std::to_string(n) + " bytes could be made: " + no_segment.message());
      std::string name = mem->segment ? mem->segment->name() : std::string();
      Status s = g->Send(c.root, c.tag, c.desc, host, n, name, dl);
      if (s.ok() && mem->segment) mem->segment->Forget();  // the receiver removes it
      return s;
    }
    int from = -1;
    Status s = g->Recv(c.root, c.tag, c.desc, host, n, dl, &from);
    std::lock_guard<std::mutex> lock(st->mu);
    st->source = from;
    return s;
  };
  if (!send && n) s.writes.push_back({0, n, host});
  plan.steps.push_back(std::move(s));
  return plan;
}

Plan ShmTransport::Barrier(const Collective& c, const std::shared_ptr<CollState>& st) {
  Plan plan;
  plan.keep = g_;
  const uint64_t k = g_->NextRound();
  Step s;
  s.run = [g = g_, c, st, k] { return g->Check(k, Published(c, *st, false), nullptr, Deadline::After(c.timeout)); };
  plan.steps.push_back(std::move(s));
  return plan;
}

}  // namespace tpu::dist
