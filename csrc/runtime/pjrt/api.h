// A loaded PJRT plugin: dlopen + GetPjrtApi (no link-time dependency on XLA), the API version
// check, PJRT_Plugin_Initialize, and the conversion of PJRT errors to Status.
//
// Note [PJRT struct sizes]: every argument struct we pass carries the struct_size of the header we
// were built with (pjrt_c_api.h from the installed package, see README "PJRT backend"). A plugin
// built from a newer header accepts those smaller structs (fields it knows beyond our size take
// their defaults); a plugin of an older minor version has a shorter function table, so a function
// appended after its version is absent -- Api::Has() tells, and callers check before using one.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "pjrt_c_api.h"

namespace tpu::pjrt {

// A zeroed argument struct with our header's struct_size (Note [PJRT struct sizes]).
#define TPU_PJRT_ARGS(type) ::tpu::pjrt::ZeroedArgs<type>(type##_STRUCT_SIZE)
template <typename T>
T ZeroedArgs(size_t struct_size) {
  T args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = struct_size;
  return args;
}

// Whether the plugin's function table reaches the field `fn` of PJRT_Api.
#define TPU_PJRT_HAS(api, fn) \
  ((api).Has(offsetof(PJRT_Api, fn) + sizeof(static_cast<PJRT_Api*>(nullptr)->fn)) && (api)->fn != nullptr)

class Api {
 public:
  // Loads the plugin at `path` and checks its API version against our header's. Loading does not
  // initialize it (Initialize does). `override_version` is for tests only: it replaces the
  // version the plugin reports, to exercise the mismatch checks.
  static StatusOr<std::unique_ptr<Api>> Load(const std::string& path,
                                             const PJRT_Api_Version* override_version = nullptr);
  ~Api();  // the library stays loaded: plugins do not support being unloaded
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  const PJRT_Api* operator->() const { return api_; }
  const PJRT_Api* get() const { return api_; }
  const std::string& path() const { return path_; }
  int major_version() const { return major_; }
  int minor_version() const { return minor_; }
  // "0.115"
  std::string version_string() const;
  // Whether the plugin's PJRT_Api struct is at least `end` bytes long.
  bool Has(size_t end) const { return api_->struct_size >= end; }

  // PJRT_Plugin_Initialize (where the plugin has it). May block (libtpu querying a metadata
  // server): callers run it under a watchdog (client.h).
  Status Initialize() const;

  // PJRT_Plugin_Attributes as "name=value" texts ("xla_version=...", "stablehlo_current_version=1.13.2");
  // empty where the plugin has none.
  std::vector<std::string> Attributes() const;

  // Converts `error` (destroying it) to a Status whose message is `what` + the plugin's message;
  // Ok for null.
  Status ToStatus(PJRT_Error* error, const std::string& what) const;
  // Waits for `event`, destroys it, and returns its error (Ok for null).
  Status AwaitAndDestroy(PJRT_Event* event, const std::string& what) const;
  void DestroyEvent(PJRT_Event* event) const;

 private:
  Api() = default;
  void* handle_ = nullptr;
  const PJRT_Api* api_ = nullptr;
  std::string path_;
  int major_ = 0, minor_ = 0;
};

// Our header's API version ("0.81").
std::string HeaderVersion();

}  // namespace tpu::pjrt
