// libFuzzer target: option values, the text a user writes into a TORCH_TPU_* variable or passes
// to torch_tpu.config.set. Input: the first byte picks the option, the rest is the value text.
// Checks, beyond "no crash, no sanitizer report": Canonical and Set agree; an accepted value
// reads back as its canonical text, which is accepted again unchanged and lies in the declared
// range or choices; a refused value is an InvalidArgument naming the option and changes nothing;
// the environment path gives the same verdict.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/options.h"

namespace {

void Require(bool ok, const char* what, const std::string& name, const std::string& text) {
  if (ok) return;
  std::fprintf(stderr, "options_fuzz: %s (option '%s', value '%s')\n", what, name.c_str(), text.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  if (size == 0) return 0;
  Options& o = Options::Get();
  const OptionInfo& info = o.infos()[data[0] % o.infos().size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string before = o.GetString(info.name).value();

  StatusOr<std::string> canonical = o.Canonical(info.name, text);
  Status set = o.Set(info.name, text);
  Require(canonical.ok() == set.ok(), "Canonical and Set disagree", info.name, text);
  if (set.ok()) {
    const std::string got = o.GetString(info.name).value();
    Require(got == canonical.value(), "value reads back other than its canonical text", info.name, text);
    StatusOr<std::string> again = o.Canonical(info.name, got);
    Require(again.ok() && again.value() == got, "canonical text is not a fixed point", info.name, text);
    if (info.type == OptionType::kInt) {
      int64_t v = std::strtoll(got.c_str(), nullptr, 10);
      Require(v >= info.min && v <= info.max, "accepted integer outside its range", info.name, text);
    }
  } else {
    Require(set.code() == Code::kInvalidArgument, "refusal is not InvalidArgument", info.name, text);
    Require(set.message().find("'" + info.name + "'") != std::string::npos,
            "refusal does not name the option", info.name, text);
    Require(o.GetString(info.name).value() == before, "a refused value changed the option", info.name, text);
  }

  // The environment path: a variable cannot hold a NUL byte, and an empty one is unset.
  if (!text.empty() && text.find('\0') == std::string::npos) {
    Require(setenv(info.env_var.c_str(), text.c_str(), 1) == 0, "setenv failed", info.name, text);
    Status env = o.LoadFromEnvironment();
    unsetenv(info.env_var.c_str());
    Require(env.ok() == set.ok(), "environment and Set disagree", info.name, text);
    if (!env.ok())
      Require(env.message().find(info.env_var + "='") != std::string::npos,
              "environment error does not name the variable", info.name, text);
  }
  Require(o.Set(info.name, info.default_value).ok(), "default refused", info.name, text);
  return 0;
}
