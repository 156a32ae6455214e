#include "ir/printer.h"

#include <cctype>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/window.h"

namespace tpu {
namespace {

TensorType T(DType dt, Dims dims) { return TensorType{dt, std::move(dims)}; }

Graph Finish(Builder& b) {
  auto g = b.Finish();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PrinterTest, GoldenSmallGraph) {
  Builder b;
  int x = b.Param(T(DType::kF32, {2, 3}));
  int v = b.Param(T(DType::kF32, {3}));
  int s = b.Binary(OpCode::kAdd, x, b.BroadcastInDim(v, {2, 3}, {1}));
  b.Result(b.Binary(OpCode::kMultiply, s, b.ScalarLike(2.0, s)));
  const std::string text = PrintStableHlo(Finish(b));
  const std::string expected =
      "module @tpu_program {\n"
      "  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> (tensor<2x3xf32>) {\n"
      "    %0 = \"stablehlo.broadcast_in_dim\"(%arg1) {broadcast_dimensions = array<i64: 1>} : "
      "(tensor<3xf32>) -> tensor<2x3xf32>\n"
      "    %1 = \"stablehlo.add\"(%arg0, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
      "    %2 = stablehlo.constant dense<2.00000000000000000e+00> : tensor<f32>\n"
      "    %3 = \"stablehlo.broadcast_in_dim\"(%2) {broadcast_dimensions = array<i64>} : "
      "(tensor<f32>) -> tensor<2x3xf32>\n"
      "    %4 = \"stablehlo.multiply\"(%1, %3) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
      "    return %4 : tensor<2x3xf32>\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(text, expected);
  EXPECT_TRUE(Contains(text, "func.func public @main"));
  EXPECT_TRUE(Contains(text, "\"stablehlo.add\""));
  EXPECT_TRUE(Contains(text, "broadcast_dimensions = array<i64: 1>"));
  EXPECT_TRUE(Contains(text, "stablehlo.constant dense<2.00000000000000000e+00> : tensor<f32>"));
}

// Note [Bounded dims in the IR]: a bounded dim prints as `?` with its bound in
// #stablehlo.bounds, and the dimension-size ops with their dimension.
TEST(PrinterTest, BoundedDims) {
  Builder b;
  int x = b.Param(T(DType::kF32, {8, 3}));
  int n = b.Param(T(DType::kI32, {}));
  int xb = b.SetDimensionSize(x, n, 0);
  b.Result(b.GetDimensionSize(b.Transpose(xb, {1, 0}), 1));
  b.Result(b.Reduce(xb, b.Constant(0.0, DType::kF32), {0}, ReduceKind::kAdd));
  const std::string text = PrintStableHlo(Finish(b));
  EXPECT_TRUE(Contains(text, "%0 = \"stablehlo.set_dimension_size\"(%arg0, %arg1) {dimension = 0 : i64} : "
                             "(tensor<8x3xf32>, tensor<i32>) -> tensor<?x3xf32, #stablehlo.bounds<8, ?>>\n"))
      << text;
  EXPECT_TRUE(Contains(text, "%1 = \"stablehlo.transpose\"(%0) {permutation = array<i64: 1, 0>} : "
                             "(tensor<?x3xf32, #stablehlo.bounds<8, ?>>) -> tensor<3x?xf32, #stablehlo.bounds<?, 8>>\n"))
      << text;
  EXPECT_TRUE(Contains(text, "%2 = \"stablehlo.get_dimension_size\"(%1) {dimension = 1 : i64} : "
                             "(tensor<3x?xf32, #stablehlo.bounds<?, 8>>) -> tensor<i32>\n"))
      << text;
  EXPECT_TRUE(Contains(text, "-> (tensor<i32>, tensor<3xf32>)")) << text;
}

TEST(PrinterTest, FunctionNameAndMultipleResults) {
  Builder b;
  int x = b.Param(T(DType::kI32, {4}));
  int y = b.Param(T(DType::kI32, {4}));
  b.Result(b.Compare(CompareDirection::kGE, x, y));
  b.Result(x);
  const std::string text = PrintStableHlo(Finish(b), "step");
  EXPECT_TRUE(Contains(text, "func.func public @step(%arg0: tensor<4xi32>, %arg1: tensor<4xi32>) -> "
                             "(tensor<4xi1>, tensor<4xi32>) {"));
  EXPECT_TRUE(Contains(text, "%0 = \"stablehlo.compare\"(%arg0, %arg1) {comparison_direction = "
                             "#stablehlo<comparison_direction GE>} : (tensor<4xi32>, tensor<4xi32>) -> "
                             "tensor<4xi1>"));
  EXPECT_TRUE(Contains(text, "return %0, %arg0 : tensor<4xi1>, tensor<4xi32>\n"));
}

TEST(PrinterTest, ConstantsOfEveryKind) {
  Builder b;
  b.Result(b.Constant(1, DType::kBool));
  b.Result(b.Constant(0, DType::kBool));
  b.Result(b.Constant(-7, DType::kI64));
  b.Result(b.Constant(200, DType::kU8));
  b.Result(b.Constant(0.5, DType::kBF16));
  b.Result(b.Constant(-INFINITY, DType::kF32));
  b.Result(b.Constant(INFINITY, DType::kF64));
  b.Result(b.Constant(NAN, DType::kBF16));
  b.Result(b.Constant(-INFINITY, DType::kF16));
  const std::string text = PrintStableHlo(Finish(b));
  EXPECT_TRUE(Contains(text, "%0 = stablehlo.constant dense<true> : tensor<i1>"));
  EXPECT_TRUE(Contains(text, "%1 = stablehlo.constant dense<false> : tensor<i1>"));
  EXPECT_TRUE(Contains(text, "%2 = stablehlo.constant dense<-7> : tensor<i64>"));
  EXPECT_TRUE(Contains(text, "%3 = stablehlo.constant dense<200> : tensor<ui8>"));
  EXPECT_TRUE(Contains(text, "%4 = stablehlo.constant dense<5.00000000000000000e-01> : tensor<bf16>"));
  EXPECT_TRUE(Contains(text, "%5 = stablehlo.constant dense<0xFF800000> : tensor<f32>"));
  EXPECT_TRUE(Contains(text, "%6 = stablehlo.constant dense<0x7FF0000000000000> : tensor<f64>"));
  EXPECT_TRUE(Contains(text, "%7 = stablehlo.constant dense<0x7FC0> : tensor<bf16>"));
  EXPECT_TRUE(Contains(text, "%8 = stablehlo.constant dense<0xFC00> : tensor<f16>"));
}

TEST(PrinterTest, ParametersPrintedAsConstants) {
  Builder b;
  int k = b.Param(T(DType::kF32, {2}));
  int x = b.Param(T(DType::kF32, {2}));
  int m = b.Param(T(DType::kBool, {2}));
  b.Result(b.Binary(OpCode::kAdd, x, k));
  b.Result(m);
  const Graph g = Finish(b);
  const float kv[2] = {1.0f, 2.0f};
  const std::string kbytes(reinterpret_cast<const char*>(kv), sizeof(kv));
  StatusOr<std::string> text = PrintStableHlo(g, "main", {{0, kbytes}, {2, std::string("\x01\x00", 2)}});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  // Only the remaining parameter is an argument, renumbered from 0.
  EXPECT_TRUE(Contains(*text, "func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xi1>) {"));
  EXPECT_TRUE(Contains(*text, "%cst0 = stablehlo.constant dense<\"0x0000803F00000040\"> : tensor<2xf32>"));
  EXPECT_TRUE(Contains(*text, "%cst2_u8 = stablehlo.constant dense<\"0x0100\"> : tensor<2xui8>"));
  EXPECT_TRUE(Contains(*text, "%cst2 = stablehlo.convert %cst2_u8 : (tensor<2xui8>) -> tensor<2xi1>"));
  EXPECT_TRUE(Contains(*text, "\"stablehlo.add\"(%arg0, %cst0)"));
  EXPECT_TRUE(Contains(*text, "return %0, %cst2 : tensor<2xf32>, tensor<2xi1>"));

  StatusOr<std::string> short_bytes = PrintStableHlo(g, "main", {{0, "abc"}});
  ASSERT_FALSE(short_bytes.ok());
  EXPECT_TRUE(Contains(short_bytes.status().message(), "has 3 bytes for tensor<2xf32> (8 bytes)"));
  EXPECT_FALSE(PrintStableHlo(g, "main", {{3, ""}}).ok());
  EXPECT_FALSE(PrintStableHlo(g, "main", {{0, kbytes}, {0, kbytes}}).ok());
}

TEST(PrinterTest, LayoutAndOtherOpAttributes) {
  Builder b;
  int x = b.Param(T(DType::kF32, {4, 6}));
  int w = b.Param(T(DType::kF32, {5, 6}));
  int ids = b.Param(T(DType::kI64, {3, 1}));
  b.Result(b.Transpose(x, {1, 0}));
  b.Result(b.Slice(x, {1, 0}, {3, 6}, {1, 2}));
  b.Result(b.Reshape(x, {24}));
  b.Result(b.Concatenate({x, x}, 1));
  b.Result(b.Pad(x, b.Constant(0, DType::kF32), {1, -1}, {0, 2}, {0, 1}));
  b.Result(b.DotGeneral(x, w, {}, {}, {1}, {1}, DType::kF32));
  b.Result(b.Gather(w, ids, {1}, {0}, {0}, {1, 6}));
  b.Result(b.Iota(T(DType::kI32, {2, 3}), 1));
  b.Result(b.Reduce(x, b.Constant(-INFINITY, DType::kF32), {0}, ReduceKind::kMax));
  int along = b.Param(T(DType::kI64, {4, 2, 1}));  // torch.gather along dim 1: dim 0 batching
  b.Result(b.Gather(x, along, {}, {1}, {1}, {1, 1}, true, {0}, {0}));
  b.Result(b.Scatter(x, along, b.Gather(x, along, {}, {1}, {1}, {1, 1}, true, {0}, {0}), {}, {1}, {1},
                     ReduceKind::kAdd, true, {0}, {0}));
  const std::string text = PrintStableHlo(Finish(b));
  EXPECT_TRUE(Contains(text, "#stablehlo.gather<offset_dims = [], collapsed_slice_dims = [1], "
                             "operand_batching_dims = [0], start_indices_batching_dims = [0], "
                             "start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, "
                             "slice_sizes = array<i64: 1, 1>} : (tensor<4x6xf32>, tensor<4x2x1xi64>) -> "
                             "tensor<4x2xf32>"));
  EXPECT_TRUE(Contains(text, "#stablehlo.scatter<update_window_dims = [], inserted_window_dims = [1], "
                             "input_batching_dims = [0], scatter_indices_batching_dims = [0], "
                             "scatter_dims_to_operand_dims = [1], index_vector_dim = 2>"));
  EXPECT_TRUE(Contains(text, "\"stablehlo.transpose\"(%arg0) {permutation = array<i64: 1, 0>} : "
                             "(tensor<4x6xf32>) -> tensor<6x4xf32>"));
  EXPECT_TRUE(Contains(text, "{limit_indices = array<i64: 3, 6>, start_indices = array<i64: 1, 0>, "
                             "strides = array<i64: 1, 2>} : (tensor<4x6xf32>) -> tensor<2x3xf32>"));
  EXPECT_TRUE(Contains(text, "\"stablehlo.reshape\"(%arg0) : (tensor<4x6xf32>) -> tensor<24xf32>"));
  EXPECT_TRUE(Contains(text, "\"stablehlo.concatenate\"(%arg0, %arg0) {dimension = 1 : i64} : "
                             "(tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x12xf32>"));
  EXPECT_TRUE(Contains(text, "{edge_padding_high = array<i64: 0, 2>, edge_padding_low = array<i64: 1, -1>, "
                             "interior_padding = array<i64: 0, 1>} : (tensor<4x6xf32>, tensor<f32>) -> "
                             "tensor<5x12xf32>"));
  EXPECT_TRUE(Contains(text, "#stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], "
                             "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : "
                             "(tensor<4x6xf32>, tensor<5x6xf32>) -> tensor<4x5xf32>"));
  EXPECT_TRUE(Contains(text, "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], "
                             "start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, "
                             "slice_sizes = array<i64: 1, 6>} : (tensor<5x6xf32>, tensor<3x1xi64>) -> "
                             "tensor<3x6xf32>"));
  EXPECT_TRUE(Contains(text, "\"stablehlo.iota\"() {iota_dimension = 1 : i64} : () -> tensor<2x3xi32>"));
  EXPECT_TRUE(Contains(text, "%r = \"stablehlo.maximum\"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> tensor<f32>"));
  EXPECT_TRUE(Contains(text, "{dimensions = array<i64: 0>} : (tensor<4x6xf32>, tensor<f32>) -> tensor<6xf32>"));
}

// Every SSA value name in MLIR text is %digits, or a letter, '_' or '$' followed by letters,
// digits, '_', '$', '.', '-' (either may carry a #N / :N result suffix). Returns the text around
// the first name that breaks the rule, or "".
std::string FirstBadValueName(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') continue;
    size_t j = i + 1;
    if (j >= text.size()) return text.substr(i);
    bool ok;
    if (std::isdigit(static_cast<unsigned char>(text[j]))) {
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      char next = j < text.size() ? text[j] : ' ';
      ok = next == ' ' || next == ',' || next == ')' || next == ':' || next == '#' || next == '\n';
    } else {
      ok = std::isalpha(static_cast<unsigned char>(text[j])) || text[j] == '_' || text[j] == '$';
    }
    if (!ok) return text.substr(i, 24);
  }
  return "";
}

TEST(PrinterTest, ArgReduceRngAndScatterPrintValidNames) {
  Builder b;
  int x = b.Param(T(DType::kF32, {2, 3}));
  int xi = b.Param(T(DType::kI32, {2, 3}));
  int xu = b.Param(T(DType::kU8, {2, 3}));
  int state = b.Param(T(DType::kU64, {2}));
  int ids = b.Param(T(DType::kI64, {2, 1}));
  b.Result(b.ArgReduce(x, 1, ReduceKind::kMax));
  b.Result(b.ArgReduce(xi, 0, ReduceKind::kMin));
  b.Result(b.ArgReduce(xi, 1, ReduceKind::kMax));
  b.Result(b.ArgReduce(xu, 1, ReduceKind::kMin));
  b.Result(b.RngBits(state, {4}));
  b.Result(b.Scatter(x, ids, x, {1}, {0}, {0}, ReduceKind::kAdd));
  const std::string text = PrintStableHlo(Finish(b));
  EXPECT_EQ(FirstBadValueName(text), "");
  // The arg-reduce init values are in range for the element type.
  EXPECT_TRUE(Contains(text, "stablehlo.constant dense<0xFF800000> : tensor<f32>"));
  EXPECT_TRUE(Contains(text, "stablehlo.constant dense<2147483647> : tensor<i32>"));
  EXPECT_TRUE(Contains(text, "stablehlo.constant dense<-2147483648> : tensor<i32>"));
  EXPECT_TRUE(Contains(text, "stablehlo.constant dense<255> : tensor<ui8>"));
  // Results of multi-result ops are referred to as %N#1.
  EXPECT_TRUE(Contains(text, "%0:2 = \"stablehlo.reduce\"(%arg0, "));
  EXPECT_TRUE(Contains(text, "%4:2 = \"stablehlo.rng_bit_generator\"(%arg3) {rng_algorithm = "
                             "#stablehlo<rng_algorithm PHILOX>} : (tensor<2xui64>) -> (tensor<2xui64>, "
                             "tensor<4xui32>)"));
  EXPECT_TRUE(Contains(text, "return %0#1, %1#1, %2#1, %3#1, %4#1, %5 :"));
  EXPECT_TRUE(Contains(text, "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
                             "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
                             "index_vector_dim = 1>"));
}

TEST(PrinterTest, WindowedOps) {
  Builder b;
  int x = b.Param(T(DType::kF32, {2, 3, 6, 6}));
  int w = b.Param(T(DType::kF32, {3, 4, 3, 1}));  // [kh, o, i, kw]
  ConvolutionSpec s = ConvolutionSpec::Nchw(2);
  s.dn.kernel_spatial = {0, 3};
  s.dn.kernel_input_feature = 2;
  s.dn.kernel_output_feature = 1;
  s.window_strides = {2, 1};
  s.padding_low = {1, 0};
  s.padding_high = {1, -1};
  s.lhs_dilation = {1, 2};
  b.Result(b.Convolution(x, w, s, DType::kF32));
  WindowSpec win = WindowSpec::Of({1, 1, 3, 3});
  win.strides = {1, 1, 2, 2};
  win.padding_low = win.padding_high = {0, 0, 1, 1};
  b.Result(b.ReduceWindow(x, b.Constant(0, DType::kF32), win, ReduceKind::kAdd));
  b.Result(b.ArgReduceWindow(x, b.Iota(T(DType::kI64, {2, 3, 6, 6}), 3), win));
  b.Result(b.Reverse(w, {0, 2}));
  const std::string text = PrintStableHlo(Finish(b));
  EXPECT_EQ(FirstBadValueName(text), "");
  EXPECT_TRUE(
      Contains(text,
               "\"stablehlo.convolution\"(%arg0, %arg1) {batch_group_count = 1 : i64, "
               "dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[0, o, i, 1]->[b, f, 0, 1]>, "
               "feature_group_count = 1 : i64, lhs_dilation = array<i64: 1, 2>, "
               "padding = dense<[[1, 1], [0, -1]]> : tensor<2x2xi64>, "
               "rhs_dilation = array<i64: 1, 1>, window_strides = array<i64: 2, 1>} : "
               "(tensor<2x3x6x6xf32>, tensor<3x4x3x1xf32>) -> tensor<2x4x3x10xf32>"));
  EXPECT_TRUE(Contains(
      text,
      "{base_dilations = array<i64: 1, 1, 1, 1>, padding = dense<[[0, 0], [0, 0], "
      "[1, 1], [1, 1]]> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, "
      "window_dimensions = array<i64: 1, 1, 3, 3>, window_strides = array<i64: 1, 1, 2, 2>}"));
  EXPECT_TRUE(Contains(text, ":2 = \"stablehlo.reduce_window\"(%arg0, %"));
  EXPECT_TRUE(Contains(text, "\"stablehlo.reverse\"(%arg1) {dimensions = array<i64: 0, 2>}"));
}

TEST(PrinterTest, ValueNameCheckerCatchesBadNames) {
  // The checker above must reject the names it is there to catch.
  EXPECT_EQ(FirstBadValueName("%3_iota = x\n"), "%3_iota = x\n");
  EXPECT_EQ(FirstBadValueName("%ok = %-x\n"), "%-x\n");
  EXPECT_EQ(FirstBadValueName("%0 = f(%arg0, %1#1) : %v3"), "");
}

}  // namespace
}  // namespace tpu
