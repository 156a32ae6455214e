// multinomial on the device's Philox generator (what generate(do_sample=True) calls every token).
//
// Without replacement (and for a single sample, as ATen does on every device): the exponential
// race, argmax / top-k of p / E with E ~ Exp(1) per category. E is made from 24 random bits as
// -log((k + 1/2) / 2^24), so it is never 0 and a category of probability 0 scores exactly 0: it
// is never drawn while the row has mass elsewhere.
// With replacement: u * total searched in the running sum of the row (CPU's binary search,
// search_util.h), u uniform in (0, 1]. The running sum is made non-decreasing and exactly flat
// over zero-probability categories (a running maximum over the positive entries), so the search
// can never stop on a category of probability 0.
// Probabilities are used in double precision. The draws differ from CPU's (another generator),
// as CUDA's do; their distribution is the same.
//
// Invalid probabilities raise CPU's messages: the program also computes an error code, which the
// host reads (one sync per call, as CPU and CUDA do for these checks).
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

#include "torch/lower/random_util.h"
#include "torch/lower/search_util.h"

namespace tpu::torch_bridge {
namespace {

constexpr int64_t kMaxCategories = int64_t{1} << 24;  // ATen's FLOAT32_MAX_CONSECUTIVE_INT
// Above every error key (position * 4 + code) and exact as a double, unlike INT64_MAX.
constexpr double kNoError = 4611686018427387904.0;  // 2^62

// Fast path (no replacement, or one sample): 1 for inf/NaN/negative entries, else 2 for a row
// of zeros, else 0; ATen checks the whole tensor before the rows.
int FastPathError(Builder& b, int p) {
  int bad = b.Binary(OpCode::kOr, b.Unary(OpCode::kNot, b.Compare(CompareDirection::kGE, p, b.ScalarLike(0, p))),
                     b.Compare(CompareDirection::kEQ, p, b.ScalarLike(INFINITY, p)));
  int any_bad = b.Reduce(bad, b.Constant(0, DType::kBool), {0, 1}, ReduceKind::kOr);
  int positive = b.Compare(CompareDirection::kGT, p, b.ScalarLike(0, p));
  int row_has_mass = b.Reduce(positive, b.Constant(0, DType::kBool), {1}, ReduceKind::kOr);
  int zero_row = b.Reduce(b.Unary(OpCode::kNot, row_has_mass), b.Constant(0, DType::kBool), {0}, ReduceKind::kOr);
  int one = b.Constant(1, DType::kI64), two = b.Constant(2, DType::kI64), zero = b.Constant(0, DType::kI64);
  return b.Select(any_bad, one, b.Select(zero_row, two, zero));
}

// With replacement, CPU checks row by row, element by element: the first failure wins. Each
// failure gets key = position * 4 + code (code 1: entry < 0 or NaN, 2: inf, 3: row sum <= 0 at
// the position after the row's last entry); the program returns the smallest key, or -1.
int ReplacementError(Builder& b, int p, int64_t rows, int64_t cats) {
  TensorType idx{DType::kI64, {rows, cats}};
  int pos = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, b.Iota(idx, 0), b.ScalarLike(static_cast<double>(cats + 1), b.Iota(idx, 0))),
                     b.Iota(idx, 1));
  int negative = b.Unary(OpCode::kNot, b.Compare(CompareDirection::kGE, p, b.ScalarLike(0, p)));
  int infinite = b.Unary(OpCode::kNot, b.Unary(OpCode::kIsFinite, p));
  int none = b.ScalarLike(kNoError, pos);
  int four = b.ScalarLike(4, pos);
  int key = b.Select(negative, b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, pos, four), b.ScalarLike(1, pos)),
                     b.Select(infinite, b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, pos, four), b.ScalarLike(2, pos)),
                              none));
  int elem_key = b.Reduce(key, b.Constant(kNoError, DType::kI64), {1},
                          ReduceKind::kMin);
  int positive = b.Compare(CompareDirection::kGT, p, b.ScalarLike(0, p));
  int row_has_mass = b.Reduce(positive, b.Constant(0, DType::kBool), {1}, ReduceKind::kOr);
  TensorType row_idx{DType::kI64, {rows}};
  int row_end = b.Binary(OpCode::kMultiply, b.Iota(row_idx, 0), b.ScalarLike(static_cast<double>(cats + 1), b.Iota(row_idx, 0)));
  row_end = b.Binary(OpCode::kAdd, row_end, b.ScalarLike(static_cast<double>(cats), row_end));
  int sum_key = b.Select(row_has_mass, b.ScalarLike(kNoError, row_end),
                         b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, row_end, b.ScalarLike(4, row_end)),
                                  b.ScalarLike(3, row_end)));
  int first = b.Reduce(b.Binary(OpCode::kMinimum, elem_key, sum_key),
                       b.Constant(kNoError, DType::kI64), {0},
                       ReduceKind::kMin);
  return b.Select(b.Compare(CompareDirection::kEQ, first, b.ScalarLike(kNoError, first)),
                  b.ScalarLike(-1, first), first);
}

// [rows, n_sample] i64 draws of the exponential race: the n_sample largest p / E per row.
int ExponentialRace(Lowering& l, const std::optional<at::Generator>& gen, const at::Tensor& self, int p,
                    int64_t rows, int64_t cats, int64_t n_sample) {
  Builder& b = l.b();
  int words = RandomWords(l, gen, self, rows * cats);
  int k = b.Reshape(LowBits(b, words, 24, DType::kF64), {rows, cats});
  int u = b.Binary(OpCode::kMultiply, b.Binary(OpCode::kAdd, k, b.ScalarLike(0.5, k)), b.ScalarLike(std::ldexp(1.0, -24), k));
  int e = b.Unary(OpCode::kNegate, b.Unary(OpCode::kLog, u));
  int q = b.Binary(OpCode::kDivide, p, e);
  if (n_sample == 1) return b.Reshape(b.ArgReduce(q, 1, ReduceKind::kMax), {rows, 1});
  int order = b.Sort(q, 1, /*descending=*/true);
  return b.Slice(order, {0, 0}, {rows, n_sample}, {1, 1});
}

// [rows, n_sample] i64 draws with replacement.
int InverseCdf(Lowering& l, const std::optional<at::Generator>& gen, const at::Tensor& self, int p, int64_t rows,
               int64_t cats, int64_t n_sample) {
  Builder& b = l.b();
  int cum = PrefixSum(b, p, 1);
  int positive = b.Compare(CompareDirection::kGT, p, b.ScalarLike(0, p));
  int mono = PrefixMax(b, b.Select(positive, cum, b.ScalarLike(-INFINITY, cum)), 1);
  int total = b.Slice(mono, {0, cats - 1}, {rows, cats}, {1, 1});  // [rows, 1]
  int u01 = b.Reshape(Uniform01(l, gen, self, rows * n_sample, 53), {rows, n_sample});
  int u = b.Binary(OpCode::kSubtract, b.ScalarLike(1, u01), u01);  // (0, 1]
  int target = b.Binary(OpCode::kMultiply, u, b.BroadcastInDim(b.Reshape(total, {rows}), {rows, n_sample}, {0}));
  return BinarySearch(b, mono, target, [](Builder& b, int probe, int value) {
    return b.Compare(CompareDirection::kLT, probe, value);
  });
}

[[noreturn]] void RaiseFastPath(int64_t code) {
  TORCH_CHECK(code != 1, "probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(false, "invalid multinomial distribution (sum of probabilities <= 0)");
}

[[noreturn]] void RaiseReplacement(int64_t key) {
  switch (key & 3) {
    case 1: TORCH_CHECK(false, "invalid multinomial distribution (encountering probability entry < 0)");
    case 2: TORCH_CHECK(false, "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
    default: TORCH_CHECK(false, "invalid multinomial distribution (sum of probabilities <= 0)");
  }
}

at::Tensor& MultinomialOut(const at::Tensor& self, int64_t n_sample, bool replacement,
                           const std::optional<at::Generator>& gen, at::Tensor& result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(result.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  int64_t cats = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= cats,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(cats <= kMaxCategories, "number of categories cannot exceed 2^24");
  int64_t rows = self.dim() == 1 ? 1 : self.size(0);
  if (self.dim() == 1) at::native::resize_output(result, {n_sample});
  else at::native::resize_output(result, {rows, n_sample});
  if (result.numel() == 0) return result;
  TORCH_CHECK(cats > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
  c10::DeviceGuard guard(self.device());

  bool race = !replacement || n_sample == 1;
  at::Tensor error = at::empty({}, self.options().dtype(at::kLong));
  {
    Lowering l("aten::multinomial");
    Builder& b = l.b();
    int p = b.Reshape(l.Input(self, at::kDouble), {rows, cats});
    int draws = race ? ExponentialRace(l, gen, self, p, rows, cats, n_sample)
                     : InverseCdf(l, gen, self, p, rows, cats, n_sample);
    l.Output(b.Reshape(draws, ToDims(result.sizes())), result);
    l.Output(race ? FastPathError(b, p) : ReplacementError(b, p, rows, cats), error);
    l.Run();
  }
  int64_t code = error.item<int64_t>();
  if (race && code != 0) RaiseFastPath(code);
  if (!race && code >= 0) RaiseReplacement(code);
  return result;
}

at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement, std::optional<at::Generator> gen) {
  // Allocated at its size (growing an empty tensor would wait for the device queue).
  std::vector<int64_t> shape{n_sample};
  if (self.dim() == 2) shape.insert(shape.begin(), self.size(0));
  at::Tensor result = at::empty(n_sample > 0 && self.dim() <= 2 ? at::IntArrayRef(shape) : at::IntArrayRef{0},
                                self.options().dtype(at::kLong));
  return MultinomialOut(self, n_sample, replacement, gen, result);
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& out) {
  return MultinomialOut(self, n_sample, replacement, gen, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);
}

}  // namespace tpu::torch_bridge
