// Option registry: every knob is declared once in options.def with a type, default, what it
// accepts and help. The environment (TORCH_TPU_*) and Options::Set are checked against the same
// declaration.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace tpu {

enum class OptionType { kBool, kInt, kString };

struct OptionInfo {
  std::string name;
  OptionType type;
  std::string default_value;
  std::string help;
  std::string env_var;               // TORCH_TPU_<NAME>
  int64_t min = 0, max = 0;          // kInt: the accepted range, inclusive
  std::vector<std::string> choices;  // kString: the accepted values (lower case)
  // What the option accepts, as an error message says it: "an integer in [1, 64]".
  std::string Accepted() const;
};

// Typed fast accessors. Values are parsed on set, so reads on the hot path are plain loads.
struct OptionValues {
#define TPU_OPTION(name, type, def, lo, hi, choices, help) TPU_OPTION_FIELD_##type(name)
#define TPU_OPTION_FIELD_Bool(name) bool name = false;
#define TPU_OPTION_FIELD_Int(name) int64_t name = 0;
#define TPU_OPTION_FIELD_String(name) std::string name;
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_FIELD_Bool
#undef TPU_OPTION_FIELD_Int
#undef TPU_OPTION_FIELD_String
};

class Options {
 public:
  static Options& Get();
  const OptionValues& values() const { return values_; }
  const std::vector<OptionInfo>& infos() const { return infos_; }
  // Sets by name from text ("1", "true", "strict", "1024"); a value the option does not accept
  // is an InvalidArgument naming the option, the value and what it accepts, and changes nothing.
  Status Set(const std::string& name, const std::string& value);
  StatusOr<std::string> GetString(const std::string& name) const;
  // The value as GetString would print it once set ("TRUE" -> "1", "Debug" -> "debug"), or the
  // error Set would return; sets nothing.
  StatusOr<std::string> Canonical(const std::string& name, const std::string& value) const;
  // Re-reads every TORCH_TPU_* variable. Valid values are applied; every invalid one is named
  // in the returned error (and its option keeps its value). An empty variable counts as unset.
  Status LoadFromEnvironment();
  // The result of reading the environment when the registry was created (at first use): the
  // extension raises it when torch_tpu is imported instead of running with defaults.
  const Status& environment_status() const { return environment_status_; }

 private:
  Options();
  const OptionInfo* Find(const std::string& name) const;
  Status SetLocked(const OptionInfo& info, const std::string& value);
  std::vector<OptionInfo> infos_;
  OptionValues values_;
  Status environment_status_;
  mutable std::mutex mu_;
};

inline const OptionValues& Flags() { return Options::Get().values(); }

}  // namespace tpu
