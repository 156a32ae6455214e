#include "base/status.h"

namespace tpu {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kOutOfRange: return "OUT_OF_RANGE";
    case Code::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case Code::kUnimplemented: return "UNIMPLEMENTED";
    case Code::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Code::kCancelled: return "CANCELLED";
    case Code::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace tpu
