#include "runtime/device.h"

#include "base/hash.h"

namespace tpu {

uint64_t CompileOptions::Hash() const {
  uint64_t h = HashMix(0x636f6d70696c6500ULL, donated.size());
  for (int d : donated) h = HashMix(h, static_cast<uint64_t>(d + 1));
  return h;
}

StatusOr<std::string> Backend::Serialize(const Executable&) const {
  return Unimplemented("the " + name() + " backend has no persistent executable format");
}

StatusOr<ExecutablePtr> Backend::Deserialize(const std::string&, const Graph&, const CompileOptions&) const {
  return Unimplemented("the " + name() + " backend has no persistent executable format");
}

}  // namespace tpu
