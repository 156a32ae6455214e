#include "backends/backends.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "base/options.h"
#include "runtime/host/host_backend.h"
#ifdef TPU_HAVE_PJRT
#include "runtime/pjrt/backend.h"
#endif

namespace tpu {
namespace {

// The backend of a process whose chosen backend could not start: no devices; it says why.
class UnavailableBackend final : public Backend {
 public:
  UnavailableBackend(std::string name, Status why) : name_(std::move(name)), why_(std::move(why)) {}
  std::string name() const override { return name_; }
  std::string version() const override { return name_ + "/unavailable"; }
  std::string description() const override { return "unavailable: " + why_.message(); }
  int device_count() const override { return 0; }
  Device& device(int index) override {
    std::fprintf(stderr, "torch_tpu: device %d of a backend that has none (%s)\n", index, why_.message().c_str());
    std::abort();
  }
  bool strided_bindings() const override { return false; }
  StatusOr<ExecutablePtr> Compile(const Graph&, const CompileOptions&) override { return why_; }

 private:
  std::string name_;
  Status why_;
};

struct Chosen {
  std::unique_ptr<Backend> backend;
  Status status;
};

Chosen Choose() {
  const OptionValues& f = Flags();
  if (f.backend == "host") return {host::MakeHostBackend(), Status::Ok()};
  Status st;
  if (f.backend == "pjrt") {
#ifdef TPU_HAVE_PJRT
    StatusOr<std::string> plugin =
        pjrt::ChoosePlugin(PathOption("pjrt_plugin"), pjrt::SplitPaths(PathOption("pjrt_plugin_candidates")), pjrt::TpuPresent());
    if (plugin.ok()) {
      pjrt::PjrtBackendOptions o;
      o.plugin = plugin.value();
      o.client_options = PathOption("pjrt_client_options");
      o.init_timeout_s = static_cast<double>(f.pjrt_init_timeout);
      StatusOr<std::unique_ptr<Backend>> b = pjrt::MakePjrtBackend(o);
      if (b.ok()) return {std::move(b).value(), Status::Ok()};
      st = b.status();
    } else {
      st = plugin.status();
    }
#else
    st = FailedPrecondition(
        "this build of torch_tpu has no pjrt backend: pjrt_c_api.h was not found when it was built "
        "(pip install --no-deps xla-cpu-pjrt==0.0.1, then rebuild)");
#endif
  } else {
    st = InvalidArgument("unknown backend '" + f.backend + "' (TORCH_TPU_BACKEND): 'host' or 'pjrt'");
  }
  Status why(st.code(), "the " + f.backend + " backend could not start: " + st.message());
  return {std::make_unique<UnavailableBackend>(f.backend, why), why};
}

std::atomic<bool> g_created{false};

Chosen& Process() {
  static Chosen* chosen = [] {
    auto* c = new Chosen(Choose());
    g_created.store(true, std::memory_order_release);
    return c;
  }();
  return *chosen;
}

}  // namespace

Backend& GetBackend() { return *Process().backend; }

const Status& BackendStatus() { return Process().status; }

bool BackendCreated() { return g_created.load(std::memory_order_acquire); }

}  // namespace tpu
