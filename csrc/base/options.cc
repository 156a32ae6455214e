#include "base/options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace tpu {
namespace {

std::string Upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string DefaultText(bool v) { return v ? "1" : "0"; }
std::string DefaultText(int v) { return std::to_string(v); }
std::string DefaultText(const char* v) { return v; }

}  // namespace

Options::Options() {
#define TPU_OPTION(name, type, def, help) \
  infos_.push_back({#name, OptionType::k##type, DefaultText(def), help, "TORCH_TPU_" + Upper(#name)});
#include "base/options.def"
#undef TPU_OPTION
  for (const auto& info : infos_) (void)SetLocked(info, info.default_value);
  LoadFromEnvironment();
}

Options& Options::Get() {
  static Options* options = new Options();
  return *options;
}

void Options::LoadFromEnvironment() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& info : infos_) {
    if (const char* env = std::getenv(info.env_var.c_str())) {
      // A malformed variable keeps the default rather than breaking `import torch`.
      (void)SetLocked(info, env);
    }
  }
}

Status Options::Set(const std::string& name, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& info : infos_) {
    if (info.name == name) return SetLocked(info, value);
  }
  return InvalidArgument("unknown torch_tpu option '" + name + "'");
}

Status Options::SetLocked(const OptionInfo& info, const std::string& text) {
  bool b = false;
  int64_t i = 0;
  if (info.type == OptionType::kBool) {
    std::string t = Lower(text);
    if (t == "1" || t == "true" || t == "on" || t == "yes") b = true;
    else if (t == "0" || t == "false" || t == "off" || t == "no" || t.empty()) b = false;
    else return InvalidArgument("option '" + info.name + "' expects a boolean, got '" + text + "'");
  } else if (info.type == OptionType::kInt) {
    char* end = nullptr;
    errno = 0;
    i = std::strtoll(text.c_str(), &end, 10);
    // ERANGE: strtoll saturates out-of-range text to LLONG_MIN/MAX, which must not pass silently.
    if (text.empty() || *end != '\0' || errno == ERANGE)
      return InvalidArgument("option '" + info.name + "' expects an integer, got '" + text + "'");
  }
#define TPU_OPTION(opt, type, def, help) \
  if (info.name == #opt) { TPU_OPTION_SET_##type(opt) return Status::Ok(); }
#define TPU_OPTION_SET_Bool(name) values_.name = b;
#define TPU_OPTION_SET_Int(name) values_.name = i;
#define TPU_OPTION_SET_String(name) values_.name = Lower(text);
#define TPU_OPTION_SET_Path(name) values_.name = text;
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_SET_Bool
#undef TPU_OPTION_SET_Int
#undef TPU_OPTION_SET_String
#undef TPU_OPTION_SET_Path
  return Internal("option table out of sync for " + info.name);
}

StatusOr<std::string> Options::GetString(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
#define TPU_OPTION(name_, type, def, help) \
  if (name == #name_) return TPU_OPTION_GET_##type(name_);
#define TPU_OPTION_GET_Bool(n) std::string(values_.n ? "1" : "0")
#define TPU_OPTION_GET_Int(n) std::to_string(values_.n)
#define TPU_OPTION_GET_String(n) values_.n
#define TPU_OPTION_GET_Path(n) values_.n
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_GET_Bool
#undef TPU_OPTION_GET_Int
#undef TPU_OPTION_GET_String
#undef TPU_OPTION_GET_Path
  return InvalidArgument("unknown torch_tpu option '" + name + "'");
}

}  // namespace tpu
