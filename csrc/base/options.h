// Option registry: every knob is declared once in options.def with a type, default and help.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace tpu {

// kPath: a string kept as given (kString values are lower-cased).
enum class OptionType { kBool, kInt, kString, kPath };

struct OptionInfo {
  std::string name;
  OptionType type;
  std::string default_value;
  std::string help;
  std::string env_var;  // TORCH_TPU_<NAME>
};

// Typed fast accessors. Values are parsed on set, so reads on the hot path are plain loads.
struct OptionValues {
#define TPU_OPTION(name, type, def, help) TPU_OPTION_FIELD_##type(name)
#define TPU_OPTION_FIELD_Bool(name) bool name = false;
#define TPU_OPTION_FIELD_Int(name) int64_t name = 0;
#define TPU_OPTION_FIELD_String(name) std::string name;
#define TPU_OPTION_FIELD_Path(name) std::string name;
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_FIELD_Bool
#undef TPU_OPTION_FIELD_Int
#undef TPU_OPTION_FIELD_String
#undef TPU_OPTION_FIELD_Path
};

class Options {
 public:
  static Options& Get();
  const OptionValues& values() const { return values_; }
  const std::vector<OptionInfo>& infos() const { return infos_; }
  // Sets by name from text ("1", "true", "strict", "1024"); validates the type.
  Status Set(const std::string& name, const std::string& value);
  StatusOr<std::string> GetString(const std::string& name) const;
  // Re-reads every TORCH_TPU_* variable (done once at startup).
  void LoadFromEnvironment();

 private:
  Options();
  Status SetLocked(const OptionInfo& info, const std::string& value);
  std::vector<OptionInfo> infos_;
  OptionValues values_;
  mutable std::mutex mu_;
};

inline const OptionValues& Flags() { return Options::Get().values(); }

}  // namespace tpu
