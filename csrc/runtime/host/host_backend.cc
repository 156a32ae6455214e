// The host backend: virtual TPU devices whose memory is host memory and whose programs run on
// the CPU through the host executor.
#include <algorithm>
#include <memory>

#include "base/options.h"
#include "runtime/device.h"
#include "runtime/host/executor.h"

namespace tpu {

int64_t ChipHbmBytes(const std::string& chip) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  if (chip == "v5e") return 16 * kGiB;
  if (chip == "v5p") return 95 * kGiB;
  if (chip == "v6e") return 32 * kGiB;
  if (chip == "v7") return 192 * kGiB;
  return 0;
}

namespace {

class HostDevice : public Device {
 public:
  HostDevice(int index, const std::string& chip, int64_t capacity)
      : allocator_(index, capacity), queue_(index) {
    props_.chip = chip;
    props_.name = "TPU " + chip + " (host executor)";
    props_.hbm_bytes = ChipHbmBytes(chip);
    props_.memory_capacity = capacity;
    props_.index = index;
  }
  const DeviceProperties& properties() const override { return props_; }
  Allocator& allocator() override { return allocator_; }
  Queue& queue() override { return queue_; }
  Executor& executor() override { return executor_; }

 private:
  DeviceProperties props_;
  Allocator allocator_;
  host::HostExecutor executor_;
  Queue queue_;  // last: its worker thread stops before the executor goes away
};

class HostBackend : public Backend {
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
  int device_count() const override { return static_cast<int>(devices_.size()); }
  Device& device(int index) override { return *devices_.at(index); }

 private:
  std::vector<std::unique_ptr<HostDevice>> devices_;
};

}  // namespace

Backend& GetBackend() {
  static Backend* backend = new HostBackend();
  return *backend;
}

}  // namespace tpu
