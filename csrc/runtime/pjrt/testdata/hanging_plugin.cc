// A PJRT "plugin" whose PJRT_Plugin_Initialize never returns, as libtpu's blocks on a machine
// where it waits for a metadata server: the tests check that the backend gives up on it.
// Every other function of its table fails.
#include <unistd.h>

#include "pjrt_c_api.h"

namespace {

PJRT_Error* Fails(void*) { return reinterpret_cast<PJRT_Error*>(1); }
PJRT_Error* Hangs(PJRT_Plugin_Initialize_Args*) {
  for (;;) pause();
}

PJRT_Api MakeApi() {
  PJRT_Api api{};
  api.struct_size = PJRT_Api_STRUCT_SIZE;
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = PJRT_API_MAJOR;
  api.pjrt_api_version.minor_version = PJRT_API_MINOR;
  // Every entry of the table, as one failing function (they all take one args pointer).
  auto** fns = reinterpret_cast<void**>(&api.PJRT_Error_Destroy);
  auto** end = reinterpret_cast<void**>(reinterpret_cast<char*>(&api) + sizeof(api));
  for (void** f = fns; f < end; ++f) *f = reinterpret_cast<void*>(&Fails);
  api.PJRT_Plugin_Initialize = &Hangs;
  return api;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  static PJRT_Api api = MakeApi();
  return &api;
}
