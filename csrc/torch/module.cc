// The Python extension module torch_tpu._C: device registration, device queries, options,
// eager modes, metrics. Each binding is a thin call into the layers below.
#include <ATen/Parallel.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cctype>
#include <string>

#include "base/metrics.h"
#include "base/options.h"
#include "base/thread_pool.h"
#include "compiler/compiler.h"
#include "compiler/persistent_cache.h"
#include "compiler/program_log.h"
#include "runtime/host/cpu_info.h"
#include "backends/backends.h"
#include "torch/deferred/captured_graph.h"
#include "torch/deferred/window.h"
#include "torch/distributed/bindings.h"
#include "torch/fork.h"
#include "torch/generator.h"
#include "torch/lower/context.h"
#include "torch/memory_history.h"
#include "torch/profiler.h"
#include "torch/python_location.h"
#include "torch/sync_wait.h"
#include "torch/tensor_utils.h"

namespace py = pybind11;
using namespace tpu;
using namespace tpu::torch_bridge;

namespace {

void CheckStatus(const Status& s) {
  if (!s.ok()) throw py::value_error(s.message());
}

// What the registry cannot say: the options the backend reads once when it creates the devices
// (changing them later would silently do nothing). Values are checked by the registry itself.
void RefuseReadOnceOption(const std::string& name, const std::string& canonical_value) {
  static const char* kReadOnce[] = {"chip", "num_devices", "memory_capacity", "backend", "pjrt_plugin",
                                    "pjrt_plugin_candidates", "pjrt_init_timeout", "pjrt_client_options"};
  if (std::find(std::begin(kReadOnce), std::end(kReadOnce), name) == std::end(kReadOnce)) return;
  if (!BackendCreated()) return;  // not read yet: the backend will take it
  auto current = Options::Get().GetString(name);
  CheckStatus(current.status());
  if (current.value() == canonical_value) return;
  std::string env = "TORCH_TPU_" + name;
  for (auto& c : env) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  throw py::value_error("option '" + name + "' is read once, when the devices are created; set " + env +
                        " in the environment before importing torch_tpu");
}

py::dict Properties(int index) {
  const DeviceProperties& p = DeviceFor(index).properties();
  py::dict d;
  d["name"] = p.name;
  d["chip"] = p.chip;
  d["total_memory"] = p.memory_capacity;
  d["hbm_bytes"] = p.hbm_bytes;
  d["index"] = p.index;
  d["backend"] = GetBackend().name();
  d["backend_description"] = GetBackend().description();
  d["kind"] = p.kind;
  return d;
}

py::dict MemoryStatsDict(int index) {
  Device& device = DeviceFor(index);
  MemoryStats s;
  {
    // Threads freeing memory may hold the queue's lock while they wait for the GIL (the memory
    // history's stacks): wait for the lock without it.
    py::gil_scoped_release no_gil;
    device.queue().CollectGarbage();  // finished programs may still hold buffers
    s = device.allocator().stats();
  }
  py::dict d;
  d["allocated_bytes.all.current"] = s.allocated;
  d["allocated_bytes.all.peak"] = s.peak_allocated;
  d["reserved_bytes.all.current"] = s.reserved;
  d["reserved_bytes.all.peak"] = s.peak_reserved;
  d["num_alloc_retries"] = 0;
  d["num_ooms"] = s.num_ooms;
  d["allocated_bytes.all.allocated"] = s.allocated_bytes_total;
  d["allocated_bytes.all.freed"] = s.freed_bytes_total;
  d["allocation.all.current"] = s.num_allocs - s.num_frees;
  d["allocation.all.allocated"] = s.num_allocs;
  d["allocation.all.freed"] = s.num_frees;
  d["host_copy_bytes.all.current"] = s.host_copies;
  d["host_copy_bytes.all.peak"] = s.peak_host_copies;
  d["capacity"] = s.capacity;
  d["limit"] = s.limit;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native extension";
  // A Python error raised inside a wait (Note [Interruptible waits]) reaches Python as itself.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (python_error& e) {
      e.restore();
    }
  });
  m.def("_register_device", [] {
    RegisterDevice();
    RegisterDeviceProfiler();  // Note [Device timeline]
    RegisterForkHandler();  // from now on the device counts as initialised (Note [Fork])
    RegisterExitStatusHandler();  // Note [Errors at exit]
    // Size the executor's pool once, before any kernel runs; every job is capped at PyTorch's
    // intra-op thread count, so torch.set_num_threads(n) holds for the device's kernels too (one
    // budget: at::get_num_threads reads a global, safe from the queue worker).
    if (Flags().num_threads > 0) ThreadPool::Get().Resize(static_cast<int>(Flags().num_threads));
    ThreadPool::SetBudget([] { return at::get_num_threads(); });
  });
  m.def("_set_num_threads", [](int n) { ThreadPool::Get().Resize(n); });
  m.def("_get_num_threads", [] { return ThreadPool::Get().num_threads(); });
  m.def("device_count", [] { return GetBackend().device_count(); });
  m.def("_is_in_bad_fork", &InBadFork);
  m.def("_set_library_paths", &SetLibraryPaths, py::arg("packages"), py::arg("site"), py::arg("stdlib"));
  m.def("current_device", [] { return CurrentDeviceIndex(); });
  m.def("set_device", [](int i) { SetCurrentDeviceIndex(i); });
  m.def("synchronize", [](int i) {
    py::gil_scoped_release release;
    SyncDevice(i < 0 ? CurrentDeviceIndex() : i);
  });
  m.def("_drain_autograd_device_threads", &DrainAutogradDeviceThreads);
  m.def("_take_errors_at_exit", [] {
    py::gil_scoped_release release;
    return TakeErrorsAtExit();
  });
  m.def("get_device_properties", &Properties);
  m.def("memory_stats", &MemoryStatsDict);
  m.def("reset_peak_memory_stats", [](int i) { DeviceFor(i).allocator().ResetPeak(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("reset_accumulated_memory_stats", [](int i) { DeviceFor(i).allocator().ResetAccumulated(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("empty_cache", [] {
    for (int i = 0; i < GetBackend().device_count(); ++i) {
      GetBackend().device(i).queue().CollectGarbage();
      GetBackend().device(i).allocator().EmptyCache();
    }
  }, py::call_guard<py::gil_scoped_release>());
  m.def("mem_get_info", [](int i) {
    Device& device = DeviceFor(i);
    MemoryStats s;
    {
      py::gil_scoped_release no_gil;
      device.queue().CollectGarbage();
      s = device.allocator().stats();
    }
    return py::make_tuple(s.capacity - s.reserved, s.capacity);
  });
  BindMemory(m);
  m.def("_device_profiling", &DeviceProfiling);
  m.def("counters", [] { return CounterSnapshot(); });
  m.def("reset_counters", [] { ResetCounters(); });
  // Raises (ValueError) what was wrong with the TORCH_TPU_* environment when the registry read it.
  m.def("_check_environment", [] { CheckStatus(Options::Get().environment_status()); });
  m.def("set_option", [](const std::string& name, const std::string& value) {
    // The value first: a bad value is reported as such even for a read-once option.
    auto canonical = Options::Get().Canonical(name, value);
    CheckStatus(canonical.status());
    RefuseReadOnceOption(name, canonical.value());
    // A mode change cuts the open windows first: what was recorded runs under the mode it was
    // recorded in.
    if (name == "eager_mode") CutAllWindows(CutReason::kModeChange);
    CheckStatus(Options::Get().Set(name, value));
    if (name == "num_threads" && Flags().num_threads > 0) ThreadPool::Get().Resize(static_cast<int>(Flags().num_threads));
    if (name == "eager_mode") {
      const std::string& m = Flags().eager_mode;
      SetEagerMode(m == "debug" ? EagerMode::kDebug : m == "fused" ? EagerMode::kFused : EagerMode::kStrict);
    }
  });
  m.def("get_option", [](const std::string& name) {
    auto v = Options::Get().GetString(name);
    CheckStatus(v.status());
    return v.value();
  });
  m.def("options", [] {
    py::list out;
    for (const auto& info : Options::Get().infos()) {
      py::dict d;
      d["name"] = info.name;
      d["env"] = info.env_var;
      d["default"] = info.default_value;
      d["value"] = Options::Get().GetString(info.name).value();
      d["help"] = info.help;
      d["accepted"] = info.Accepted();
      if (info.type == OptionType::kInt) d["range"] = py::make_tuple(info.min, info.max);
      if (info.type == OptionType::kString) d["choices"] = info.choices;
      out.append(d);
    }
    return out;
  });
  m.def("_default_generator", [](int i) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(DefaultGenerator(static_cast<c10::DeviceIndex>(i))));
  });
  m.def("_dump_window", [](int i) { return WindowFor(i < 0 ? CurrentDeviceIndex() : i).Dump(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("_window_ops", [](int i) { return WindowFor(i < 0 ? CurrentDeviceIndex() : i).ops(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("_cut_windows", [](const std::string& reason) {
    CutReason r = CutReason::kSynchronize;
    for (int i = 0; i < static_cast<int>(CutReason::kCount); ++i)
      if (reason == CutReasonName(static_cast<CutReason>(i))) r = static_cast<CutReason>(i);
    py::gil_scoped_release release;
    CutAllWindows(r);
  }, py::arg("reason") = "synchronize");
  m.def("_copy_runs", [](py::handle src, py::handle dst) {
    TORCH_CHECK(THPVariable_Check(src.ptr()) && THPVariable_Check(dst.ptr()), "_copy_runs: expected two tensors");
    return CopyRuns(THPVariable_Unpack(src.ptr()), THPVariable_Unpack(dst.ptr()));
  });
  m.def("compile_cache_size", [] { return CompileCache::Get().size(); });
  m.def("_cache_entries", [] {
    py::list out;
    for (const CacheEntryInfo& e : CompileCache::Get().Entries()) {
      py::dict d;
      d["name"] = e.name;
      d["ops"] = e.ops;
      d["hits"] = e.hits;
      d["compile_ms"] = e.compile_ns / 1e6;
      d["from_disk"] = e.from_disk;
      out.append(d);
    }
    return out;
  });
  m.def("_cache_compiles", [] {
    py::list out;
    for (const CompileRecord& r : CompileCache::Get().Compiles())
      out.append(py::make_tuple(r.name, CompileReasonName(r.reason), r.what));
    return out;
  });
  m.def("_cache_disk", [] {
    DiskStats s = PersistentCache::Get().stats();
    py::dict d;
    d["dir"] = s.dir;
    d["entries"] = s.entries;
    d["bytes"] = s.bytes;
    return d;
  });
  m.def("_cache_clear_disk", [] { PersistentCache::Get().Clear(); });
  m.def("clear_compile_cache", [] { CompileCache::Get().Clear(); });
  m.def("_set_program_log", [](bool on) { SetProgramLog(on); });
  m.def("_take_program_log", [] { return TakeProgramLog(); });
  RegisterCaptureBindings(m);
  tpu::dist::AddBindings(m);
  m.def("_host_cpu_info", [] {
    host::HostCpuInfo info = host::GetHostCpuInfo();
    py::dict d;
    d["simd_target"] = info.simd_target;
    d["onednn_version"] = info.onednn_version;
    d["onednn_isa"] = info.onednn_isa;
    return d;
  });
}
