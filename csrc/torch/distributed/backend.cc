// TpuBackend: creation (the transport's rendezvous), options, coalescing, and what every
// collective shares; the collectives themselves are in collectives.cc.
#include "torch/distributed/backend.h"

#include "base/options.h"
#include "torch/distributed/gloo_transport.h"
#include "torch/distributed/shm_transport.h"
#include "torch/distributed/work.h"
#include "torch/lower/context.h"
#include "torch/python_location.h"
#include "torch/tensor_utils.h"

namespace tpu::dist {
namespace {

constexpr const char* kErrorPrefix = "!error:";

std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string Text(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// Rank 0 creates the segment and publishes its name; every rank attaches and says so; once all
// have, rank 0 removes the name (the mappings stay).
std::shared_ptr<ShmGroup> ShmRendezvous(const TpuBackend::Config& c) {
  ShmGroup::Config sc;
  sc.rank = c.rank;
  sc.world = c.size;
  sc.chunk = Flags().dist_shm_chunk & ~int64_t{63};
  sc.name = c.name;
  std::shared_ptr<ShmGroup> g;
  if (c.rank == 0) {
    std::string segment = NewSegmentName();
    auto made = ShmGroup::Create(sc, segment);
    c.store->set("tpu_dist/shm", Bytes(made.ok() ? segment : kErrorPrefix + made.status().message()));
    torch_bridge::Check(made.status());
    g = std::move(made).value();
  } else {
    std::string segment = Text(c.store->get("tpu_dist/shm"));
    TORCH_CHECK(segment.rfind(kErrorPrefix, 0) != 0, "torch_tpu distributed: rank 0 could not create the shared memory of "
                "process group '", c.name, "': ", segment.substr(strlen(kErrorPrefix)));
    auto attached = ShmGroup::Attach(sc, segment);
    TORCH_CHECK(attached.ok(), "torch_tpu distributed: rank ", c.rank, " reports the same host as rank 0 (hostname, or "
                "option dist_host_id) but cannot open its shared memory: ", attached.status().message(),
                "; give the hosts different TORCH_TPU_DIST_HOST_ID values, or set TORCH_TPU_DIST_TRANSPORT=gloo");
    g = std::move(attached).value();
  }
  c.store->set("tpu_dist/attached/" + std::to_string(c.rank), Bytes("1"));
  std::vector<std::string> keys;
  for (int r = 0; r < c.size; ++r) keys.push_back("tpu_dist/attached/" + std::to_string(r));
  c.store->wait(keys, std::chrono::milliseconds(static_cast<int64_t>(c.timeout * 1000)));
  if (c.rank == 0) g->Unlink();
  return g;
}

}  // namespace

TpuBackend::TpuBackend(const Config& c) : c10d::Backend(c.rank, c.size), name_(c.name), timeout_(c.timeout) {
  TORCH_CHECK(c.store, "torch_tpu distributed: no store");
  if (c.transport == "gloo") {
    TORCH_CHECK(c.gloo, "torch_tpu distributed: transport 'gloo' needs a Gloo process group");
    transport_ = std::make_shared<GlooTransport>(c.gloo, c.rank, c.size, c.name);
  } else {
    TORCH_CHECK(c.transport == "shm", "torch_tpu distributed: unknown transport '", c.transport, "' (shm or gloo)");
    transport_ = std::make_shared<ShmTransport>(ShmRendezvous(c));
  }
  transport_name_ = c.transport;
  init();
}

TpuBackend::~TpuBackend() = default;

c10::intrusive_ptr<c10d::Backend::Options> TpuBackend::getBackendOptions() {
  return c10::make_intrusive<Options>("tpu", std::chrono::milliseconds(static_cast<int64_t>(timeout_ * 1000)));
}

void TpuBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ = static_cast<double>(timeout.count()) / 1000.0;  // for the collectives issued next
}

double TpuBackend::TimeoutOf(std::chrono::milliseconds op_timeout) const {
  return op_timeout.count() > 0 ? static_cast<double>(op_timeout.count()) / 1000.0 : timeout_.load();
}

void TpuBackend::abort() { transport_->Abort("torch_tpu distributed: process group '" + name_ + "' was aborted"); }

void TpuBackend::startCoalescing() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(!coalescing_, "torch_tpu distributed: coalescing already started on process group '", name_, "'");
  coalescing_ = true;
  coalesced_.clear();
  coalesced_outputs_.clear();
}

c10::intrusive_ptr<c10d::Work> TpuBackend::endCoalescing() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  TORCH_CHECK(coalescing_, "torch_tpu distributed: endCoalescing without startCoalescing");
  coalescing_ = false;
  // The collectives were queued as they came (in order, asynchronously); the coalesced work
  // completes when the last of them has run.
  return c10::make_intrusive<TpuWork>(rank_, c10d::OpType::COALESCED, std::move(coalesced_),
                                      std::move(coalesced_outputs_), false, seq_);
}

int TpuBackend::DeviceOf(const std::vector<at::Tensor>& tensors, const char* op) {
  int device = device_;
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.defined(), "torch_tpu distributed: ", op, " got an undefined tensor");
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "torch_tpu distributed: ", op,
                " on a tpu process group needs tpu tensors, got one on ", t.device(),
                " (use a process group with a CPU backend for it, e.g. init_process_group('cpu:gloo,tpu:tpu'))");
    int d = t.device().index() < 0 ? torch_bridge::CurrentDeviceIndex() : t.device().index();
    if (device < 0) device = d;
    TORCH_CHECK(d == device, "torch_tpu distributed: process group '", name_, "' runs on tpu:", device, "; ", op,
                " got a tensor on tpu:", d, " (one device per rank and process group)");
  }
  if (device < 0) device = torch_bridge::CurrentDeviceIndex();
  device_ = device;
  return device;
}

Issued TpuBackend::Issue(TensorCall& call, const std::string& what, int device) {
  // A group that failed stays failed: say so at the caller's line.
  torch_bridge::Check(transport_->Aborted());
  CollDesc& d = call.coll.desc;
  const bool p2p = call.coll.op == CollOp::kSend || call.coll.op == CollOp::kRecv;
  d.seq = p2p ? 0 : ++seq_;  // only collectives are numbered: every rank of the group issues them
  d.op = static_cast<uint8_t>(call.coll.op);
  d.red = static_cast<uint8_t>(call.coll.red);
  d.dtype = static_cast<uint8_t>(call.coll.dtype);
  SetText(d.what, what);
  SetText(d.where, torch_bridge::UserSourceLocation());
  Issued issued = IssueCollective(*transport_, call, device);
  if (torch_bridge::GetEagerMode() == torch_bridge::EagerMode::kDebug)
    torch_bridge::Check(issued.queue->WaitFor(issued.seq));
  return issued;
}

c10::intrusive_ptr<c10d::Work> TpuBackend::Finish(c10d::OpType type, std::vector<Issued> parts,
                                                  std::vector<at::Tensor> outputs, bool blocking) {
  if (coalescing_) {
    for (Issued& p : parts) coalesced_.push_back(std::move(p));
    for (at::Tensor& t : outputs) coalesced_outputs_.push_back(std::move(t));
    // What c10d's coalescing manager expects from a collective inside it: a Work it does not wait on.
    return c10::make_intrusive<TpuWork>(rank_, type, std::vector<Issued>{}, std::vector<at::Tensor>{}, false, seq_);
  }
  blocking = blocking || Flags().dist_blocking_wait;
  return c10::make_intrusive<TpuWork>(rank_, type, std::move(parts), std::move(outputs), blocking, seq_);
}

}  // namespace tpu::dist
