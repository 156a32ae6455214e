#include "runtime/pjrt/api.h"

#include <dlfcn.h>

#include <utility>

namespace tpu::pjrt {
namespace {

Code FromPjrtCode(PJRT_Error_Code code) {
  switch (code) {
    case PJRT_Error_Code_OK: return Code::kOk;
    case PJRT_Error_Code_INVALID_ARGUMENT: return Code::kInvalidArgument;
    case PJRT_Error_Code_OUT_OF_RANGE: return Code::kOutOfRange;
    case PJRT_Error_Code_RESOURCE_EXHAUSTED: return Code::kResourceExhausted;
    case PJRT_Error_Code_UNIMPLEMENTED: return Code::kUnimplemented;
    case PJRT_Error_Code_CANCELLED: return Code::kCancelled;
    case PJRT_Error_Code_FAILED_PRECONDITION:
    case PJRT_Error_Code_NOT_FOUND:
    case PJRT_Error_Code_UNAVAILABLE:
    case PJRT_Error_Code_DEADLINE_EXCEEDED:
    case PJRT_Error_Code_PERMISSION_DENIED:
    case PJRT_Error_Code_UNAUTHENTICATED:
      return Code::kFailedPrecondition;
    case PJRT_Error_Code_UNKNOWN:
    case PJRT_Error_Code_ALREADY_EXISTS:
    case PJRT_Error_Code_ABORTED:
    case PJRT_Error_Code_INTERNAL:
    case PJRT_Error_Code_DATA_LOSS:
      return Code::kInternal;
  }
  return Code::kInternal;
}

// The functions every use of a plugin needs; all of them predate API 0.30, so a plugin without
// one is not a PJRT plugin we can drive.
#define TPU_PJRT_REQUIRED(X)                                                                    \
  X(PJRT_Error_Destroy) X(PJRT_Error_Message) X(PJRT_Error_GetCode) X(PJRT_Event_Destroy)        \
  X(PJRT_Event_Await) X(PJRT_Client_Create) X(PJRT_Client_Destroy) X(PJRT_Client_PlatformName)   \
  X(PJRT_Client_PlatformVersion) X(PJRT_Client_AddressableDevices) X(PJRT_Client_Compile)        \
  X(PJRT_Client_BufferFromHostBuffer) X(PJRT_Device_GetDescription)                             \
  X(PJRT_DeviceDescription_Kind) X(PJRT_DeviceDescription_Id) X(PJRT_LoadedExecutable_Destroy) \
  X(PJRT_LoadedExecutable_Execute) X(PJRT_Buffer_Destroy) X(PJRT_Buffer_ToHostBuffer)           \
  X(PJRT_Buffer_ElementType) X(PJRT_Buffer_Dimensions)

}  // namespace

std::string HeaderVersion() { return std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR); }

StatusOr<std::unique_ptr<Api>> Api::Load(const std::string& path, const PJRT_Api_Version* override_version) {
  if (path.empty()) return FailedPrecondition("no PJRT plugin path given");
  // RTLD_LOCAL: each plugin carries its own copy of XLA (and of LLVM, protobuf...), which must
  // not resolve against another's or libtorch's symbols.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    return FailedPrecondition("could not load the PJRT plugin " + path + ": " + (err ? err : "dlopen failed"));
  }
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(dlsym(handle, "GetPjrtApi"));
  if (!get_api) {
    dlclose(handle);
    return FailedPrecondition(path + " is not a PJRT plugin: it has no GetPjrtApi symbol");
  }
  const PJRT_Api* api = get_api();
  if (!api) return FailedPrecondition("the PJRT plugin " + path + " returned no API table from GetPjrtApi");
  std::unique_ptr<Api> out(new Api());
  out->handle_ = handle;
  out->api_ = api;
  out->path_ = path;
  const PJRT_Api_Version& v = override_version ? *override_version : api->pjrt_api_version;
  out->major_ = v.major_version;
  out->minor_ = v.minor_version;
  std::string which = "the PJRT plugin " + path + " implements PJRT C API " + out->version_string() +
                      "; torch_tpu was built with the API " + HeaderVersion() + " header";
  if (v.major_version != PJRT_API_MAJOR) return FailedPrecondition(which + ": the major versions differ");
  if (api->struct_size < offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version))
    return FailedPrecondition(which + ", but its API table is truncated");
#define TPU_PJRT_CHECK_FN(fn) \
  if (!TPU_PJRT_HAS(*out, fn)) return FailedPrecondition(which + ", but it lacks " #fn);
  TPU_PJRT_REQUIRED(TPU_PJRT_CHECK_FN)
#undef TPU_PJRT_CHECK_FN
  return out;
}

Api::~Api() = default;

std::string Api::version_string() const { return std::to_string(major_) + "." + std::to_string(minor_); }

Status Api::Initialize() const {
  if (!TPU_PJRT_HAS(*this, PJRT_Plugin_Initialize)) return Status::Ok();
  auto args = TPU_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
  return ToStatus(api_->PJRT_Plugin_Initialize(&args), "PJRT_Plugin_Initialize of " + path_);
}

std::vector<std::string> Api::Attributes() const {
  std::vector<std::string> out;
  if (!TPU_PJRT_HAS(*this, PJRT_Plugin_Attributes)) return out;
  auto args = TPU_PJRT_ARGS(PJRT_Plugin_Attributes_Args);
  if (!ToStatus(api_->PJRT_Plugin_Attributes(&args), "PJRT_Plugin_Attributes").ok()) return out;
  for (size_t i = 0; i < args.num_attributes; ++i) {
    const PJRT_NamedValue& v = args.attributes[i];
    std::string text(v.name, v.name_size);
    text += "=";
    switch (v.type) {
      case PJRT_NamedValue_kString: text.append(v.string_value, v.value_size); break;
      case PJRT_NamedValue_kInt64: text += std::to_string(v.int64_value); break;
      case PJRT_NamedValue_kInt64List:
        for (size_t j = 0; j < v.value_size; ++j) text += (j ? "." : "") + std::to_string(v.int64_array_value[j]);
        break;
      case PJRT_NamedValue_kFloat: text += std::to_string(v.float_value); break;
      case PJRT_NamedValue_kBool: text += v.bool_value ? "true" : "false"; break;
    }
    out.push_back(std::move(text));
  }
  return out;
}

Status Api::ToStatus(PJRT_Error* error, const std::string& what) const {
  if (!error) return Status::Ok();
  auto msg = TPU_PJRT_ARGS(PJRT_Error_Message_Args);
  msg.error = error;
  api_->PJRT_Error_Message(&msg);
  std::string text(msg.message ? msg.message : "", msg.message ? msg.message_size : 0);
  auto code = TPU_PJRT_ARGS(PJRT_Error_GetCode_Args);
  code.error = error;
  Code c = Code::kInternal;
  if (PJRT_Error* e = api_->PJRT_Error_GetCode(&code); e == nullptr) {
    c = FromPjrtCode(code.code);
  } else {
    auto destroy = TPU_PJRT_ARGS(PJRT_Error_Destroy_Args);
    destroy.error = e;
    api_->PJRT_Error_Destroy(&destroy);
  }
  auto destroy = TPU_PJRT_ARGS(PJRT_Error_Destroy_Args);
  destroy.error = error;
  api_->PJRT_Error_Destroy(&destroy);
  if (c == Code::kOk) c = Code::kInternal;  // an error object always means failure
  return Status(c, what + ": " + (text.empty() ? "(the plugin gave no message)" : text));
}

void Api::DestroyEvent(PJRT_Event* event) const {
  if (!event) return;
  auto args = TPU_PJRT_ARGS(PJRT_Event_Destroy_Args);
  args.event = event;
  (void)ToStatus(api_->PJRT_Event_Destroy(&args), "PJRT_Event_Destroy");
}

Status Api::AwaitAndDestroy(PJRT_Event* event, const std::string& what) const {
  if (!event) return Status::Ok();
  auto args = TPU_PJRT_ARGS(PJRT_Event_Await_Args);
  args.event = event;
  Status st = ToStatus(api_->PJRT_Event_Await(&args), what);
  DestroyEvent(event);
  return st;
}

}  // namespace tpu::pjrt
