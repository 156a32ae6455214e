#include "runtime/host/host_backend.h"

#include <algorithm>
#include <memory>

#include "base/options.h"
#include "compiler/compiler.h"
#include "runtime/host/executor.h"
#include "runtime/host/host_allocator.h"
#include "runtime/worker_queue.h"

namespace tpu {

int64_t ChipHbmBytes(const std::string& chip) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  if (chip == "v5e") return 16 * kGiB;
  if (chip == "v5p") return 95 * kGiB;
  if (chip == "v6e") return 32 * kGiB;
  if (chip == "v7") return 192 * kGiB;
  return 0;
}

namespace host {

StatusOr<std::shared_ptr<const HostExecutable>> CompileForHost(const Graph& graph, const CompileOptions& options) {
  auto exe = std::make_shared<HostExecutable>();
  exe->graph = graph;
  TPU_RETURN_IF_ERROR(Optimize(exe->graph));
  exe->set_identity(Fingerprint(graph), options.name, EstimateWork(exe->graph));
  exe->set_source(graph);
  TPU_RETURN_IF_ERROR(PlanExecutable(*exe));
  return std::shared_ptr<const HostExecutable>(std::move(exe));
}

namespace {

class HostDevice final : public Device {
 public:
  HostDevice(int index, const std::string& chip, int64_t capacity)
      : allocator_(index, capacity), executor_(&allocator_), queue_(index, &executor_) {
    allocator_.SetQueue(&queue_);  // Note [Stream-ordered frees]
    props_.chip = chip;
    props_.name = "TPU " + chip + " (host executor)";
    props_.kind = "host";
    props_.hbm_bytes = ChipHbmBytes(chip);
    props_.memory_capacity = capacity;
    props_.index = index;
  }
  ~HostDevice() override { allocator_.SetQueue(nullptr); }  // the queue goes first
  const DeviceProperties& properties() const override { return props_; }
  Allocator& allocator() override { return allocator_; }
  Queue& queue() override { return queue_; }

 private:
  DeviceProperties props_;
  HostAllocator allocator_;
  HostExecutor executor_;
  WorkerQueue queue_;  // last: its worker thread stops before the executor goes away
};

class HostBackend final : public Backend {
 public:
  HostBackend() {
    const OptionValues& f = Flags();
    std::string chip = ChipHbmBytes(f.chip) ? f.chip : "v6e";
    int n = static_cast<int>(std::max<int64_t>(1, f.num_devices));
    // Never promise more than the host can back: the budget is split across the devices.
    int64_t host = HostAvailableBytes() * 9 / 10 / n;
    int64_t capacity = f.memory_capacity > 0 ? f.memory_capacity : ChipHbmBytes(chip);
    capacity = std::min(capacity, host);
    for (int i = 0; i < n; ++i) devices_.push_back(std::make_unique<HostDevice>(i, chip, capacity));
  }
  std::string name() const override { return "host"; }
  std::string version() const override { return "host-executor/" + std::to_string(kCompilerVersion); }
  std::string description() const override { return "host executor (programs run on this machine's CPU)"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device& device(int index) override { return *devices_.at(index); }
  bool strided_bindings() const override { return true; }
  StatusOr<ExecutablePtr> Compile(const Graph& graph, const CompileOptions& options) override {
    TPU_ASSIGN_OR_RETURN(auto exe, CompileForHost(graph, options));
    return ExecutablePtr(std::move(exe));
  }
  StatusOr<std::string> Serialize(const Executable& exe) const override {
    auto* host = dynamic_cast<const HostExecutable*>(&exe);
    if (!host) return Internal("the host backend serializes host executables only");
    return SerializePlan(*host);
  }
  StatusOr<ExecutablePtr> Deserialize(const std::string& bytes, const Graph& source,
                                      const CompileOptions& options) const override {
    TPU_ASSIGN_OR_RETURN(auto exe, DeserializePlan(bytes, source, options));
    return ExecutablePtr(std::move(exe));
  }

 private:
  std::vector<std::unique_ptr<HostDevice>> devices_;
};

}  // namespace

std::unique_ptr<Backend> MakeHostBackend() { return std::make_unique<HostBackend>(); }

}  // namespace host
}  // namespace tpu
