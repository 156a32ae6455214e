#include "backends/backends.h"

#include "runtime/host/host_backend.h"

namespace tpu {

Backend& GetBackend() {
  static Backend* backend = host::MakeHostBackend().release();
  return *backend;
}

}  // namespace tpu
