// Helpers of the PJRT backend's tests: the plugin they run against, one backend for the whole
// test binary, and buffers filled and read through a device's queue.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/options.h"
#include "ir/builder.h"
#include "runtime/device.h"
#include "runtime/pjrt/backend.h"

namespace tpu::pjrt::testing {

// The plugin: TORCH_TPU_PJRT_PLUGIN, else the first of TORCH_TPU_PJRT_PLUGIN_CANDIDATES that
// exists (scripts/test.sh lists the installed ones); empty when there is none.
inline const std::string& TestPlugin() {
  static const std::string path = [] {
    auto p = ChoosePlugin(PathOption("pjrt_plugin"), SplitPaths(PathOption("pjrt_plugin_candidates")), TpuPresent());
    return p.ok() ? p.value() : std::string();
  }();
  return path;
}
// Chosen before main(): other tests reset the options to their defaults.
inline const std::string& kTestPluginAtStartup = TestPlugin();

#define TPU_REQUIRE_PJRT_PLUGIN()                                                                 \
  if (::tpu::pjrt::testing::TestPlugin().empty())                                                \
  GTEST_SKIP() << "no PJRT plugin: set TORCH_TPU_PJRT_PLUGIN=/path/to/pjrt_c_api_cpu_plugin.so, or " \
                  "TORCH_TPU_PJRT_PLUGIN_CANDIDATES (scripts/test.sh sets it from the installed packages)"

// One backend over TestPlugin() for the test binary (created on first use, never destroyed: a
// plugin is never unloaded). Fails the calling test when it cannot start.
inline const std::string& kTestClientOptions = *new std::string(PathOption("pjrt_client_options"));
inline Backend* TestBackend() {
  static StatusOr<std::unique_ptr<Backend>>* made = [] {
    PjrtBackendOptions o;
    o.plugin = TestPlugin();
    o.client_options = kTestClientOptions;
    return new StatusOr<std::unique_ptr<Backend>>(MakePjrtBackend(o));
  }();
  EXPECT_TRUE(made->ok()) << made->status().ToString();
  return made->ok() ? made->value().get() : nullptr;
}

inline TensorType T(DType dt, Dims dims) { return TensorType{dt, std::move(dims)}; }

// A device buffer owned by the test (released at scope exit).
struct DeviceBuffer {
  Buffer* buffer = nullptr;
  DeviceBuffer() = default;
  explicit DeviceBuffer(Buffer* b) : buffer(b) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : buffer(o.buffer) { o.buffer = nullptr; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (buffer) buffer->Release();
  }
  Binding Bind(const TensorType& t) const { return Binding(buffer, 0, t.dtype, t.dims); }
};

inline DeviceBuffer NewBuffer(Device& d, int64_t nbytes) {
  auto b = d.allocator().Allocate(nbytes);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return DeviceBuffer(b.ok() ? b.value() : nullptr);
}

template <typename T>
DeviceBuffer Upload(Device& d, const std::vector<T>& host) {
  DeviceBuffer b = NewBuffer(d, static_cast<int64_t>(host.size() * sizeof(T)));
  d.queue().Write(b.buffer, 0, host.data(), static_cast<int64_t>(host.size() * sizeof(T)), TaskContext("test_write"));
  return b;
}

template <typename T>
std::vector<T> Download(Device& d, const DeviceBuffer& b) {
  std::vector<T> out(static_cast<size_t>(b.buffer->nbytes()) / sizeof(T));
  Status st = d.queue().Read(b.buffer, 0, b.buffer->nbytes(), out.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

template <typename... B>
std::vector<Binding> Bindings(B&&... b) {
  std::vector<Binding> v;
  (v.push_back(std::forward<B>(b)), ...);
  return v;
}

// Queues `exe` over the bindings on `d` and waits for it; returns its status.
inline Status LaunchAndWait(Device& d, const ExecutablePtr& exe, std::vector<Binding> params,
                            std::vector<Binding> results, const char* op = "test_launch") {
  uint64_t seq = d.queue().Launch(exe, params.data(), params.size(), results.data(), results.size(), TaskContext(op),
                                  /*may_run_inline=*/false);
  return d.queue().WaitFor(seq);
}

}  // namespace tpu::pjrt::testing
