// Option registry: every knob is declared once in options.def with a type, default, what it
// accepts and help. The environment (TORCH_TPU_*) and Options::Set are checked against the same
// declaration.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <string>
#include <vector>

#include "base/status.h"

namespace tpu {

// kString: one of declared choices (lower case); kPath: free text kept as given (a file or list
// of files), read rarely (GetString) and so kept out of the hot snapshots.
enum class OptionType { kBool, kInt, kString, kPath };

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

// A scalar option's field: read from any thread without a lock (a relaxed atomic load, a plain
// load on x86), written only by the registry.
template <typename T>
class OptionScalar {
 public:
  OptionScalar() = default;
  OptionScalar(const OptionScalar& o) : v_(o.get()) {}
  OptionScalar& operator=(const OptionScalar& o) {
    set(o.get());
    return *this;
  }
  operator T() const { return get(); }  // NOLINT: reads like the plain field it replaces
  T get() const { return v_.load(std::memory_order_relaxed); }
  void set(T v) { v_.store(v, std::memory_order_relaxed); }

 private:
  std::atomic<T> v_{};
};

// Typed fast accessors. Values are parsed on set, so reads on the hot path are plain loads.
// Note [Option snapshots]: Flags() is read on every op while config.set may change an option
// from another thread, so nothing a reader can see is rewritten in place:
//   - text options live in immutable snapshots, one per combination of their values. Setting one
//     publishes the snapshot of the new combination with one atomic pointer store; a reader
//     keeps whichever it loaded, whole. Snapshots are never freed (a reference from Flags()
//     stays valid) and are interned: every text option declares its choices, so there are at
//     most the product of the choice counts (36 today), however often options change;
//   - scalar options (integers, booleans) are atomics, stored into every snapshot on Set, so the
//     one a reader holds shows the current value.
// A change of several options at once (the environment) is not seen atomically across fields.
struct OptionValues {
#define TPU_OPTION(name, type, def, lo, hi, choices, help) TPU_OPTION_FIELD_##type(name)
#define TPU_OPTION_FIELD_Bool(name) OptionScalar<bool> name;
#define TPU_OPTION_FIELD_Int(name) OptionScalar<int64_t> name;
#define TPU_OPTION_FIELD_String(name) std::string name;
#define TPU_OPTION_FIELD_Path(name)
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_FIELD_Bool
#undef TPU_OPTION_FIELD_Int
#undef TPU_OPTION_FIELD_String
#undef TPU_OPTION_FIELD_Path
  // Whether every text option has the same value in both.
  bool SameText(const OptionValues& o) const;
};

class Options {
 public:
  static Options& Get();
  // The current snapshot; valid forever (see Note [Option snapshots]).
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
  // How many snapshots exist (tests: at most one per combination of text values).
  size_t snapshot_count() const;

 private:
  Options();
  const OptionInfo* Find(const std::string& name) const;
  // Parses `value` into `values` (a private copy); changes nothing on error.
  static Status Apply(const OptionInfo& info, const std::string& value, OptionValues* values);
  Status LoadFromEnvironmentLocked();
  void SetPathLocked(const std::string& name, const std::string& value);
  void PublishLocked(const OptionValues& values);
  std::vector<OptionInfo> infos_;
  Status environment_status_;
  mutable std::mutex mu_;  // serializes writers; readers only load current_
  std::vector<std::unique_ptr<OptionValues>> snapshots_;  // every one published
  std::vector<std::pair<std::string, std::string>> paths_;  // kPath options' values (under mu_)
  std::atomic<const OptionValues*> current_{nullptr};
};

inline const OptionValues& Flags() { return Options::Get().values(); }
// A kPath option's value (not in Flags(): read rarely, under the registry's lock).
inline std::string PathOption(const std::string& name) {
  auto v = Options::Get().GetString(name);
  return v.ok() ? v.value() : std::string();
}

}  // namespace tpu
