// Note [Memory history]: torch.tpu.memory._record_memory_history() installs this recorder as the
// runtime's allocation observer (Note [Allocation events] in runtime/allocator.h); with history
// off there is none, so the allocator pays one atomic load per event. While on, it keeps
//   - the trace: every alloc / free / oom of each device, in order, at most `max_entries` per
//     device (the oldest dropped), each with the Python stack of the thread that caused it;
//   - the state: the stack that allocated each live buffer, for the snapshot's blocks.
// Stacks are gathered only on a thread that holds the GIL (the Python thread that issued the op);
// memory attached or returned on another thread (a queue worker, a DataLoader thread without the
// GIL) is recorded without a stack -- the allocator never takes the GIL.
//
// The snapshot follows PyTorch's format (torch.cuda.memory._snapshot): `segments` and
// `device_traces`. A tpu buffer's memory is one block, so each live buffer is one segment of one
// active block at its device address; each block the allocator keeps cached is a segment of one
// inactive block (given addresses from 4096 up, below every device address). Their sizes sum to
// the reserved memory (the host allocator's rounded blocks).
#include "torch/memory_history.h"

#include <Python.h>
#include <frameobject.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/memory.h"
#include "torch/tensor_utils.h"

namespace py = pybind11;

namespace tpu::torch_bridge {
namespace {

struct Frame {
  std::string filename;
  std::string name;
  int line = 0;
};
using Stack = std::shared_ptr<const std::vector<Frame>>;

constexpr size_t kMaxFrames = 128;

// The calling thread's Python stack, innermost frame first. A thread that released the GIL to
// run an op (PyTorch's bindings do) takes it back for the walk, as PyTorch's CUDA allocator does
// for its history; a thread that never ran Python (a queue worker) records no stack. Bindings of
// ours that wait for the queue or the allocator release the GIL first, so this cannot deadlock
// with them.
Stack GatherPythonStack() {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return nullptr;
  bool held = PyGILState_Check();
  if (!held && PyGILState_GetThisThreadState() == nullptr) return nullptr;
  PyGILState_STATE gil = PyGILState_Ensure();
  auto frames = std::make_shared<std::vector<Frame>>();
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame && frames->size() < kMaxFrames) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    frames->push_back(Frame{file ? file : "", name ? name : "", PyFrame_GetLineNumber(frame)});
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  if (PyErr_Occurred()) PyErr_Clear();  // a name that is not UTF-8: the frame keeps ""
  PyGILState_Release(gil);
  return frames;
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct TraceEntry {
  AllocationEvent event;
  int64_t time_us = 0;
  Stack stack;
};

struct LiveBlock {
  int64_t requested = 0;
  Stack stack;
};

class MemoryHistory final : public AllocationObserver {
 public:
  static MemoryHistory& Get() {
    static auto* history = new MemoryHistory();  // outlives every allocator (never destroyed)
    return *history;
  }

  // enabled: none / "state" / "all"; context: stacks for none / "state" / "alloc" / "all".
  void Configure(const std::string& enabled, const std::string& context, int64_t max_entries) {
    bool on = enabled == "state" || enabled == "all";
    {
      std::lock_guard<std::mutex> lock(mu_);
      trace_ = enabled == "all";
      alloc_stacks_.store(on && context != "none", std::memory_order_relaxed);
      free_stacks_.store(on && context == "all", std::memory_order_relaxed);
      max_entries_ = max_entries > 0 ? static_cast<size_t>(max_entries) : 1;
      if (!on) {
        traces_.clear();
        live_.clear();
      }
      for (auto& t : traces_)
        while (t.size() > max_entries_) t.pop_front();
    }
    SetAllocationObserver(on ? this : nullptr);
  }

  void OnAllocationEvent(const AllocationEvent& e) override {
    bool is_alloc = e.kind == AllocationEvent::Kind::kAlloc;
    bool want_stack = (e.kind == AllocationEvent::Kind::kFree ? free_stacks_ : alloc_stacks_).load(std::memory_order_relaxed);
    Stack stack = want_stack ? GatherPythonStack() : nullptr;  // outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    if (is_alloc) live_[e.address] = LiveBlock{e.requested, stack};
    else if (e.kind == AllocationEvent::Kind::kFree) live_.erase(e.address);
    if (!trace_) return;
    if (static_cast<size_t>(e.device) >= traces_.size()) traces_.resize(static_cast<size_t>(e.device) + 1);
    auto& t = traces_[static_cast<size_t>(e.device)];
    t.push_back(TraceEntry{e, NowUs(), std::move(stack)});
    if (t.size() > max_entries_) t.pop_front();
  }

  py::dict Snapshot();

 private:
  std::mutex mu_;
  bool trace_ = false;  // under mu_
  std::atomic<bool> alloc_stacks_{false}, free_stacks_{false};
  size_t max_entries_ = 1;
  std::vector<std::deque<TraceEntry>> traces_;  // per device
  std::unordered_map<uint64_t, LiveBlock> live_;  // device address -> how it was allocated
};

py::list FramesList(const Stack& stack) {
  py::list out;
  if (!stack) return out;
  for (const Frame& f : *stack) {
    py::dict d;
    d["filename"] = f.filename;
    d["line"] = f.line;
    d["name"] = f.name;
    out.append(d);
  }
  return out;
}

py::dict Segment(int device, uint64_t address, int64_t size, int64_t requested, bool active, const Stack& stack) {
  py::dict block;
  block["address"] = address;
  block["size"] = size;
  block["requested_size"] = active ? requested : 0;
  block["state"] = active ? "active_allocated" : "inactive";
  block["frames"] = FramesList(stack);
  py::dict seg;
  seg["device"] = device;
  seg["address"] = address;
  seg["total_size"] = size;
  seg["allocated_size"] = active ? size : 0;
  seg["active_size"] = active ? size : 0;
  seg["requested_size"] = active ? requested : 0;
  seg["stream"] = 0;
  seg["segment_type"] = size >= (int64_t{1} << 20) ? "large" : "small";
  seg["segment_pool_id"] = py::make_tuple(0, 0);
  seg["is_expandable"] = false;
  seg["frames"] = FramesList(stack);
  py::list blocks;
  blocks.append(block);
  seg["blocks"] = blocks;
  return seg;
}

const char* ActionName(AllocationEvent::Kind k) {
  switch (k) {
    case AllocationEvent::Kind::kAlloc: return "alloc";
    case AllocationEvent::Kind::kFree: return "free_completed";
    case AllocationEvent::Kind::kOom: return "oom";
  }
  return "";
}

py::dict TraceDict(const TraceEntry& t, const char* action) {
  py::dict d;
  d["action"] = action;
  d["addr"] = t.event.address;
  d["size"] = t.event.size;
  d["requested_size"] = t.event.requested;
  d["stream"] = 0;
  d["time_us"] = t.time_us;
  d["frames"] = FramesList(t.stack);
  if (t.event.kind == AllocationEvent::Kind::kOom) d["device_free"] = t.event.free_bytes;
  return d;
}

py::dict MemoryHistory::Snapshot() {
  Backend& backend = GetBackend();
  struct Live {
    int device;
    uint64_t address;
    int64_t nbytes, charged;
    Stack stack;
  };
  std::vector<Live> live;
  std::vector<std::vector<int64_t>> cached;
  std::vector<std::deque<TraceEntry>> traces;
  {
    // The queues and the allocator take locks that threads freeing memory hold while they wait
    // for the GIL (Note [Memory history]): collect without it.
    py::gil_scoped_release no_gil;
    for (int d = 0; d < backend.device_count(); ++d) backend.device(d).queue().CollectGarbage();
    Buffer::ForEachLive([&](const Buffer& b) {
      if (!b.materialized() || b.memory_released() || b.device() < 0 || b.device() >= backend.device_count()) return;
      if (b.allocator() != &backend.device(b.device()).allocator()) return;  // a test's own allocator
      live.push_back(Live{b.device(), reinterpret_cast<uint64_t>(b.device_address()), b.nbytes(),
                          b.allocator()->ChargedBytes(b.nbytes()), nullptr});
    });
    for (int d = 0; d < backend.device_count(); ++d) cached.push_back(backend.device(d).allocator().CachedBlocks());
    std::lock_guard<std::mutex> lock(mu_);
    for (Live& l : live) {
      auto it = live_.find(l.address);
      if (it != live_.end()) l.stack = it->second.stack;
    }
    traces = traces_;
  }
  py::list segments;
  for (const Live& l : live) segments.append(Segment(l.device, l.address, l.charged, l.nbytes, true, l.stack));
  uint64_t cached_address = 4096;
  for (int d = 0; d < static_cast<int>(cached.size()); ++d) {
    for (int64_t size : cached[static_cast<size_t>(d)]) {
      segments.append(Segment(d, cached_address, size, 0, false, nullptr));
      cached_address += static_cast<uint64_t>(size);
    }
  }
  py::list device_traces;
  for (int d = 0; d < backend.device_count(); ++d) {
    py::list entries;
    if (static_cast<size_t>(d) < traces.size()) {
      for (const TraceEntry& t : traces[static_cast<size_t>(d)]) {
        // The tpu allocator frees at once: the request and its completion are one event.
        if (t.event.kind == AllocationEvent::Kind::kFree) entries.append(TraceDict(t, "free_requested"));
        entries.append(TraceDict(t, ActionName(t.event.kind)));
      }
    }
    device_traces.append(entries);
  }
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  py::dict settings;
  settings["backend"] = backend.name();
  out["allocator_settings"] = settings;
  return out;
}

}  // namespace

void BindMemory(py::module_& m) {
  m.def("_memory_record_history", [](const std::string& enabled, const std::string& context, int64_t max_entries) {
    py::gil_scoped_release no_gil;
    MemoryHistory::Get().Configure(enabled, context, max_entries);
  });
  m.def("_memory_snapshot", [] { return MemoryHistory::Get().Snapshot(); });
  m.def("_set_memory_limit", [](int device, int64_t bytes) {
    Device& d = DeviceFor(device);
    py::gil_scoped_release no_gil;
    Check(d.allocator().SetMemoryLimit(bytes));
  });
}

}  // namespace tpu::torch_bridge
