// Pointwise ops with bounds, weights or masks: clamp (and clamp_min/clamp_max), lerp, addcmul,
// addcdiv, masked_fill_ and xlogy. Functional, in-place and out= forms where ATen has them.
#include <torch/library.h>

#include "torch/lower/pointwise_expr.h"

namespace tpu::torch_bridge {
namespace {

using V = ValueList;

// ---- clamp -----------------------------------------------------------------------------------
// min(max(x, lo), hi) with NaN-propagating max/min, as ATen's vectorized CPU kernels: a NaN in x or
// in a bound gives NaN, and lo > hi gives hi. The bounds take part in type promotion.
// `number_bounds`: the bounds are Python numbers, and ATen then wants out= of the result's dtype.
at::Tensor ClampImpl(const char* op, const at::Tensor& self, const at::Tensor* lo,
                     const at::Tensor* hi, OutArg out, bool number_bounds) {
  TORCH_CHECK(lo || hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  if (number_bounds) {
    at::native::ResultTypeState state = at::native::update_result_type_state(self, {});
    for (const at::Tensor* b : {lo, hi})
      if (b) state = at::native::update_result_type_state(*b, state);
    at::ScalarType result = at::native::result_type(state);
    if (out.inplace)  // ATen's wording for this case names the type as "long int"
      TORCH_CHECK(at::canCast(result, self.scalar_type()), "result type ", result,
                  " can't be cast to the desired output type ", self.dtype());
    CheckOutDType(out, result);
  }
  if (lo && hi) {
    return LowerElementwise(op, {self, *lo, *hi}, out, ResultKind::kCommon,
                            [](Lowering& l, const V& v, DType) {
                              Expr e(l, v[0]);
                              return e.Min(e.Max(v[0], v[1]), v[2]);
                            });
  }
  if (lo) {
    return LowerElementwise(
        op, {self, *lo}, out, ResultKind::kCommon,
        [](Lowering& l, const V& v, DType) { return Expr(l, v[0]).Max(v[0], v[1]); });
  }
  return LowerElementwise(
      op, {self, *hi}, out, ResultKind::kCommon,
      [](Lowering& l, const V& v, DType) { return Expr(l, v[0]).Min(v[0], v[1]); });
}

// Optional bounds as tensors: a Python number becomes a wrapped number (promotes like one).
struct Bounds {
  at::Tensor lo, hi;
  Bounds(const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max) {
    if (min.has_value()) lo = WrapScalar(*min);
    if (max.has_value()) hi = WrapScalar(*max);
  }
  Bounds(const std::optional<at::Tensor>& min, const std::optional<at::Tensor>& max) {
    if (min.has_value() && min->defined()) lo = *min;
    if (max.has_value() && max->defined()) hi = *max;
  }
  const at::Tensor* min() const { return lo.defined() ? &lo : nullptr; }
  const at::Tensor* max() const { return hi.defined() ? &hi : nullptr; }
};

using OptS = std::optional<at::Scalar>;
using OptT = std::optional<at::Tensor>;
at::Tensor clamp(const at::Tensor& s, const OptS& lo, const OptS& hi) {
  Bounds b(lo, hi);
  return ClampImpl("aten::clamp", s, b.min(), b.max(), Functional(), true);
}
at::Tensor& clamp_(at::Tensor& s, const OptS& lo, const OptS& hi) {
  Bounds b(lo, hi);
  ClampImpl("aten::clamp", s, b.min(), b.max(), Inplace(s), true);
  return s;
}
at::Tensor& clamp_out(const at::Tensor& s, const OptS& lo, const OptS& hi, at::Tensor& out) {
  Bounds b(lo, hi);
  ClampImpl("aten::clamp", s, b.min(), b.max(), Out(out), true);
  return out;
}
at::Tensor clamp_t(const at::Tensor& s, const OptT& lo, const OptT& hi) {
  Bounds b(lo, hi);
  return ClampImpl("aten::clamp", s, b.min(), b.max(), Functional(), false);
}
at::Tensor& clamp_t_(at::Tensor& s, const OptT& lo, const OptT& hi) {
  Bounds b(lo, hi);
  ClampImpl("aten::clamp", s, b.min(), b.max(), Inplace(s), false);
  return s;
}
at::Tensor& clamp_t_out(const at::Tensor& s, const OptT& lo, const OptT& hi, at::Tensor& out) {
  Bounds b(lo, hi);
  ClampImpl("aten::clamp", s, b.min(), b.max(), Out(out), false);
  return out;
}

// clamp_min / clamp_max, Scalar and Tensor bounds.
#define TPU_CLAMP_ONE(name, LO, HI)                                                     \
  at::Tensor name(const at::Tensor& s, const at::Scalar& v) {                           \
    at::Tensor w = WrapScalar(v);                                                       \
    return ClampImpl("aten::" #name, s, LO, HI, Functional(), true);                    \
  }                                                                                     \
  at::Tensor& name##_(at::Tensor& s, const at::Scalar& v) {                             \
    at::Tensor w = WrapScalar(v);                                                       \
    ClampImpl("aten::" #name, s, LO, HI, Inplace(s), true);                             \
    return s;                                                                           \
  }                                                                                     \
  at::Tensor& name##_out(const at::Tensor& s, const at::Scalar& v, at::Tensor& out) {   \
    at::Tensor w = WrapScalar(v);                                                       \
    ClampImpl("aten::" #name, s, LO, HI, Out(out), true);                               \
    return out;                                                                         \
  }                                                                                     \
  at::Tensor name##_t(const at::Tensor& s, const at::Tensor& w) {                       \
    return ClampImpl("aten::" #name, s, LO, HI, Functional(), false);                   \
  }                                                                                     \
  at::Tensor& name##_t_(at::Tensor& s, const at::Tensor& w) {                           \
    ClampImpl("aten::" #name, s, LO, HI, Inplace(s), false);                            \
    return s;                                                                           \
  }                                                                                     \
  at::Tensor& name##_t_out(const at::Tensor& s, const at::Tensor& w, at::Tensor& out) { \
    ClampImpl("aten::" #name, s, LO, HI, Out(out), false);                              \
    return out;                                                                         \
  }
TPU_CLAMP_ONE(clamp_min, &w, nullptr)
TPU_CLAMP_ONE(clamp_max, nullptr, &w)
#undef TPU_CLAMP_ONE

// ---- lerp ------------------------------------------------------------------------------------
// ATen's formula, chosen by |weight| so both ends are exact:
//   |w| < 0.5 ? self + w * (end - self) : end - (end - self) * (1 - w)
int Lerp(Expr& e, int self, int end, int w) {
  int diff = e.Sub(end, self);
  int small = e.Lt(e.Abs(w), e.K(0.5));
  return e.Select(small, e.Add(self, e.Mul(w, diff)), e.Sub(end, e.Mul(diff, e.Sub(e.K(1), w))));
}

void CheckLerp(const at::Tensor& self, const at::Tensor& end, const at::Tensor* weight) {
  TORCH_CHECK(self.dtype() == end.dtype(), "expected dtype ", self.dtype(),
              " for `end` but got dtype ", end.dtype());
  if (weight)
    TORCH_CHECK(self.dtype() == weight->dtype(), "expected dtype ", self.dtype(),
                " for `weight` but got dtype ", weight->dtype());
  CheckKernelDType(at::isFloatingType(self.scalar_type()), "lerp_tpu", self.scalar_type());
}

at::Tensor LerpScalar(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight,
                      OutArg out) {
  CheckLerp(self, end, nullptr);
  return LowerElementwise("aten::lerp", {self, end}, out, ResultKind::kCommon,
                          [&](Lowering& l, const V& v, DType) {
                            Expr e(l, v[0]);
                            return Lerp(e, v[0], v[1], e.P(weight));
                          });
}
at::Tensor LerpTensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight,
                      OutArg out) {
  CheckLerp(self, end, &weight);
  CheckOutDType(out, self.scalar_type());  // (lerp.Scalar_out casts, lerp.Tensor_out does not)
  return LowerElementwise("aten::lerp", {self, end, weight}, out, ResultKind::kCommon,
                          [](Lowering& l, const V& v, DType) {
                            Expr e(l, v[0]);
                            return Lerp(e, v[0], v[1], v[2]);
                          });
}
at::Tensor lerp_s(const at::Tensor& s, const at::Tensor& e, const at::Scalar& w) {
  return LerpScalar(s, e, w, Functional());
}
at::Tensor& lerp_s_(at::Tensor& s, const at::Tensor& e, const at::Scalar& w) {
  LerpScalar(s, e, w, Inplace(s));
  return s;
}
at::Tensor& lerp_s_out(const at::Tensor& s, const at::Tensor& e, const at::Scalar& w,
                       at::Tensor& out) {
  LerpScalar(s, e, w, Out(out));
  return out;
}
at::Tensor lerp_t(const at::Tensor& s, const at::Tensor& e, const at::Tensor& w) {
  return LerpTensor(s, e, w, Functional());
}
at::Tensor& lerp_t_(at::Tensor& s, const at::Tensor& e, const at::Tensor& w) {
  LerpTensor(s, e, w, Inplace(s));
  return s;
}
at::Tensor& lerp_t_out(const at::Tensor& s, const at::Tensor& e, const at::Tensor& w,
                       at::Tensor& out) {
  LerpTensor(s, e, w, Out(out));
  return out;
}

// ---- addcmul / addcdiv -----------------------------------------------------------------------
// self + value * t1 * t2 and self + value * t1 / t2, evaluated left to right like ATen's kernel;
// value is cast to the compute dtype first (0.5 on integers is 0).
at::Tensor Addc(bool div, const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                const at::Scalar& value, OutArg out) {
  const char* op = div ? "aten::addcdiv" : "aten::addcmul";
  if (div) {
    TORCH_CHECK(
        !(at::isIntegralType(t1.scalar_type(), true) && at::isIntegralType(t2.scalar_type(), true)),
        "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
        "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be "
        "implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
        "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
        "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
        "for all dtypes.");
  }
  return LowerElementwise(
      op, {self, t1, t2}, out, ResultKind::kCommon, [&](Lowering& l, const V& v, DType t) {
        CheckKernelDType(t != DType::kBool, div ? "addcdiv_tpu" : "addcmul_tpu", at::kBool);
        Expr e(l, v[0]);
        int scaled = e.Mul(e.P(value), v[1]);
        return e.Add(v[0], div ? e.Div(scaled, v[2]) : e.Mul(scaled, v[2]));
      });
}
#define TPU_ADDC(name, DIV)                                                             \
  at::Tensor name(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b,        \
                  const at::Scalar& v) {                                                \
    return Addc(DIV, s, a, b, v, Functional());                                         \
  }                                                                                     \
  at::Tensor& name##_(at::Tensor& s, const at::Tensor& a, const at::Tensor& b,          \
                      const at::Scalar& v) {                                            \
    Addc(DIV, s, a, b, v, Inplace(s));                                                  \
    return s;                                                                           \
  }                                                                                     \
  at::Tensor& name##_out(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b, \
                         const at::Scalar& v, at::Tensor& out) {                        \
    Addc(DIV, s, a, b, v, Out(out));                                                    \
    return out;                                                                         \
  }
TPU_ADDC(addcmul, false)
TPU_ADDC(addcdiv, true)
#undef TPU_ADDC

// ---- masked_fill_ ----------------------------------------------------------------------------
// `value` is a host number, or a 0-dim tensor: a CPU one is read here (like ATen), a device one
// stays on the device and is converted in the program.
at::Tensor& MaskedFill(at::Tensor& self, const at::Tensor& mask, const at::Scalar* value,
                       const at::Tensor* value_t) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ", mask.dtype());
  at::ScalarType st = self.scalar_type();
  std::optional<at::Scalar> host_value;
  if (value) host_value = *value;
  if (value_t) {
    TORCH_CHECK(value_t->dim() == 0,
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
                value_t->dim(), " dimension(s).");
    if (value_t->device().is_cpu()) host_value = value_t->item();
  }
  // ATen converts the value with an overflow check ("value cannot be converted to type ...").
  if (host_value) {
    AT_DISPATCH_ALL_TYPES_AND3(at::kBool, at::kHalf, at::kBFloat16, st, "masked_fill_",
                               [&] { (void)host_value->to<scalar_t>(); });
  }
  at::DimVector shape = at::infer_size_dimvector(self.sizes(), mask.sizes());
  TORCH_CHECK(shape == self.sizes(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", shape);
  // ATen still fills an expanded self (deprecated): an element shared by several positions is
  // filled when any of them is masked. Fill the underlying elements with the mask or-reduced
  // over the expanded dims.
  std::vector<int64_t> expanded;
  at::DimVector target_sizes(self.sizes());
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.stride(d) == 0 && self.size(d) > 1) {
      expanded.push_back(d);
      target_sizes[d] = 1;
    }
  }
  at::Tensor target = self;
  if (!expanded.empty()) {
    TORCH_WARN(
        "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before "
        "performing this operation. This also applies to advanced indexing e.g. tensor[mask] = "
        "scalar");
    target = self.as_strided(target_sizes, self.strides(), self.storage_offset());
  }
  PrepareOut("aten::masked_fill_", Inplace(target), target.sizes(), st,
             target);  // other overlaps are refused
  if (self.numel() == 0) return self;
  Lowering l("aten::masked_fill_");
  Builder& b = l.b();
  Dims dims = ToDims(target.sizes());
  int x = l.Input(target);
  int m = b.BroadcastTo(l.Input(mask), ToDims(self.sizes()));
  if (!expanded.empty())
    m = b.Reshape(b.Reduce(m, b.Constant(0, DType::kBool), expanded, ReduceKind::kOr), dims);
  int v = host_value ? l.Scalar(*host_value, st) : l.Input(*value_t, st);
  l.Output(b.Select(m, b.BroadcastTo(v, dims), x), target);
  l.Run();
  return self;
}
at::Tensor& masked_fill_s_(at::Tensor& s, const at::Tensor& m, const at::Scalar& v) {
  return MaskedFill(s, m, &v, nullptr);
}
at::Tensor& masked_fill_t_(at::Tensor& s, const at::Tensor& m, const at::Tensor& v) {
  return MaskedFill(s, m, nullptr, &v);
}

// ---- xlogy -----------------------------------------------------------------------------------
// ATen's CPU kernel: NaN where y is NaN, else 0 where x == 0, else x * log(y). For bfloat16/half it
// computes in the storage dtype, so log(y) is rounded to it before the product; so here too.
// The Scalar forms are composite (a wrapped number through xlogy.Tensor).
at::Tensor XlogyImpl(const at::Tensor& self, const at::Tensor& other, OutArg out) {
  const at::ScalarType storage = ResultDType(ResultKind::kFloat, at::result_type(self, other));
  return LowerElementwise("aten::xlogy", {self, other}, out, ResultKind::kFloat,
                          [storage](Lowering& l, const V& v, DType) {
                            Expr e(l, v[0]);
                            Builder& b = e.b();
                            int log_y = e.Log(v[1]);
                            if (OpMath(storage) != storage)
                              log_y = b.Convert(b.Convert(log_y, ToDType(storage)), e.dtype());
                            int r = e.Select(e.Eq(v[0], e.K(0)), e.K(0), e.Mul(v[0], log_y));
                            return e.Select(e.IsNan(v[1]), v[1], r);
                          });
}
at::Tensor xlogy(const at::Tensor& s, const at::Tensor& o) { return XlogyImpl(s, o, Functional()); }
at::Tensor& xlogy_(at::Tensor& s, const at::Tensor& o) {
  XlogyImpl(s, o, Inplace(s));
  return s;
}
at::Tensor& xlogy_out(const at::Tensor& s, const at::Tensor& o, at::Tensor& out) {
  XlogyImpl(s, o, Out(out));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("clamp", clamp);
  m.impl("clamp_", clamp_);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp.Tensor", clamp_t);
  m.impl("clamp_.Tensor", clamp_t_);
  m.impl("clamp.Tensor_out", clamp_t_out);
  m.impl("clamp_min", clamp_min);
  m.impl("clamp_min_", clamp_min_);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_min.Tensor", clamp_min_t);
  m.impl("clamp_min_.Tensor", clamp_min_t_);
  m.impl("clamp_min.Tensor_out", clamp_min_t_out);
  m.impl("clamp_max", clamp_max);
  m.impl("clamp_max_", clamp_max_);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("clamp_max.Tensor", clamp_max_t);
  m.impl("clamp_max_.Tensor", clamp_max_t_);
  m.impl("clamp_max.Tensor_out", clamp_max_t_out);
  m.impl("lerp.Scalar", lerp_s);
  m.impl("lerp_.Scalar", lerp_s_);
  m.impl("lerp.Scalar_out", lerp_s_out);
  m.impl("lerp.Tensor", lerp_t);
  m.impl("lerp_.Tensor", lerp_t_);
  m.impl("lerp.Tensor_out", lerp_t_out);
  m.impl("addcmul", addcmul);
  m.impl("addcmul_", addcmul_);
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv", addcdiv);
  m.impl("addcdiv_", addcdiv_);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("masked_fill_.Scalar", masked_fill_s_);
  m.impl("masked_fill_.Tensor", masked_fill_t_);
  m.impl("xlogy.Tensor", xlogy);
  m.impl("xlogy_.Tensor", xlogy_);
  m.impl("xlogy.OutTensor", xlogy_out);
}

}  // namespace tpu::torch_bridge
