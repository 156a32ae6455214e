#include "torch/distributed/issue.h"

#include <c10/core/DeviceGuard.h>

#include "base/metrics.h"
#include "torch/deferred/window.h"
#include "torch/tensor_utils.h"

namespace tpu::dist {
namespace {

using torch_bridge::BindingOf;
using torch_bridge::BufferOf;

// A flat byte space over contiguous device tensors.
struct Space {
  struct Entry {
    Buffer* buffer;
    int64_t offset;  // of the tensor's first byte in its buffer
    int64_t start;   // of the tensor in the space
    int64_t nbytes;
  };
  std::vector<Entry> entries;
  int64_t bytes = 0;

  void Add(const at::Tensor& t) {
    int64_t n = t.numel() * static_cast<int64_t>(t.element_size());
    if (n == 0) return;
    Binding b = BindingOf(t);
    entries.push_back({b.buffer(), b.byte_offset(), bytes, n});
    bytes += n;
  }
  // Calls f(buffer, buffer offset, host pointer, bytes) for the parts of `p` in each tensor.
  template <typename F>
  void ForEach(const Piece& p, F f) const {
    for (const Entry& e : entries) {
      int64_t lo = std::max(p.offset, e.start), hi = std::min(p.offset + p.nbytes, e.start + e.nbytes);
      if (lo < hi) f(e.buffer, e.offset + (lo - e.start), p.host + (lo - p.offset), hi - lo);
    }
  }
};

// The contiguous tensor a collective works on for `t`, and whether it is a copy.
at::Tensor Dense(const at::Tensor& t, bool copy_values) {
  if (t.is_contiguous()) return t;
  return copy_values ? t.contiguous() : at::empty(t.sizes(), t.options());
}

}  // namespace

Issued IssueCollective(Transport& transport, TensorCall& call, int device) {
  static Counter* collectives = GetCounter("collectives");
  static Counter* collective_bytes = GetCounter("collective_bytes");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
  // Contiguous stand-ins, copied by device ops (queued before the collective).
  std::vector<at::Tensor> ins, outs;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (user tensor, dense result)
  for (const at::Tensor& t : call.inputs) {
    at::Tensor d = Dense(t, true);
    ins.push_back(d);
    if (call.in_place && !d.is_same(t)) copy_back.emplace_back(t, d);
  }
  if (!call.in_place) {
    for (const at::Tensor& t : call.outputs) {
      at::Tensor d = Dense(t, false);
      outs.push_back(d);
      if (!d.is_same(t)) copy_back.emplace_back(t, d);
    }
  }
  const std::vector<at::Tensor>& results = call.in_place ? ins : outs;
  Space in_space, out_space;
  for (const at::Tensor& t : ins) in_space.Add(t);
  for (const at::Tensor& t : results) out_space.Add(t);
  call.coll.in_bytes = in_space.bytes;
  call.coll.out_bytes = out_space.bytes;

  // Fused mode: the window runs first if it touches any of the collective's storages.
  torch_bridge::Window& window = torch_bridge::WindowFor(device);
  bool cut = false;
  for (const Space* s : {&in_space, &out_space})
    for (const auto& e : s->entries) cut = cut || window.Uses(e.buffer);
  if (cut) window.Cut(torch_bridge::CutReason::kCollective);
  for (const Space* s : {&in_space, &out_space})
    for (const auto& e : s->entries) torch_bridge::MaterializeOrThrow(e.buffer);

  auto st = std::make_shared<CollState>();
  for (const auto& e : in_space.entries) {
    e.buffer->Retain();
    st->inputs.push_back(e.buffer);
  }
  StatusOr<Plan> built = transport.Build(call.coll, st);
  torch_bridge::Check(built.status());
  Plan plan = std::move(built).value();

  Queue& queue = torch_bridge::DeviceFor(device).queue();
  auto context = [&] {
    TaskContext ctx(call.task_name, std::string(call.coll.desc.where, strnlen(call.coll.desc.where, sizeof(call.coll.desc.where))));
    ctx.thread = ThreadId();
    return ctx;
  };
  for (Step& step : plan.steps) {
    for (const Piece& p : step.reads)
      in_space.ForEach(p, [&](Buffer* b, int64_t off, char* host, int64_t n) {
        queue.ReadInto(b, off, n, host, plan.keep, context());
      });
    // A failed step records its error and the steps after it do nothing; the last task reports it.
    queue.Enqueue(
        [run = std::move(step.run), st] {
          if (st->failed()) return Status::Ok();
          Status s = run();
          if (!s.ok()) st->Fail(s);
          return Status::Ok();
        },
        context());
    for (const Piece& p : step.writes)
      out_space.ForEach(p, [&](Buffer* b, int64_t off, char* host, int64_t n) {
        queue.WriteFrom(b, off, host, n, plan.keep, context());
      });
  }
  std::vector<Binding> owned;
  for (const at::Tensor& t : results)
    if (t.numel() > 0) owned.push_back(BindingOf(t));
  uint64_t seq = queue.Enqueue([st] { return st->Get(); }, owned.data(), owned.size(), context());
  for (auto& [user, dense] : copy_back) user.copy_(dense);
  collectives->Add();
  collective_bytes->Add(call.coll.in_bytes);
  return Issued{&queue, seq, st};
}

}  // namespace tpu::dist
