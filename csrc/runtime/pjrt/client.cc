#include "runtime/pjrt/client.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

namespace tpu::pjrt {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// What the helper thread of Client::Create hands back; shared, so an abandoned thread keeps it.
struct CreateState {
  std::unique_ptr<Api> api;
  std::vector<PJRT_NamedValue> values;
  std::vector<ClientOption> options;  // backs the names and strings of `values`
  PJRT_Client* client = nullptr;
  Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

void InitializeAndCreate(CreateState* s) {
  Status st = s->api->Initialize();
  PJRT_Client* client = nullptr;
  if (st.ok()) {
    auto args = TPU_PJRT_ARGS(PJRT_Client_Create_Args);
    args.create_options = s->values.data();
    args.num_options = s->values.size();
    st = s->api->ToStatus((*s->api)->PJRT_Client_Create(&args), "PJRT_Client_Create");
    client = args.client;
  }
  std::lock_guard<std::mutex> lock(s->mu);
  s->status = std::move(st);
  s->client = client;
  s->done = true;
  s->cv.notify_all();
}

}  // namespace

StatusOr<std::vector<ClientOption>> ParseClientOptions(const std::string& text) {
  std::vector<ClientOption> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgument("PJRT client option '" + item + "' is not of the form name=value");
    ClientOption o;
    o.name = Trim(item.substr(0, eq));
    std::string v = Trim(item.substr(eq + 1));
    char* e = nullptr;
    errno = 0;
    long long i = std::strtoll(v.c_str(), &e, 10);
    if (!v.empty() && *e == '\0' && errno == 0) {
      o.type = ClientOption::Type::kInt;
      o.int_value = i;
    } else if (v == "true" || v == "false") {
      o.type = ClientOption::Type::kBool;
      o.bool_value = v == "true";
    } else if (double d = std::strtod(v.c_str(), &e); !v.empty() && *e == '\0' && v.find('.') != std::string::npos) {
      o.type = ClientOption::Type::kFloat;
      o.float_value = d;
    } else {
      o.type = ClientOption::Type::kString;
      o.string_value = v;
    }
    out.push_back(std::move(o));
  }
  return out;
}

StatusOr<std::unique_ptr<Client>> Client::Create(std::unique_ptr<Api> api, const std::vector<ClientOption>& options,
                                                 double timeout_s) {
  auto state = std::make_shared<CreateState>();
  state->api = std::move(api);
  state->options = options;
  for (const ClientOption& o : state->options) {
    auto v = TPU_PJRT_ARGS(PJRT_NamedValue);
    v.name = o.name.c_str();
    v.name_size = o.name.size();
    v.value_size = 1;
    switch (o.type) {
      case ClientOption::Type::kInt: v.type = PJRT_NamedValue_kInt64; v.int64_value = o.int_value; break;
      case ClientOption::Type::kBool: v.type = PJRT_NamedValue_kBool; v.bool_value = o.bool_value; break;
      case ClientOption::Type::kFloat:
        v.type = PJRT_NamedValue_kFloat;
        v.float_value = static_cast<float>(o.float_value);
        break;
      case ClientOption::Type::kString:
        v.type = PJRT_NamedValue_kString;
        v.string_value = o.string_value.c_str();
        v.value_size = o.string_value.size();
        break;
    }
    state->values.push_back(v);
  }
  std::string path = state->api->path();
  std::thread worker([state] { InitializeAndCreate(state.get()); });
  {
    std::unique_lock<std::mutex> lock(state->mu);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    if (!state->cv.wait_until(lock, deadline, [&] { return state->done; })) {
      lock.unlock();
      // Abandoned: the thread may finish some day; the state (and the plugin) outlive it.
      worker.detach();
      return FailedPrecondition("the PJRT plugin " + path +
                                " did not finish initializing and creating a client within " +
                                std::to_string(static_cast<int>(timeout_s)) +
                                " s (option pjrt_init_timeout, TORCH_TPU_PJRT_INIT_TIMEOUT); it was abandoned");
    }
  }
  worker.join();
  if (!state->status.ok()) return Status(state->status.code(), path + ": " + state->status.message());
  std::unique_ptr<Client> c(new Client());
  c->api_ = std::move(state->api);
  c->client_ = state->client;
  TPU_RETURN_IF_ERROR(c->Describe());
  return c;
}

Status Client::Describe() {
  const PJRT_Api* a = api_->get();
  auto name = TPU_PJRT_ARGS(PJRT_Client_PlatformName_Args);
  name.client = client_;
  TPU_RETURN_IF_ERROR(api_->ToStatus(a->PJRT_Client_PlatformName(&name), "PJRT_Client_PlatformName"));
  platform_name_.assign(name.platform_name, name.platform_name_size);
  auto version = TPU_PJRT_ARGS(PJRT_Client_PlatformVersion_Args);
  version.client = client_;
  TPU_RETURN_IF_ERROR(api_->ToStatus(a->PJRT_Client_PlatformVersion(&version), "PJRT_Client_PlatformVersion"));
  platform_version_.assign(version.platform_version, version.platform_version_size);
  auto devs = TPU_PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
  devs.client = client_;
  TPU_RETURN_IF_ERROR(api_->ToStatus(a->PJRT_Client_AddressableDevices(&devs), "PJRT_Client_AddressableDevices"));
  for (size_t i = 0; i < devs.num_addressable_devices; ++i) {
    PJRT_Device* d = devs.addressable_devices[i];
    auto desc = TPU_PJRT_ARGS(PJRT_Device_GetDescription_Args);
    desc.device = d;
    TPU_RETURN_IF_ERROR(api_->ToStatus(a->PJRT_Device_GetDescription(&desc), "PJRT_Device_GetDescription"));
    auto kind = TPU_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args);
    kind.device_description = desc.device_description;
    TPU_RETURN_IF_ERROR(api_->ToStatus(a->PJRT_DeviceDescription_Kind(&kind), "PJRT_DeviceDescription_Kind"));
    auto id = TPU_PJRT_ARGS(PJRT_DeviceDescription_Id_Args);
    id.device_description = desc.device_description;
    TPU_RETURN_IF_ERROR(api_->ToStatus(a->PJRT_DeviceDescription_Id(&id), "PJRT_DeviceDescription_Id"));
    devices_.push_back(d);
    kinds_.emplace_back(kind.device_kind, kind.device_kind_size);
    ids_.push_back(id.id);
  }
  if (devices_.empty()) return FailedPrecondition("the PJRT plugin " + api_->path() + " has no addressable devices");
  return Status::Ok();
}

Client::~Client() {
  if (!client_) return;
  auto args = TPU_PJRT_ARGS(PJRT_Client_Destroy_Args);
  args.client = client_;
  (void)api_->ToStatus((*api_)->PJRT_Client_Destroy(&args), "PJRT_Client_Destroy");
}

StatusOr<DeviceMemory> Client::MemoryStats(int i) const {
  if (!TPU_PJRT_HAS(*api_, PJRT_Device_MemoryStats))
    return Unimplemented("the PJRT plugin has no PJRT_Device_MemoryStats");
  auto args = TPU_PJRT_ARGS(PJRT_Device_MemoryStats_Args);
  args.device = device(i);
  TPU_RETURN_IF_ERROR(api_->ToStatus((*api_)->PJRT_Device_MemoryStats(&args), "PJRT_Device_MemoryStats"));
  DeviceMemory m;
  m.bytes_in_use = args.bytes_in_use;
  if (args.bytes_limit_is_set) m.bytes_limit = args.bytes_limit;
  if (args.peak_bytes_in_use_is_set) m.peak_bytes_in_use = args.peak_bytes_in_use;
  return m;
}

}  // namespace tpu::pjrt
