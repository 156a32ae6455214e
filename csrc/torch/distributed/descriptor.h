// Note [Collective descriptors]: before any rank touches another's data, every rank publishes
// what it is about to do -- the collective, its sizes, dtype, reduction and root, and the user's
// line -- and checks that all ranks agree. Ranks whose code diverged (MPMD programs, a rank that
// skipped a step) then all raise one clear error naming each side's collective and line, instead
// of exchanging mismatched bytes or hanging. The descriptor is plain bytes of a fixed size: it
// lives in the shared-memory segment and crosses hosts as a uint8 tensor.
#pragma once

#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "torch/distributed/reduce_kernels.h"

namespace tpu::dist {

enum class CollOp : uint8_t {
  kAllReduce, kBroadcast, kReduce, kAllGather, kGather, kScatter, kReduceScatter, kAllToAll, kBarrier, kSend, kRecv
};

struct CollDesc {
  uint64_t seq = 0;      // the collective's number in its process group (1, 2, ...); 0: send/recv
  int64_t bytes = 0;     // the size the ranks must agree on (each rank's contribution, in bytes)
  int64_t count = 0;     // ... in elements
  int32_t root = -1;     // broadcast/reduce/gather/scatter root, or -1
  uint8_t op = 0;        // CollOp
  uint8_t red = 0;       // RedOp, for reductions
  uint8_t dtype = 0;     // DType
  uint8_t valid = 1;     // 0: this rank's input holds no value (an earlier device op failed)
  char what[152] = {};   // how the user wrote it: "all_reduce(float32[4, 8], SUM)"
  char where[160] = {};  // the user's line, "train.py:42" (may be empty)
};

// Whether two ranks' descriptors describe the same collective (the user's lines may differ: MPMD
// code issues one collective from different places).
bool Agree(const CollDesc& a, const CollDesc& b);
// "collective #5, all_reduce(float32[1024], SUM) at train.py:42"
std::string Describe(const CollDesc& d);
void SetText(char* field, size_t size, const std::string& text);
template <size_t N>
void SetText(char (&field)[N], const std::string& text) {
  SetText(field, N, text);
}

// PyTorch's name of a dtype ("float32", "bfloat16", "int64", ...).
const char* TorchDTypeName(DType t);

}  // namespace tpu::dist
