// Reductions: sum, mean, prod, amax/amin/aminmax, max/min (full and with indices), argmax/argmin,
// any/all and count_nonzero: ATen -> IR Reduce / ArgReduce. Structured ops run ATen's own meta
// function first, so argument checks, result dtypes and shapes are PyTorch's; the statistics
// (var/std, logsumexp, norms) are in reduce_stats.cc.
#include <ATen/ops/all_meta.h>
#include <ATen/ops/amax_meta.h>
#include <ATen/ops/amin_meta.h>
#include <ATen/ops/aminmax_meta.h>
#include <ATen/ops/any_meta.h>
#include <ATen/ops/argmax_meta.h>
#include <ATen/ops/argmin_meta.h>
#include <ATen/ops/max_meta.h>
#include <ATen/ops/mean_meta.h>
#include <ATen/ops/min_meta.h>
#include <ATen/ops/prod_meta.h>
#include <ATen/ops/sum_meta.h>
#include <torch/library.h>

#include <limits>

#include "torch/lower/reduce_util.h"

namespace tpu::torch_bridge {
namespace {

using Axes = Dims;

// Writes the value a reduction over no elements gives; true when there is nothing to lower.
bool EmptyCase(const at::Tensor& self, const at::Tensor& out, double empty_value) {
  if (out.numel() == 0) return true;
  if (self.numel() != 0) return false;
  const_cast<at::Tensor&>(out).fill_(empty_value);
  return true;
}

// sum / prod: the input is converted to the result dtype (as ATen's reduction iterator does),
// accumulated in its opmath type (float32 for bfloat16/float16) and rounded once.
// Note [Complex tensors]: a complex sum or mean is the sum or mean of its float view over the same
// axes (the pair dimension is last, so the axes keep their numbers).
at::Tensor FloatView(const at::Tensor& t) { return at::view_as_real(t.resolve_conj().resolve_neg()); }

void LowerAccumulate(const char* op, ReduceKind kind, const at::Tensor& self, const Axes& axes,
                     const at::Tensor& out) {
  if (C10_UNLIKELY(self.is_complex() && out.is_complex() && kind == ReduceKind::kAdd))
    return LowerAccumulate(op, kind, FloatView(self), axes, at::view_as_real(out));
  if (EmptyCase(self, out, kind == ReduceKind::kMul ? 1 : 0)) return;
  at::ScalarType rt = out.scalar_type();
  Lowering l(op);
  int x = l.b().ConvertIfNeeded(l.Input(self, rt), ToDType(OpMath(rt)));
  OutputReduced(l, ReduceAlong(l, x, axes, kind), out);
  l.Run();
}

// ATen's CPU mean: the sum in the result's opmath type, divided by the count, rounded once.
void LowerMean(const at::Tensor& self, const Axes& axes, const at::Tensor& out) {
  if (C10_UNLIKELY(self.is_complex() && out.is_complex())) return LowerMean(FloatView(self), axes, at::view_as_real(out));
  if (EmptyCase(self, out, std::numeric_limits<double>::quiet_NaN())) return;
  at::ScalarType rt = out.scalar_type();
  Lowering l("aten::mean");
  Builder& b = l.b();
  int x = b.ConvertIfNeeded(l.Input(self, rt), ToDType(OpMath(rt)));
  int s = ReduceAlong(l, x, axes, ReduceKind::kAdd);
  int n = b.ScalarLike(static_cast<double>(ReducedCount(self, axes)), s);
  OutputReduced(l, b.Binary(OpCode::kDivide, s, n), out);
  l.Run();
}

// PyTorch's CPU has no max/min kernels for uint32/uint64 (and the executor compares them as
// signed): refuse them the way the CPU does rather than risk a wrong answer.
void CheckOrderedDType(const char* op, const at::Tensor& self) {
  at::ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t != at::kUInt32 && t != at::kUInt64, "\"", op, "\" not implemented for '", t, "'");
}

// amax / amin / max() / min(): exact in the input dtype; NaN propagates (Reduce semantics).
void LowerExtremum(const char* op, ReduceKind kind, const at::Tensor& self, const Axes& axes,
                   const at::Tensor& out) {
  CheckOrderedDType(op, self);
  if (out.numel() == 0) return;  // an empty reduced dim was rejected by the caller
  Lowering l(op);
  OutputReduced(l, ReduceAlong(l, l.Input(self), axes, kind), out);
  l.Run();
}

// The index of the first max/min (a NaN counts as the extremum) along `dim`, or over the
// flattened tensor when dim is None.
int ArgAlong(Lowering& l, const at::Tensor& self, std::optional<int64_t> dim, ReduceKind kind) {
  int x = l.Input(self);
  if (!dim.has_value() || self.dim() == 0) {
    x = l.b().Reshape(x, {self.numel()});
    return l.b().ArgReduce(x, 0, kind);
  }
  return l.b().ArgReduce(x, at::maybe_wrap_dim(*dim, self.dim()), kind);
}

// ---- sum / mean / prod -------------------------------------------------------------------------
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  StructuredOutputs<at::meta::structured_sum_dim_IntList> s({&out});
  s.meta(self, dim, keepdim, dtype);
  LowerAccumulate("aten::sum", ReduceKind::kAdd, self, ReduceAxes(self, dim), out);
  return out;
}
at::Tensor sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  StructuredOutputs<at::meta::structured_sum_dim_IntList> s;
  s.meta(self, dim, keepdim, dtype);
  LowerAccumulate("aten::sum", ReduceKind::kAdd, self, ReduceAxes(self, dim), s.out(0));
  return s.out(0);
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  StructuredOutputs<at::meta::structured_mean_dim> s({&out});
  s.meta(self, dim, keepdim, dtype);
  LowerMean(self, ReduceAxes(self, dim), out);
  return out;
}
at::Tensor mean(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  StructuredOutputs<at::meta::structured_mean_dim> s;
  s.meta(self, dim, keepdim, dtype);
  LowerMean(self, ReduceAxes(self, dim), s.out(0));
  return s.out(0);
}

at::Tensor& prod_int_out(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
                         at::Tensor& out) {
  StructuredOutputs<at::meta::structured_prod_dim_int> s({&out});
  s.meta(self, dim, keepdim, dtype);
  LowerAccumulate("aten::prod", ReduceKind::kMul, self, ReduceAxes(self, at::IntArrayRef(dim)), out);
  return out;
}
at::Tensor prod_int(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  StructuredOutputs<at::meta::structured_prod_dim_int> s;
  s.meta(self, dim, keepdim, dtype);
  LowerAccumulate("aten::prod", ReduceKind::kMul, self, ReduceAxes(self, at::IntArrayRef(dim)), s.out(0));
  return s.out(0);
}
at::Tensor prod(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  // Not structured: ATen's get_dtype_from_self (integers and bool accumulate in int64).
  at::ScalarType rt = dtype.value_or(at::isIntegralType(self.scalar_type(), /*includeBool=*/true)
                                         ? at::kLong : self.scalar_type());
  at::Tensor out = EmptyLike({}, rt, self);
  LowerAccumulate("aten::prod", ReduceKind::kMul, self, ReduceAxes(self, std::nullopt), out);
  return out;
}

// ---- amax / amin / max / min -----------------------------------------------------------------
#define TPU_AMAX(name, KIND)                                                                        \
  at::Tensor& name##_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) { \
    StructuredOutputs<at::meta::structured_##name> s({&out});                                       \
    s.meta(self, dim, keepdim);                                                                     \
    LowerExtremum("aten::" #name, KIND, self, ReduceAxes(self, dim), out);                          \
    return out;                                                                                     \
  }                                                                                                 \
  at::Tensor name(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {                      \
    StructuredOutputs<at::meta::structured_##name> s;                                               \
    s.meta(self, dim, keepdim);                                                                     \
    LowerExtremum("aten::" #name, KIND, self, ReduceAxes(self, dim), s.out(0));                     \
    return s.out(0);                                                                                \
  }
TPU_AMAX(amax, ReduceKind::kMax)
TPU_AMAX(amin, ReduceKind::kMin)

// aminmax: both extrema in one program (dim=None reduces everything).
void LowerAminmax(const at::Tensor& self, std::optional<int64_t> dim, const at::Tensor& min, const at::Tensor& max) {
  CheckOrderedDType("aminmax", self);
  if (min.numel() == 0) return;
  Dims axes = dim.has_value() ? ReduceAxes(self, at::IntArrayRef(*dim)) : ReduceAxes(self, std::nullopt);
  Lowering l("aten::aminmax");
  int x = l.Input(self);
  OutputReduced(l, ReduceAlong(l, x, axes, ReduceKind::kMin), min);
  OutputReduced(l, ReduceAlong(l, x, axes, ReduceKind::kMax), max);
  l.Run();
}
std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& min, at::Tensor& max) {
  StructuredOutputs<at::meta::structured_aminmax, 2> s({&min, &max});
  s.meta(self, dim, keepdim);
  LowerAminmax(self, dim, min, max);
  return {min, max};
}
std::tuple<at::Tensor, at::Tensor> aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  StructuredOutputs<at::meta::structured_aminmax, 2> s;
  s.meta(self, dim, keepdim);
  LowerAminmax(self, dim, s.out(0), s.out(1));
  return {s.out(0), s.out(1)};
}

void CheckNonEmptyFull(const char* name, const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, name, "(): Expected reduction dim to be specified for input.numel() == 0. "
              "Specify the reduction dim with the 'dim' argument.");
}

at::Tensor& FullExtremumOut(const char* name, const char* op, ReduceKind kind, const at::Tensor& self,
                            at::Tensor& out) {
  TORCH_CHECK(self.device() == out.device(), name, "(): expected out on ", self.device(), " but got ", out.device());
  TORCH_CHECK(at::canCast(self.scalar_type(), out.scalar_type()), "result type ", self.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  CheckNonEmptyFull(name, self);
  ResizeOut(out, {});
  LowerExtremum(op, kind, self, ReduceAxes(self, std::nullopt), out);
  return out;
}
at::Tensor max(const at::Tensor& self) {
  CheckNonEmptyFull("max", self);
  at::Tensor out = EmptyLike({}, self.scalar_type(), self);
  LowerExtremum("aten::max", ReduceKind::kMax, self, ReduceAxes(self, std::nullopt), out);
  return out;
}
at::Tensor min(const at::Tensor& self) {
  CheckNonEmptyFull("min", self);
  at::Tensor out = EmptyLike({}, self.scalar_type(), self);
  LowerExtremum("aten::min", ReduceKind::kMin, self, ReduceAxes(self, std::nullopt), out);
  return out;
}
at::Tensor& max_unary_out(const at::Tensor& self, at::Tensor& out) {
  return FullExtremumOut("max", "aten::max", ReduceKind::kMax, self, out);
}
at::Tensor& min_unary_out(const at::Tensor& self, at::Tensor& out) {
  return FullExtremumOut("min", "aten::min", ReduceKind::kMin, self, out);
}

// max.dim / min.dim: values by Reduce, indices by ArgReduce; both treat the first NaN as the
// extremum, so a NaN value comes with its index.
void LowerExtremumDim(const char* op, ReduceKind kind, const at::Tensor& self, int64_t dim,
                      const at::Tensor& values, const at::Tensor& indices) {
  CheckOrderedDType(op, self);
  if (values.numel() == 0) return;
  Lowering l(op);
  OutputReduced(l, ReduceAlong(l, l.Input(self), ReduceAxes(self, at::IntArrayRef(dim)), kind), values);
  OutputReduced(l, ArgAlong(l, self, dim, kind), indices);
  l.Run();
}

#define TPU_MAX_DIM(name, KIND)                                                                     \
  std::tuple<at::Tensor&, at::Tensor&> name##_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, \
                                                      at::Tensor& values, at::Tensor& indices) {      \
    StructuredOutputs<at::meta::structured_##name##_dim, 2> s({&values, &indices});                 \
    auto pre = s.meta(self, dim, keepdim);                                                          \
    LowerExtremumDim("aten::" #name, KIND, self, pre.dim, values, indices);                         \
    return {values, indices};                                                                       \
  }                                                                                                 \
  std::tuple<at::Tensor, at::Tensor> name##_dim(const at::Tensor& self, int64_t dim, bool keepdim) { \
    StructuredOutputs<at::meta::structured_##name##_dim, 2> s;                                      \
    auto pre = s.meta(self, dim, keepdim);                                                          \
    LowerExtremumDim("aten::" #name, KIND, self, pre.dim, s.out(0), s.out(1));                      \
    return {s.out(0), s.out(1)};                                                                    \
  }
TPU_MAX_DIM(max, ReduceKind::kMax)
TPU_MAX_DIM(min, ReduceKind::kMin)

// ---- argmax / argmin ---------------------------------------------------------------------------
void LowerArg(const char* name, const char* op, ReduceKind kind, const at::Tensor& self,
              std::optional<int64_t> dim, const at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool, name, "(): does not support bool input");
  CheckOrderedDType(op, self);
  if (out.numel() == 0) return;
  Lowering l(op);
  OutputReduced(l, ArgAlong(l, self, dim, kind), out);
  l.Run();
}

#define TPU_ARG(name, KIND)                                                                          \
  at::Tensor& name##_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) { \
    StructuredOutputs<at::meta::structured_##name> s({&out});                                       \
    s.meta(self, dim, keepdim);                                                                     \
    LowerArg(#name, "aten::" #name, KIND, self, dim, out);                                                 \
    return out;                                                                                     \
  }                                                                                                 \
  at::Tensor name(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {               \
    StructuredOutputs<at::meta::structured_##name> s;                                               \
    s.meta(self, dim, keepdim);                                                                     \
    LowerArg(#name, "aten::" #name, KIND, self, dim, s.out(0));                                            \
    return s.out(0);                                                                                \
  }
TPU_ARG(argmax, ReduceKind::kMax)
TPU_ARG(argmin, ReduceKind::kMin)

// ---- any / all / count_nonzero ------------------------------------------------------------------
// (x != 0) reduced with or/and; the result is bool, or uint8 for uint8 inputs (ATen's rule).
void LowerAnyAll(const char* op, bool is_any, const at::Tensor& self, const Axes& axes, const at::Tensor& out) {
  if (EmptyCase(self, out, is_any ? 0 : 1)) return;
  Lowering l(op);
  Builder& b = l.b();
  int x = l.Input(self);
  if (self.scalar_type() != at::kBool) x = b.Compare(CompareDirection::kNE, x, b.ScalarLike(0, x));
  OutputReduced(l, ReduceAlong(l, x, axes, is_any ? ReduceKind::kOr : ReduceKind::kAnd), out);
  l.Run();
}

#define TPU_ANY_ALL(name, IS_ANY)                                                                     \
  at::Tensor& name##_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) { \
    StructuredOutputs<at::meta::structured_##name##_dims> s({&out});                                \
    s.meta(self, dim, keepdim);                                                                     \
    LowerAnyAll("aten::" #name, IS_ANY, self, ReduceAxes(self, dim, /*empty_means_all=*/false), out); \
    return out;                                                                                     \
  }                                                                                                 \
  at::Tensor name##_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {        \
    StructuredOutputs<at::meta::structured_##name##_dims> s;                                        \
    s.meta(self, dim, keepdim);                                                                     \
    LowerAnyAll("aten::" #name, IS_ANY, self, ReduceAxes(self, dim, false), s.out(0));               \
    return s.out(0);                                                                                \
  }                                                                                                 \
  at::Tensor& name##_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {  \
    StructuredOutputs<at::meta::structured_##name##_dim> s({&out});                                 \
    s.meta(self, dim, keepdim);                                                                     \
    LowerAnyAll("aten::" #name, IS_ANY, self, ReduceAxes(self, at::IntArrayRef(dim)), out);          \
    return out;                                                                                     \
  }                                                                                                 \
  at::Tensor name##_dim(const at::Tensor& self, int64_t dim, bool keepdim) {                        \
    StructuredOutputs<at::meta::structured_##name##_dim> s;                                         \
    s.meta(self, dim, keepdim);                                                                     \
    LowerAnyAll("aten::" #name, IS_ANY, self, ReduceAxes(self, at::IntArrayRef(dim)), s.out(0));     \
    return s.out(0);                                                                                \
  }                                                                                                 \
  at::Tensor& name##_all_out(const at::Tensor& self, at::Tensor& out) {                              \
    StructuredOutputs<at::meta::structured_##name> s({&out});                                       \
    s.meta(self);                                                                                   \
    LowerAnyAll("aten::" #name, IS_ANY, self, ReduceAxes(self, std::nullopt), out);                  \
    return out;                                                                                     \
  }                                                                                                 \
  at::Tensor name##_all(const at::Tensor& self) {                                                   \
    StructuredOutputs<at::meta::structured_##name> s;                                               \
    s.meta(self);                                                                                   \
    LowerAnyAll("aten::" #name, IS_ANY, self, ReduceAxes(self, std::nullopt), s.out(0));             \
    return s.out(0);                                                                                \
  }
TPU_ANY_ALL(any, true)
TPU_ANY_ALL(all, false)

at::Tensor count_nonzero(const at::Tensor& self, at::IntArrayRef dim) {
  Axes axes = ReduceAxes(self, dim);  // [] counts over every dim
  at::Tensor out = EmptyLike(ReducedShape(self, axes, /*keepdim=*/false), at::kLong, self);
  if (EmptyCase(self, out, 0)) return out;
  Lowering l("aten::count_nonzero");
  Builder& b = l.b();
  int x = l.Input(self);
  int nz = b.Convert(b.Compare(CompareDirection::kNE, x, b.ScalarLike(0, x)), DType::kI64);
  OutputReduced(l, ReduceAlong(l, nz, axes, ReduceKind::kAdd), out);
  l.Run();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", sum);
  m.impl("sum.IntList_out", sum_out);
  m.impl("mean.dim", mean);
  m.impl("mean.out", mean_out);
  m.impl("prod", prod);
  m.impl("prod.dim_int", prod_int);
  m.impl("prod.int_out", prod_int_out);
  m.impl("amax", amax);
  m.impl("amax.out", amax_out);
  m.impl("amin", amin);
  m.impl("amin.out", amin_out);
  m.impl("aminmax", aminmax);
  m.impl("aminmax.out", aminmax_out);
  m.impl("max", max);
  m.impl("max.unary_out", max_unary_out);
  m.impl("min", min);
  m.impl("min.unary_out", min_unary_out);
  m.impl("max.dim", max_dim);
  m.impl("max.dim_max", max_dim_out);
  m.impl("min.dim", min_dim);
  m.impl("min.dim_min", min_dim_out);
  m.impl("argmax", argmax);
  m.impl("argmax.out", argmax_out);
  m.impl("argmin", argmin);
  m.impl("argmin.out", argmin_out);
  m.impl("any", any_all);
  m.impl("any.all_out", any_all_out);
  m.impl("any.dim", any_dim);
  m.impl("any.out", any_dim_out);
  m.impl("any.dims", any_dims);
  m.impl("any.dims_out", any_dims_out);
  m.impl("all", all_all);
  m.impl("all.all_out", all_all_out);
  m.impl("all.dim", all_dim);
  m.impl("all.out", all_dim_out);
  m.impl("all.dims", all_dims);
  m.impl("all.dims_out", all_dims_out);
  m.impl("count_nonzero.dim_IntList", count_nonzero);
}

}  // namespace tpu::torch_bridge
