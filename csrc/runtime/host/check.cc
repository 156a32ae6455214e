// The check op (Note [Check op] in ir/graph.h): x passes through once every element of ok holds.
#include <cstring>
#include <numeric>

#include "runtime/host/kernels.h"

namespace tpu::host {

Status RunCheck(const Op& op, const View& x, const View& ok, const View& out) {
  if (ok.dtype != DType::kBool) return Internal("check: the condition is not i1");
  const int64_t n = ok.NumElements();
  if (n > 0) {
    const char* flags = static_cast<const char*>(ok.data);
    std::vector<char> storage;
    if (!ok.IsContiguous()) {
      Dims identity(ok.dims.size());
      std::iota(identity.begin(), identity.end(), int64_t{0});
      flags = static_cast<const char*>(Materialize(ok, identity, DType::kBool, storage).data);
    }
    // memchr: the scan of a large mask runs at memory speed.
    if (std::memchr(flags, 0, static_cast<size_t>(n)) != nullptr)
      return InvalidArgument(CheckOpMessage(op));
  }
  return CopyView(x, out);
}

}  // namespace tpu::host
