#include "base/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace tpu {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, FactoriesSetCodeAndMessage) {
  struct Case {
    Status status;
    Code code;
    const char* text;
  } cases[] = {
      {InvalidArgument("bad shape"), Code::kInvalidArgument, "INVALID_ARGUMENT: bad shape"},
      {OutOfRange("index 7"), Code::kOutOfRange, "OUT_OF_RANGE: index 7"},
      {ResourceExhausted("oom"), Code::kResourceExhausted, "RESOURCE_EXHAUSTED: oom"},
      {Unimplemented("no erf"), Code::kUnimplemented, "UNIMPLEMENTED: no erf"},
      {Internal("bug"), Code::kInternal, "INTERNAL: bug"},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.ToString(), c.text);
  }
  EXPECT_STREQ(CodeName(Code::kOk), "OK");
  EXPECT_STREQ(CodeName(Code::kInternal), "INTERNAL");
}

TEST(StatusOrTest, HoldsValueOrStatus) {
  StatusOr<int> v = 42;
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(v.value(), 42);
  EXPECT_EQ(*v, 42);
  *v = 7;
  EXPECT_EQ(v.value(), 7);

  StatusOr<int> e = OutOfRange("nope");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kOutOfRange);
  EXPECT_EQ(e.status().message(), "nope");
}

TEST(StatusOrTest, MoveOnlyValue) {
  StatusOr<std::unique_ptr<int>> v = std::make_unique<int>(5);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v.value(), 5);
  EXPECT_EQ(**v, 5);
  std::unique_ptr<int> p = std::move(v).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
  StatusOr<std::string> s = std::string("abc");
  EXPECT_EQ(s->size(), 3u);
}

Status FailIf(bool fail, int* reached) {
  if (fail) return InvalidArgument("failed");
  ++*reached;
  return Status::Ok();
}

Status Chain(bool fail_first, int* reached) {
  TPU_RETURN_IF_ERROR(FailIf(fail_first, reached));
  TPU_RETURN_IF_ERROR(FailIf(false, reached));
  ++*reached;
  return Status::Ok();
}

TEST(StatusMacrosTest, ReturnIfError) {
  int reached = 0;
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 3);
  reached = 0;
  Status s = Chain(true, &reached);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "failed");
  EXPECT_EQ(reached, 0);  // returned before anything after the failing call ran
}

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  TPU_ASSIGN_OR_RETURN(int h, Half(x));
  TPU_ASSIGN_OR_RETURN(int q, Half(h));  // two uses in one function need distinct temporaries
  return q;
}

TEST(StatusMacrosTest, AssignOrReturn) {
  StatusOr<int> q = Quarter(12);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value(), 3);
  StatusOr<int> bad = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "odd: 3");
  EXPECT_EQ(Quarter(5).status().message(), "odd: 5");
}

Status CheckPositive(int x) {
  TPU_RET_CHECK(x > 0, "x=" + std::to_string(x));
  return Status::Ok();
}

TEST(StatusMacrosTest, RetCheckIsInternalWithLocation) {
  EXPECT_TRUE(CheckPositive(1).ok());
  Status s = CheckPositive(-2);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("status_test.cc:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("check failed: x > 0: x=-2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tpu
