#include "torch/distributed/descriptor.h"

#include <cstring>

namespace tpu::dist {

bool Agree(const CollDesc& a, const CollDesc& b) {
  return a.seq == b.seq && a.op == b.op && a.bytes == b.bytes && a.count == b.count && a.root == b.root &&
         a.red == b.red && a.dtype == b.dtype;
}

std::string Describe(const CollDesc& d) {
  // Point-to-point messages are not numbered among the group's collectives.
  std::string what(d.what, strnlen(d.what, sizeof(d.what)));
  std::string s = d.seq ? "collective #" + std::to_string(d.seq) + ", " + what : what;
  size_t n = strnlen(d.where, sizeof(d.where));
  if (n) s += " at " + std::string(d.where, n);
  return s;
}

void SetText(char* field, size_t size, const std::string& text) {
  size_t n = std::min(text.size(), size - 1);
  std::memcpy(field, text.data(), n);
  std::memset(field + n, 0, size - n);
}

const char* TorchDTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI64: return "int64";
    case DType::kI32: return "int32";
    case DType::kI16: return "int16";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
    case DType::kU32: return "uint32";
    case DType::kU64: return "uint64";
    case DType::kBool: return "bool";
  }
  return "?";
}

}  // namespace tpu::dist
