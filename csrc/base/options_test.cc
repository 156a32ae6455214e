#include "base/options.h"

#include <cstdlib>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace tpu {
namespace {

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
  ASSERT_TRUE(o.Set("memory_capacity", "-5").ok());
  EXPECT_EQ(Flags().memory_capacity, -5);
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
  Options::Get().LoadFromEnvironment();
  EXPECT_EQ(Flags().cache_size, 77);
  EXPECT_TRUE(Flags().check_nan);
  // A malformed variable keeps the current value instead of failing.
  ASSERT_EQ(setenv("TORCH_TPU_CACHE_SIZE", "lots", 1), 0);
  Options::Get().LoadFromEnvironment();
  EXPECT_EQ(Flags().cache_size, 77);
  unsetenv("TORCH_TPU_CACHE_SIZE");
  unsetenv("TORCH_TPU_CHECK_NAN");
}

}  // namespace
}  // namespace tpu
