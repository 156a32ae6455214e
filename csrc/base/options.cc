#include "base/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <type_traits>

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

template <typename T>
std::string DefaultText(T v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "1" : "0";
  else if constexpr (std::is_integral_v<T>) return std::to_string(v);
  else return std::string(v);
}

std::vector<std::string> SplitChoices(const char* text) {
  std::vector<std::string> out;
  std::string s(text);
  for (size_t start = 0; !s.empty() && start <= s.size();) {
    size_t bar = s.find('|', start);
    if (bar == std::string::npos) bar = s.size();
    out.push_back(s.substr(start, bar - start));
    start = bar + 1;
  }
  return out;
}

OptionInfo MakeInfo(const char* name, OptionType type, std::string def, int64_t lo, int64_t hi,
                    const char* choices, const char* help) {
  OptionInfo info;
  info.name = name;
  info.type = type;
  info.default_value = std::move(def);
  info.help = help;
  info.env_var = "TORCH_TPU_" + Upper(name);
  info.min = lo;
  info.max = hi;
  info.choices = SplitChoices(choices);
  return info;
}

// A parsed value of any option type.
struct Parsed {
  bool b = false;
  int64_t i = 0;
  std::string s;
};

// The whole text as a decimal integer (optional '-'; no spaces, signs elsewhere or exponents).
bool ParseInt(const std::string& text, int64_t* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

Status Parse(const OptionInfo& info, const std::string& text, Parsed* p) {
  auto bad = [&] {
    return InvalidArgument("option '" + info.name + "' expects " + info.Accepted() + ", got '" +
                           text + "'");
  };
  switch (info.type) {
    case OptionType::kBool: {
      std::string t = Lower(text);
      if (t == "1" || t == "true" || t == "on" || t == "yes") p->b = true;
      else if (t == "0" || t == "false" || t == "off" || t == "no" || t.empty()) p->b = false;
      else return bad();
      return Status::Ok();
    }
    case OptionType::kInt:
      if (!ParseInt(text, &p->i) || p->i < info.min || p->i > info.max) return bad();
      return Status::Ok();
    case OptionType::kString:
      p->s = Lower(text);
      if (std::find(info.choices.begin(), info.choices.end(), p->s) == info.choices.end())
        return bad();
      return Status::Ok();
    case OptionType::kPath:
      p->s = text;
      return Status::Ok();
  }
  return Internal("option '" + info.name + "' has an unknown type");
}

}  // namespace

std::string OptionInfo::Accepted() const {
  switch (type) {
    case OptionType::kBool:
      return "a boolean (1/0, true/false, on/off, yes/no)";
    case OptionType::kInt:
      return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    case OptionType::kString: {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "'" : ", '") + c + "'";
      return "one of " + list;
    }
    case OptionType::kPath:
      return "a path (any text)";
  }
  return "";
}

bool OptionValues::SameText(const OptionValues& o) const {
  return true
#define TPU_OPTION(name, type, def, lo, hi, choices, help) TPU_OPTION_SAME_##type(name)
#define TPU_OPTION_SAME_Bool(name)
#define TPU_OPTION_SAME_Int(name)
#define TPU_OPTION_SAME_Path(name)
#define TPU_OPTION_SAME_String(name) &&name == o.name
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_SAME_Bool
#undef TPU_OPTION_SAME_Int
#undef TPU_OPTION_SAME_String
#undef TPU_OPTION_SAME_Path
      ;
}

Options::Options() {
#define TPU_OPTION(name, type, def, lo, hi, choices, help) \
  infos_.push_back(MakeInfo(#name, OptionType::k##type, DefaultText(def), lo, hi, choices, help));
#include "base/options.def"
#undef TPU_OPTION
  for (const auto& info : infos_) {
    if (info.type == OptionType::kString && info.choices.empty()) {
      // Free text would make the snapshots unbounded (Note [Option snapshots]).
      std::fprintf(stderr, "torch_tpu: option '%s' declares no choices\n", info.name.c_str());
      std::abort();
    }
  }
  OptionValues defaults;
  for (const auto& info : infos_) {
    if (info.type == OptionType::kPath) paths_.emplace_back(info.name, info.default_value);
    else (void)Apply(info, info.default_value, &defaults);
  }
  std::lock_guard<std::mutex> lock(mu_);
  PublishLocked(defaults);
  environment_status_ = LoadFromEnvironmentLocked();
}

Options& Options::Get() {
  static Options* options = new Options();
  return *options;
}

void Options::PublishLocked(const OptionValues& values) {
  OptionValues* target = nullptr;
  for (const auto& s : snapshots_) {
    // Scalars are shared by every snapshot: whichever one a reader holds sees the new value.
#define TPU_OPTION(name, type, def, lo, hi, choices, help) TPU_OPTION_STORE_##type(name)
#define TPU_OPTION_STORE_Bool(name) s->name = values.name;
#define TPU_OPTION_STORE_Int(name) s->name = values.name;
#define TPU_OPTION_STORE_Path(name)
#define TPU_OPTION_STORE_String(name)
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_STORE_Bool
#undef TPU_OPTION_STORE_Int
#undef TPU_OPTION_STORE_String
#undef TPU_OPTION_STORE_Path
    if (s->SameText(values)) target = s.get();
  }
  if (target == nullptr) {
    snapshots_.push_back(std::make_unique<OptionValues>(values));
    target = snapshots_.back().get();
  }
  current_.store(target, std::memory_order_release);
}

size_t Options::snapshot_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshots_.size();
}

Status Options::LoadFromEnvironment() {
  std::lock_guard<std::mutex> lock(mu_);
  return LoadFromEnvironmentLocked();
}

Status Options::LoadFromEnvironmentLocked() {
  OptionValues next = values();
  std::string errors;
  for (const auto& info : infos_) {
    const char* env = std::getenv(info.env_var.c_str());
    if (env == nullptr || *env == '\0') continue;
    if (info.type == OptionType::kPath) {
      SetPathLocked(info.name, env);
      continue;
    }
    Status s = Apply(info, env, &next);
    if (!s.ok()) {
      errors += (errors.empty() ? "" : "; ") + info.env_var + "='" + env + "' is invalid: " +
                s.message();
    }
  }
  PublishLocked(next);
  if (errors.empty()) return Status::Ok();
  return InvalidArgument("torch_tpu: invalid environment: " + errors + " (fix or unset it)");
}

const OptionInfo* Options::Find(const std::string& name) const {
  for (const auto& info : infos_)
    if (info.name == name) return &info;
  return nullptr;
}

Status Options::Set(const std::string& name, const std::string& value) {
  const OptionInfo* info = Find(name);
  if (info == nullptr) return InvalidArgument("unknown torch_tpu option '" + name + "'");
  std::lock_guard<std::mutex> lock(mu_);
  if (info->type == OptionType::kPath) {
    SetPathLocked(name, value);
    return Status::Ok();
  }
  OptionValues next = values();
  TPU_RETURN_IF_ERROR(Apply(*info, value, &next));
  PublishLocked(next);
  return Status::Ok();
}

void Options::SetPathLocked(const std::string& name, const std::string& value) {
  for (auto& [n, v] : paths_)
    if (n == name) v = value;
}

StatusOr<std::string> Options::Canonical(const std::string& name, const std::string& value) const {
  const OptionInfo* info = Find(name);
  if (info == nullptr) return InvalidArgument("unknown torch_tpu option '" + name + "'");
  Parsed p;
  TPU_RETURN_IF_ERROR(Parse(*info, value, &p));
  switch (info->type) {
    case OptionType::kBool: return std::string(p.b ? "1" : "0");
    case OptionType::kInt: return std::to_string(p.i);
    case OptionType::kString:
    case OptionType::kPath:
      return p.s;
  }
  return Internal("option '" + name + "' has an unknown type");
}

Status Options::Apply(const OptionInfo& info, const std::string& text, OptionValues* values) {
  Parsed p;
  TPU_RETURN_IF_ERROR(Parse(info, text, &p));
#define TPU_OPTION(opt, type, def, lo, hi, choices, help) \
  if (info.name == #opt) { TPU_OPTION_SET_##type(opt) return Status::Ok(); }
#define TPU_OPTION_SET_Bool(name) values->name.set(p.b);
#define TPU_OPTION_SET_Int(name) values->name.set(p.i);
#define TPU_OPTION_SET_String(name) values->name = p.s;
#define TPU_OPTION_SET_Path(name)  // kept in paths_ (Set)
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_SET_Bool
#undef TPU_OPTION_SET_Int
#undef TPU_OPTION_SET_String
#undef TPU_OPTION_SET_Path
  return Internal("option table out of sync for " + info.name);
}

StatusOr<std::string> Options::GetString(const std::string& name) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [n, v] : paths_)
      if (n == name) return v;
  }
  const OptionValues& v = values();
#define TPU_OPTION(name_, type, def, lo, hi, choices, help) \
  if (name == #name_) return TPU_OPTION_GET_##type(name_);
#define TPU_OPTION_GET_Bool(n) std::string(v.n.get() ? "1" : "0")
#define TPU_OPTION_GET_Int(n) std::to_string(v.n.get())
#define TPU_OPTION_GET_String(n) v.n
#define TPU_OPTION_GET_Path(n) std::string()  // (found in paths_ above)
#include "base/options.def"
#undef TPU_OPTION
#undef TPU_OPTION_GET_Bool
#undef TPU_OPTION_GET_Int
#undef TPU_OPTION_GET_String
#undef TPU_OPTION_GET_Path
  return InvalidArgument("unknown torch_tpu option '" + name + "'");
}

}  // namespace tpu
