#include "base/options.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tpu {
namespace {

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string Upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Restores every option to its default after each test: the registry is process-wide.
class OptionsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const auto& info : Options::Get().infos())
      ASSERT_TRUE(Options::Get().Set(info.name, info.default_value).ok()) << info.name;
  }
};

TEST_F(OptionsTest, RegistryListsEveryOptionOnce) {
  std::set<std::string> names;
  for (const auto& info : Options::Get().infos()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate " << info.name;
    EXPECT_FALSE(info.help.empty()) << info.name;
  }
  for (const char* n : {"eager_mode", "check_nan", "fallback", "chip", "memory_capacity",
                        "num_devices", "num_threads", "cache_size"})
    EXPECT_EQ(names.count(n), 1u) << n;
  for (const auto& info : Options::Get().infos()) {
    if (info.name == "cache_size") {
      EXPECT_EQ(info.type, OptionType::kInt);
      EXPECT_EQ(info.default_value, "4096");
      EXPECT_EQ(info.env_var, "TORCH_TPU_CACHE_SIZE");
    }
    if (info.name == "check_nan") {
      EXPECT_EQ(info.type, OptionType::kBool);
      EXPECT_EQ(info.default_value, "0");
      EXPECT_EQ(info.env_var, "TORCH_TPU_CHECK_NAN");
    }
    if (info.name == "eager_mode") {
      EXPECT_EQ(info.type, OptionType::kString);
      EXPECT_EQ(info.default_value, "strict");
    }
  }
}

TEST_F(OptionsTest, DefaultsAreLoaded) {
  Options& o = Options::Get();
  EXPECT_EQ(o.GetString("eager_mode").value(), "strict");
  EXPECT_EQ(o.GetString("cache_size").value(), "4096");
  EXPECT_EQ(o.GetString("check_nan").value(), "0");
  EXPECT_EQ(Flags().cache_size, 4096);
  EXPECT_FALSE(Flags().check_nan);
  EXPECT_EQ(Flags().chip, "v6e");
}

TEST_F(OptionsTest, SetAndGetByName) {
  Options& o = Options::Get();
  for (const char* t : {"1", "true", "TRUE", "on", "yes"}) {
    ASSERT_TRUE(o.Set("check_nan", "0").ok());
    ASSERT_TRUE(o.Set("check_nan", t).ok()) << t;
    EXPECT_TRUE(Flags().check_nan) << t;
    EXPECT_EQ(o.GetString("check_nan").value(), "1");
  }
  for (const char* f : {"0", "false", "Off", "no", ""}) {
    ASSERT_TRUE(o.Set("check_nan", "1").ok());
    ASSERT_TRUE(o.Set("check_nan", f).ok()) << f;
    EXPECT_FALSE(Flags().check_nan) << f;
  }
  ASSERT_TRUE(o.Set("cache_size", "17").ok());
  EXPECT_EQ(Flags().cache_size, 17);
  EXPECT_EQ(o.GetString("cache_size").value(), "17");
  ASSERT_TRUE(o.Set("memory_capacity", "1073741824").ok());
  EXPECT_EQ(Flags().memory_capacity, int64_t{1} << 30);
  ASSERT_TRUE(o.Set("eager_mode", "Debug").ok());
  EXPECT_EQ(Flags().eager_mode, "debug");
  EXPECT_EQ(o.GetString("eager_mode").value(), "debug");
}

TEST_F(OptionsTest, BadValuesAreRejectedAndKeepTheOldValue) {
  Options& o = Options::Get();
  ASSERT_TRUE(o.Set("cache_size", "12").ok());
  for (const char* bad : {"12x", "", "1.5", "ten", "99999999999999999999", "-99999999999999999999"}) {
    Status s = o.Set("cache_size", bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << bad << "' accepted";
    EXPECT_NE(s.message().find("cache_size"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("integer"), std::string::npos) << s.message();
    EXPECT_EQ(Flags().cache_size, 12);
  }
  ASSERT_TRUE(o.Set("check_nan", "1").ok());
  Status s = o.Set("check_nan", "maybe");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("boolean"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'maybe'"), std::string::npos) << s.message();
  EXPECT_TRUE(Flags().check_nan);
}

TEST_F(OptionsTest, UnknownNamesAreRejected) {
  Status s = Options::Get().Set("no_such_option", "1");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'no_such_option'"), std::string::npos) << s.message();
  StatusOr<std::string> g = Options::Get().GetString("no_such_option");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Code::kInvalidArgument);
}

TEST_F(OptionsTest, LoadFromEnvironment) {
  ASSERT_EQ(setenv("TORCH_TPU_CACHE_SIZE", "77", 1), 0);
  ASSERT_EQ(setenv("TORCH_TPU_CHECK_NAN", "yes", 1), 0);
  EXPECT_TRUE(Options::Get().LoadFromEnvironment().ok());
  EXPECT_EQ(Flags().cache_size, 77);
  EXPECT_TRUE(Flags().check_nan);
  // An empty variable is unset.
  ASSERT_EQ(setenv("TORCH_TPU_CACHE_SIZE", "", 1), 0);
  EXPECT_TRUE(Options::Get().LoadFromEnvironment().ok());
  EXPECT_EQ(Flags().cache_size, 77);
  unsetenv("TORCH_TPU_CACHE_SIZE");
  unsetenv("TORCH_TPU_CHECK_NAN");
}

// A malformed or out-of-range variable is an error naming the variable, the option, the value and
// what is accepted -- never silently the default (2e9 bytes once read as 20 GB, 'debg' as strict).
TEST_F(OptionsTest, BadEnvironmentValuesAreErrors) {
  struct Case {
    const char* var;
    const char* value;
    const char* accepted;
  };
  const Case cases[] = {
      {"TORCH_TPU_MEMORY_CAPACITY", "2e9", "an integer in [0, "},
      {"TORCH_TPU_MEMORY_CAPACITY", "-1", "an integer in [0, "},
      {"TORCH_TPU_EAGER_MODE", "debg", "one of 'strict', 'debug', 'fused'"},
      {"TORCH_TPU_NUM_DEVICES", "100000", "an integer in [1, 64]"},
      {"TORCH_TPU_NUM_DEVICES", "0", "an integer in [1, 64]"},
      {"TORCH_TPU_NUM_THREADS", "100000", "an integer in [0, 1024]"},
      {"TORCH_TPU_CACHE_SIZE", " 12", "an integer in [1, "},
      {"TORCH_TPU_CACHE_SIZE", "12 ", "an integer in [1, "},
      {"TORCH_TPU_CACHE_SIZE", "+12", "an integer in [1, "},
      {"TORCH_TPU_CHECK_NAN", "maybe", "a boolean"},
      {"TORCH_TPU_CHIP", "v9", "one of 'v5e', 'v5p', 'v6e', 'v7'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.var) + "=" + c.value);
    OptionValues before = Flags();
    ASSERT_EQ(setenv(c.var, c.value, 1), 0);
    Status s = Options::Get().LoadFromEnvironment();
    unsetenv(c.var);
    ASSERT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find(std::string(c.var) + "='" + c.value + "'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.accepted), std::string::npos) << s.message();
    std::string option = Lower(std::string(c.var).substr(10));
    EXPECT_NE(s.message().find("'" + option + "'"), std::string::npos) << s.message();
    EXPECT_EQ(Flags().memory_capacity, before.memory_capacity);
    EXPECT_EQ(Flags().eager_mode, before.eager_mode);
    EXPECT_EQ(Flags().num_devices, before.num_devices);
    EXPECT_EQ(Flags().cache_size, before.cache_size);
  }
  // Every bad variable is named, and the good ones still apply.
  ASSERT_EQ(setenv("TORCH_TPU_CHIP", "v9", 1), 0);
  ASSERT_EQ(setenv("TORCH_TPU_FALLBACK", "loud", 1), 0);
  ASSERT_EQ(setenv("TORCH_TPU_CACHE_SIZE", "99", 1), 0);
  Status s = Options::Get().LoadFromEnvironment();
  unsetenv("TORCH_TPU_CHIP");
  unsetenv("TORCH_TPU_FALLBACK");
  unsetenv("TORCH_TPU_CACHE_SIZE");
  EXPECT_NE(s.message().find("TORCH_TPU_CHIP='v9'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("TORCH_TPU_FALLBACK='loud'"), std::string::npos) << s.message();
  EXPECT_EQ(Flags().cache_size, 99);
}

// Set (config.set) and the environment share one declaration: ranges and choices hold for both.
TEST_F(OptionsTest, RangesAndChoicesAreDeclaredAndEnforcedBySet) {
  Options& o = Options::Get();
  for (const auto& info : o.infos()) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(o.Set(info.name, info.default_value).ok()) << "default not accepted";
    if (info.type == OptionType::kInt) {
      EXPECT_LE(info.min, info.max);
      EXPECT_TRUE(o.Set(info.name, std::to_string(info.min)).ok());
      EXPECT_TRUE(o.Set(info.name, std::to_string(info.max)).ok());
      Status lo = o.Set(info.name, std::to_string(info.min - 1));
      Status hi = o.Set(info.name, std::to_string(info.max + 1));
      EXPECT_EQ(lo.code(), Code::kInvalidArgument);
      EXPECT_EQ(hi.code(), Code::kInvalidArgument);
      EXPECT_NE(hi.message().find(info.Accepted()), std::string::npos) << hi.message();
      EXPECT_EQ(o.GetString(info.name).value(), std::to_string(info.max));
    }
    if (info.type == OptionType::kString) {
      EXPECT_FALSE(info.choices.empty());
      for (const auto& c : info.choices) EXPECT_TRUE(o.Set(info.name, Upper(c)).ok()) << c;
      EXPECT_EQ(o.Set(info.name, "no-such-choice").code(), Code::kInvalidArgument);
    }
  }
  EXPECT_TRUE(o.Set("eager_mode", "fused").ok());
}

TEST_F(OptionsTest, CanonicalChecksWithoutSetting) {
  Options& o = Options::Get();
  EXPECT_EQ(o.Canonical("check_nan", "TRUE").value(), "1");
  EXPECT_EQ(o.Canonical("eager_mode", "Debug").value(), "debug");
  EXPECT_EQ(o.Canonical("cache_size", "007").value(), "7");
  EXPECT_EQ(Flags().eager_mode, "strict");
  EXPECT_EQ(Flags().cache_size, 4096);
  auto bad = o.Canonical("num_devices", "100000");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("an integer in [1, 64]"), std::string::npos);
  EXPECT_FALSE(o.Canonical("no_such_option", "1").ok());
}
}  // namespace
}  // namespace tpu

namespace tpu {
namespace {

// config.set on one thread while others read Flags() as every op does: a reader only ever sees
// values that were set, and (under TSan, scripts/sanitize.sh) nothing races.
TEST_F(OptionsTest, SetRacesWithFlagsReads) {
  Options& o = Options::Get();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const OptionValues& f = Flags();
        std::string fallback = f.fallback, chip = f.chip;
        int64_t cache = f.cache_size;
        EXPECT_TRUE(fallback == "warn" || fallback == "silent" || fallback == "error") << fallback;
        EXPECT_TRUE(chip == "v5e" || chip == "v6e") << chip;
        EXPECT_TRUE(cache == 11 || cache == 22 || cache == 4096) << cache;
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  const char* fallbacks[] = {"warn", "silent", "error"};
  for (int i = 0; i < 3000; ++i) {
    EXPECT_TRUE(o.Set("fallback", fallbacks[i % 3]).ok());
    // Text and integer options changed together, through the environment path.
    setenv("TORCH_TPU_CHIP", i % 2 ? "v5e" : "v6e", 1);
    setenv("TORCH_TPU_CACHE_SIZE", i % 2 ? "11" : "22", 1);
    EXPECT_TRUE(o.LoadFromEnvironment().ok());
  }
  unsetenv("TORCH_TPU_CHIP");
  unsetenv("TORCH_TPU_CACHE_SIZE");
  int64_t seen = reads.load();
  while (reads.load() < seen + 100) std::this_thread::yield();
  stop.store(true);
  for (auto& t : readers) t.join();
  // 6000 changes, but one snapshot per combination of text values at most.
  EXPECT_LE(o.snapshot_count(), 36u);
  ASSERT_TRUE(o.Set("chip", "v6e").ok());
  ASSERT_TRUE(o.Set("cache_size", "4096").ok());
}

TEST_F(OptionsTest, SnapshotsStayValidAndAreReused) {
  Options& o = Options::Get();
  const OptionValues* before = &Flags();
  std::string fallback_before = before->fallback;
  ASSERT_TRUE(o.Set("fallback", "error").ok());
  EXPECT_EQ(before->fallback, fallback_before);  // the old snapshot is unchanged and alive
  EXPECT_EQ(Flags().fallback, "error");
  size_t n = o.snapshot_count();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(o.Set("fallback", "silent").ok());
    ASSERT_TRUE(o.Set("fallback", "error").ok());
  }
  EXPECT_LE(o.snapshot_count(), n + 1);
  // Scalars never add snapshots, and every snapshot shows their current value.
  n = o.snapshot_count();
  for (int i = 1; i <= 10000; ++i) ASSERT_TRUE(o.Set("inline_work", std::to_string(i)).ok());
  EXPECT_EQ(o.snapshot_count(), n);
  EXPECT_EQ(before->inline_work.get(), 10000);
  ASSERT_TRUE(o.Set("fallback", fallback_before).ok());
  EXPECT_EQ(&Flags(), before);
}

}  // namespace
}  // namespace tpu
