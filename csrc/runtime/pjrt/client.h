// A PJRT client over a loaded plugin: created (with the plugin's initialization) under a
// watchdog, its addressable devices and their properties.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/pjrt/api.h"

namespace tpu::pjrt {

// One PJRT_NamedValue of client creation ("cpu_device_count" = 2 ...).
struct ClientOption {
  enum class Type { kInt, kBool, kString, kFloat };
  std::string name;
  Type type = Type::kString;
  int64_t int_value = 0;
  bool bool_value = false;
  double float_value = 0;
  std::string string_value;
};

// Parses "name=value,name=value": an integer, true/false, a number with a '.', or else a string.
StatusOr<std::vector<ClientOption>> ParseClientOptions(const std::string& text);

// What PJRT_Device_MemoryStats reports (the fields a plugin leaves unset stay -1).
struct DeviceMemory {
  int64_t bytes_in_use = -1;
  int64_t bytes_limit = -1;
  int64_t peak_bytes_in_use = -1;
};

class Client {
 public:
  // Initializes the plugin (PJRT_Plugin_Initialize) and creates a client. Both run on a helper
  // thread while this one waits at most `timeout_s` seconds: a plugin that blocks (libtpu
  // querying a cloud metadata server) gives an error instead of hanging the process. After a
  // timeout the helper thread and the plugin stay behind, abandoned.
  static StatusOr<std::unique_ptr<Client>> Create(std::unique_ptr<Api> api, const std::vector<ClientOption>& options,
                                                  double timeout_s);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Api& api() const { return *api_; }
  PJRT_Client* get() const { return client_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }

  int device_count() const { return static_cast<int>(devices_.size()); }
  PJRT_Device* device(int i) const { return devices_.at(i); }
  // PJRT_DeviceDescription_Kind ("cpu", "TPU v5 lite", "NVIDIA H100 80GB HBM3").
  const std::string& device_kind(int i) const { return kinds_.at(i); }
  int device_id(int i) const { return ids_.at(i); }
  // Unimplemented where the plugin reports no memory statistics (the XLA CPU plugin).
  StatusOr<DeviceMemory> MemoryStats(int i) const;

 private:
  Client() = default;
  Status Describe();
  std::unique_ptr<Api> api_;
  PJRT_Client* client_ = nullptr;
  std::string platform_name_, platform_version_;
  std::vector<PJRT_Device*> devices_;
  std::vector<std::string> kinds_;
  std::vector<int> ids_;
};

}  // namespace tpu::pjrt
