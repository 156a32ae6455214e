#include "runtime/pjrt/backend.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include "base/options.h"
#include "runtime/pjrt/buffers.h"
#include "runtime/pjrt/compile.h"
#include "runtime/pjrt/executor.h"
#include "runtime/worker_queue.h"

namespace tpu::pjrt {
namespace {

// Bump when what MakeProgram prints or appends changes: executables compiled before differ.
constexpr int kProgramFormat = 1;

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The chip a TPU's PJRT device kind names ("TPU v5 lite" is v5e, "TPU v6 lite" v6e); else "".
std::string ChipOfKind(const std::string& kind) {
  std::string k = kind;
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return std::tolower(c); });
  if (k.rfind("tpu", 0) != 0) return "";
  if (k.find("v5 lite") != std::string::npos || k.find("v5e") != std::string::npos) return "v5e";
  if (k.find("v5") != std::string::npos) return "v5p";
  if (k.find("v6") != std::string::npos) return "v6e";
  if (k.find("7") != std::string::npos) return "v7";
  return "";
}

// libtpu on a machine it may not own: no metadata-server queries (they block for minutes where
// there is no TPU VM metadata) and logs in a directory of our own, not /tmp/tpu_logs.
void PrepareLibtpuEnvironment() {
  setenv("TPU_SKIP_MDS_QUERY", "1", /*overwrite=*/0);
  if (!std::getenv("TPU_LOG_DIR")) {
    std::string dir = (std::filesystem::temp_directory_path() / "torch_tpu_libtpu_XXXXXX").string();
    if (mkdtemp(dir.data())) setenv("TPU_LOG_DIR", dir.c_str(), 1);
  }
}

class PjrtDevice final : public Device {
 public:
  PjrtDevice(const Client* client, int index, int64_t capacity, DeviceProperties props)
      : props_(std::move(props)), allocator_(&client->api(), index, capacity), executor_(client, index),
        queue_(index, &executor_, &allocator_, Flags().queue_held_memory_mb << 20) {}
  const DeviceProperties& properties() const override { return props_; }
  Allocator& allocator() override { return allocator_; }
  Queue& queue() override { return queue_; }

 private:
  DeviceProperties props_;
  PjrtAllocator allocator_;
  PjrtExecutor executor_;
  WorkerQueue queue_;  // last: its worker thread stops before the executor goes away
};

class PjrtBackend final : public Backend {
 public:
  explicit PjrtBackend(std::unique_ptr<Client> client) : client_(std::move(client)) {
    // The plugin file too: two builds of one XLA CPU plugin report the same platform version.
    struct stat st;
    attributes_ = "/" + BaseName(client_->api().path()) + "-" +
                  std::to_string(::stat(client_->api().path().c_str(), &st) == 0 ? st.st_size : 0);
    for (const std::string& a : client_->api().Attributes()) attributes_ += "/" + a;
    int n = client_->device_count();
    // XLA's CPU plugin makes one device per core or so, all on the same CPUs: like the host
    // executor it exposes num_devices of them (the plugin's cpu_device_count option sets how
    // many it makes).
    if (client_->platform_name() == "cpu")
      n = std::min<int>(n, static_cast<int>(std::max<int64_t>(1, Flags().num_devices)));
    int64_t host_budget = HostAvailableBytes() * 9 / 10 / n;
    for (int i = 0; i < n; ++i) {
      DeviceProperties p;
      p.index = i;
      p.kind = client_->device_kind(i);
      p.chip = ChipOfKind(p.kind);
      p.name = p.chip.empty() ? p.kind + " (PJRT " + client_->platform_name() + ")" : "TPU " + p.chip + " (PJRT)";
      StatusOr<DeviceMemory> mem = client_->MemoryStats(i);
      // The plugin's own limit where it reports one (a TPU's HBM); else, as on the host
      // backend, what the host can back.
      int64_t limit = mem.ok() && mem.value().bytes_limit > 0 ? mem.value().bytes_limit : 0;
      int64_t capacity = limit > 0 ? limit : host_budget;
      if (Flags().memory_capacity > 0) capacity = std::min<int64_t>(capacity, Flags().memory_capacity);
      p.hbm_bytes = limit;
      p.memory_capacity = capacity;
      devices_.push_back(std::make_unique<PjrtDevice>(client_.get(), i, capacity, std::move(p)));
    }
  }
  std::string name() const override { return "pjrt"; }
  std::string version() const override {
    return "pjrt/" + client_->platform_name() + "/" + client_->platform_version() + "/api-" +
           client_->api().version_string() + attributes_ + "/program-" + std::to_string(kProgramFormat);
  }
  std::string description() const override {
    return "PJRT plugin " + client_->api().path() + " (platform " + client_->platform_name() + " " +
           client_->platform_version() + ", PJRT C API " + client_->api().version_string() + ", built with the " +
           HeaderVersion() + " header)";
  }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device& device(int index) override { return *devices_.at(index); }
  bool strided_bindings() const override { return false; }
  StatusOr<ExecutablePtr> Compile(const Graph& graph, const CompileOptions& options) override {
    TPU_ASSIGN_OR_RETURN(auto exe, CompileForPjrt(*client_, graph, options));
    return ExecutablePtr(std::move(exe));
  }
  StatusOr<std::string> Serialize(const Executable& exe) const override {
    const auto* e = dynamic_cast<const PjrtExecutable*>(&exe);
    if (!e) return InvalidArgument("the pjrt backend cannot serialize another backend's executable");
    return SerializeExecutable(*client_, *e);
  }
  StatusOr<ExecutablePtr> Deserialize(const std::string& bytes, const Graph& source,
                                      const CompileOptions& options) const override {
    TPU_ASSIGN_OR_RETURN(auto exe, DeserializeExecutable(*client_, bytes, source, options));
    return ExecutablePtr(std::move(exe));
  }

 private:
  std::unique_ptr<Client> client_;
  std::string attributes_;  // the plugin's file and size, and its PJRT_Plugin_Attributes
  std::vector<std::unique_ptr<PjrtDevice>> devices_;  // after client_: destroyed first
};

}  // namespace

bool IsLibtpu(const std::string& path) { return BaseName(path).rfind("libtpu", 0) == 0; }

bool TpuPresent(const std::string& pci_root) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(pci_root, ec)) {
    std::ifstream f(entry.path() / "vendor");
    std::string vendor;
    if (f >> vendor && vendor == "0x1ae0") return true;
  }
  return false;
}

bool PciDevicesListable(const std::string& pci_root) {
  std::error_code ec;
  std::filesystem::directory_iterator it(pci_root, ec);
  return !ec && it != std::filesystem::directory_iterator();
}

std::vector<std::string> SplitPaths(const std::string& list) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(':', pos);
    if (end == std::string::npos) end = list.size();
    if (end > pos) out.push_back(list.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

StatusOr<std::string> ChoosePlugin(const std::string& option, const std::vector<std::string>& candidates,
                                   bool tpu_present) {
  if (!option.empty()) {
    if (!FileExists(option)) return FailedPrecondition("TORCH_TPU_PJRT_PLUGIN=" + option + ": no such file");
    return option;
  }
  std::string looked;
  for (const std::string& c : candidates) {
    looked += (looked.empty() ? "" : ", ") + c;
    if (!FileExists(c)) continue;
    if (IsLibtpu(c) && !tpu_present) continue;  // it would block or fail where there is no TPU
    return c;
  }
  return FailedPrecondition(
      "no PJRT plugin found for the pjrt backend: set TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so, or install "
      "one (pip install --no-deps lammps-jax-pjrt-cpu==0.11.2 for XLA's CPU plugin; libtpu on a TPU VM)" +
      (looked.empty() ? std::string()
                      : "; looked at: " + looked + (tpu_present ? "" : " (libtpu skipped: no TPU here)")));
}

StatusOr<std::unique_ptr<Backend>> MakePjrtBackend(const PjrtBackendOptions& options) {
  bool libtpu = IsLibtpu(options.plugin);
  if (libtpu) PrepareLibtpuEnvironment();
  // libtpu chosen where the PCI devices can be listed and none is a TPU: it is not loaded at all.
  // It would fail anyway, after seconds (10 s on a loaded 2-core machine) to minutes of scans and
  // metadata queries; a machine whose PCI devices cannot be listed (a container without /sys)
  // still gets to try.
  if (libtpu && PciDevicesListable() && !TpuPresent())
    return FailedPrecondition("no TPU found on this machine (no PCI device of vendor 0x1ae0 in /sys/bus/pci/devices), "
                              "so libtpu cannot run: " + options.plugin + " was not loaded; choose another PJRT plugin "
                              "(TORCH_TPU_PJRT_PLUGIN, e.g. XLA's CPU plugin) or the host backend (TORCH_TPU_BACKEND=host)");
  // Errors of libtpu where there is no TPU say that first: its own message is about devices
  // it did not find under another name.
  auto explain = [&](Status st) {
    if (!libtpu || TpuPresent()) return st;
    return Status(st.code(), "no TPU found on this machine (no PCI device of vendor 0x1ae0), so libtpu cannot run: " +
                                 st.message());
  };
  TPU_ASSIGN_OR_RETURN(std::vector<ClientOption> client_options, ParseClientOptions(options.client_options));
  StatusOr<std::unique_ptr<Api>> api = Api::Load(options.plugin);
  if (!api.ok()) return explain(api.status());
  StatusOr<std::unique_ptr<Client>> client =
      Client::Create(std::move(api).value(), client_options, options.init_timeout_s);
  if (!client.ok()) return explain(client.status());
  return std::unique_ptr<Backend>(new PjrtBackend(std::move(client).value()));
}

}  // namespace tpu::pjrt
