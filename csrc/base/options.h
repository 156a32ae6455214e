// Option registry: every knob is declared once in options.def with a type, default, what it
// accepts and help. The environment (TORCH_TPU_*) and Options::Set are checked against the same
// declaration.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
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
// Note [Option snapshots]: Flags() is read on every op while config.set may rewrite an option
// from another thread. The values are never written in place: Set publishes a new immutable
// OptionValues with one atomic pointer store, and a reader sees either the old or the new
// snapshot, whole. Published snapshots are never freed (a reference from Flags() stays valid
// forever) and are interned -- a configuration seen before reuses its snapshot -- so their
// number is bounded by the distinct configurations a process sets (toggling a mode back and
// forth keeps two), not by the number of Set calls.
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
  bool operator==(const OptionValues& o) const;
};

class Options {
 public:
  static Options& Get();
  // The current snapshot; valid forever, never changed (see Note [Option snapshots]).
  const OptionValues& values() const { return *current_.load(std::memory_order_acquire); }
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
  // How many distinct snapshots have been published (tests: interning keeps this small).
  size_t snapshot_count() const;

 private:
  Options();
  const OptionInfo* Find(const std::string& name) const;
  // Parses `value` into `values` (a private copy); changes nothing on error.
  static Status Apply(const OptionInfo& info, const std::string& value, OptionValues* values);
  Status LoadFromEnvironmentLocked();
  void PublishLocked(const OptionValues& values);
  std::vector<OptionInfo> infos_;
  Status environment_status_;
  mutable std::mutex mu_;  // serializes writers; readers only load current_
  std::vector<std::unique_ptr<const OptionValues>> snapshots_;  // every one published
  std::atomic<const OptionValues*> current_{nullptr};
};

inline const OptionValues& Flags() { return Options::Get().values(); }

}  // namespace tpu
