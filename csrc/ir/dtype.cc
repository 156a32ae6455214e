#include "ir/dtype.h"

namespace tpu {
namespace {
struct DTypeInfo {
  const char* name;
  int size;
  bool is_float;
  bool is_signed;
};
constexpr DTypeInfo kInfos[] = {
#define TPU_DTYPE_INFO(e, n, b, f, s) {n, b, f, s},
    TPU_DTYPES(TPU_DTYPE_INFO)
#undef TPU_DTYPE_INFO
};
}  // namespace

const char* DTypeName(DType t) { return kInfos[static_cast<int>(t)].name; }
int DTypeSize(DType t) { return kInfos[static_cast<int>(t)].size; }
bool IsFloat(DType t) { return kInfos[static_cast<int>(t)].is_float; }
bool IsSignedInt(DType t) { return kInfos[static_cast<int>(t)].is_signed; }

}  // namespace tpu
