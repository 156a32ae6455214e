// The check op on the host executor (Note [Check op]): a pass-through while its condition holds,
// the kind's message when it does not, and only what depends on it is left uncomputed.
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "runtime/host/host_test_util.h"

namespace tpu::host::testing {
namespace {

const DType I = DType::kI64;
const DType F = DType::kF32;

// (x // y) checked for zeros in y (a strided y: every other element of a buffer), and x + 1.
// (The checked value is a result itself: an elementwise op reading it would fuse with x + 1 into
// one step, and a failed fused step leaves all its outputs uncomputed.)
struct Division {
  Division() {
    int x = b.Param(T(I, {3})), y = b.Param(T(I, {3}));
    int q = b.Check(b.Binary(OpCode::kDivide, x, y), b.Compare(CompareDirection::kNE, y, b.ScalarLike(0, y)),
                    CheckKind::kIntegerDivisionByZero);
    b.Result(q);                                               // the check's result
    b.Result(b.Binary(OpCode::kAdd, x, b.ScalarLike(1, x)));   // does not
    exe = CompileBuilder(b);
  }
  Status Run(std::vector<int64_t> divisors) {
    ys = std::move(divisors);
    Launch launch{exe, Bindings(Bind(xs, I, {3}), Bind(ys, I, {3}, {2})), Bindings(Bind(qs, I, {3}), Bind(ps, I, {3}))};
    HostExecutor ex;
    report = RunReport{};
    return ex.Run(launch, &report);
  }
  Builder b;
  ExecutablePtr exe;
  std::vector<int64_t> xs{7, -9, 12}, ys, qs{-1, -1, -1}, ps{-1, -1, -1};
  RunReport report;
};

TEST(CheckTest, PassesItsOperandWhileTheConditionHolds) {
  Division d;
  ASSERT_TRUE(d.Run({2, 99, 3, 99, -4, 99}).ok());
  EXPECT_EQ(d.qs, (std::vector<int64_t>{3, -3, -3}));  // the IR's division truncates
  EXPECT_EQ(d.ps, (std::vector<int64_t>{8, -8, 13}));
}

TEST(CheckTest, FailsWithTheKindsMessageAndSkipsOnlyItsDependents) {
  Division d;
  Status st = d.Run({2, 99, 0, 99, -4, 99});  // the strided divisor's middle element is 0
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "ZeroDivisionError");
  ASSERT_GE(d.report.failed_op, 0);
  EXPECT_EQ(d.exe->source().ops[d.exe->SourceOp(d.report.failed_op)].code, OpCode::kCheck);
  EXPECT_EQ(d.report.failed_results, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(d.qs, (std::vector<int64_t>{-1, -1, -1}));  // never written
  EXPECT_EQ(d.ps, (std::vector<int64_t>{8, -8, 13}));
  EXPECT_TRUE(d.Run({2, 0, 3, 0, -4, 0}).ok());  // the gaps of the strided view are not read
}

TEST(CheckTest, AFusedStepStillComputesWhatDoesNotDependOnTheFailure) {
  // (x // y) * 2 and x + 1 are one fused region (Note [Open regions]); when the check fails,
  // only the first is left uncomputed, as when the ops run one at a time.
  Builder b;
  int x = b.Param(T(I, {3})), y = b.Param(T(I, {3}));
  int q = b.Check(b.Binary(OpCode::kDivide, x, y), b.Compare(CompareDirection::kNE, y, b.ScalarLike(0, y)),
                  CheckKind::kIntegerDivisionByZero);
  b.Result(b.Binary(OpCode::kMultiply, q, b.ScalarLike(2, q)));
  b.Result(b.Binary(OpCode::kAdd, x, b.ScalarLike(1, x)));
  ExecutablePtr exe = CompileBuilder(b);
  const auto& host = static_cast<const HostExecutable&>(*exe);
  int fused_steps = 0;
  for (const Step& st : host.steps) fused_steps += st.kind == StepKind::kFused;
  ASSERT_EQ(fused_steps, 2);  // the condition's compare, then both results in one region
  std::vector<int64_t> xs{7, -9, 12}, ys{2, 0, 3}, qs{-1, -1, -1}, ps{-1, -1, -1};
  Launch launch{exe, Bindings(Bind(xs, I, {3}), Bind(ys, I, {3})), Bindings(Bind(qs, I, {3}), Bind(ps, I, {3}))};
  HostExecutor ex;
  RunReport report;
  Status st = ex.Run(launch, &report);
  EXPECT_EQ(st.message(), "ZeroDivisionError");
  EXPECT_EQ(report.failed_results, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(qs, (std::vector<int64_t>{-1, -1, -1}));
  EXPECT_EQ(ps, (std::vector<int64_t>{8, -8, 13}));
}

TEST(CheckTest, AnEmptyConditionHolds) {
  Builder b;
  int x = b.Param(T(F, {0, 2}));
  b.Result(b.Check(x, b.Compare(CompareDirection::kGE, x, b.ScalarLike(0, x)), CheckKind::kBceInputRange));
  std::vector<float> xs(1), out(1);
  EXPECT_TRUE(RunProgram(b, Bindings(Bind(xs, F, {0, 2})), Bindings(Bind(out, F, {0, 2}))).ok());
}

TEST(CheckTest, PrintsAsACustomCall) {
  Builder b;
  int x = b.Param(T(F, {2}));
  b.Result(b.Check(x, b.Compare(CompareDirection::kLE, x, b.ScalarLike(1, x)), CheckKind::kProbabilityRange));
  auto g = b.Finish();
  ASSERT_TRUE(g.ok());
  std::string text = PrintStableHlo(g.value(), "main");
  EXPECT_NE(text.find("\"stablehlo.custom_call\"(%arg0, %"), std::string::npos) << text;
  EXPECT_NE(text.find("{api_version = 1 : i32, backend_config = \"probability_range\", call_target_name = "
                      "\"tpu.check\", has_side_effect = true} : (tensor<2xf32>, tensor<2xi1>) -> tensor<2xf32>"),
            std::string::npos)
      << text;
  EXPECT_STREQ(CheckMessage(CheckKind::kBceTargetRange), "all elements of target should be between 0 and 1");
}

TEST(CheckTest, AnAssertCarriesItsMessage) {
  // torch._assert_async's check: the op's own message is the error, and the printer escapes it.
  const std::string message = "position \"k\" out of range\\\n";
  Builder b;
  int x = b.Param(T(DType::kBool, {}));
  b.Result(b.Check(x, x, CheckKind::kAssert, message));
  auto exe = CompileBuilder(b);
  ASSERT_NE(exe, nullptr);
  for (bool ok : {true, false}) {
    std::vector<uint8_t> in{static_cast<uint8_t>(ok)}, out{7};
    Launch launch{exe, Bindings(Bind(in.data(), DType::kBool, {})), Bindings(Bind(out.data(), DType::kBool, {}))};
    HostExecutor ex;
    RunReport report;
    Status st = ex.Run(launch, &report);
    if (ok) {
      EXPECT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(out[0], 1);
    } else {
      EXPECT_FALSE(st.ok());
      EXPECT_EQ(st.message(), message);
    }
  }
  Builder p;
  int y = p.Param(T(DType::kBool, {}));
  p.Result(p.Check(y, y, CheckKind::kAssert, message));
  auto g = p.Finish();
  ASSERT_TRUE(g.ok());
  std::string text = PrintStableHlo(g.value(), "main");
  EXPECT_NE(text.find("backend_config = \"assert: position \\22k\\22 out of range\\5C\\0A\""), std::string::npos) << text;
  // A message belongs to asserts only.
  Builder q;
  int z = q.Param(T(DType::kBool, {}));
  q.Result(q.Check(z, z, CheckKind::kProbabilityRange, "no"));
  EXPECT_FALSE(q.Finish().ok());
}

TEST(CheckTest, TheBuilderRefusesANonBooleanCondition) {
  Builder b;
  int x = b.Param(T(F, {2}));
  b.Result(b.Check(x, x, CheckKind::kProbabilityRange));
  EXPECT_FALSE(b.Finish().ok());
}

}  // namespace
}  // namespace tpu::host::testing
