// _foreach_* ops (what Adam/AdamW/SGD and clip_grad_norm_ call): one program per call covering
// every tensor of the list, instead of one program per tensor. Lists whose tensors are not all
// floating-point tensors on one tpu device (e.g. CPU step counters) take ATen's per-tensor path.
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_maximum_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <torch/library.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <variant>

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {
namespace {

// An extra operand of tensor i: a tensor (list element or shared scalar tensor) or a number.
using Arg = std::variant<at::Tensor, at::Scalar>;
using ArgsFn = std::function<void(size_t i, std::vector<Arg>&)>;
using MathFn = std::function<int(Builder&, const std::vector<int>&)>;

bool OnOneDevice(at::TensorList self, const std::vector<Arg>& first_args, const ArgsFn& args) {
  if (self.empty()) return false;
  // One program reads every input before writing: when list entries share storage (the same
  // tensor twice, or self[i] read as another entry's operand), ATen's tensor-by-tensor order
  // gives different results, so such lists take the per-tensor path.
  std::unordered_map<const void*, size_t> owner;  // storage -> index in self
  for (size_t i = 0; i < self.size(); ++i)
    if (!owner.emplace(self[i].storage().unsafeGetStorageImpl(), i).second) return false;
  c10::Device dev = self[0].device();
  if (dev.type() != c10::DeviceType::PrivateUse1) return false;
  std::vector<Arg> extra;
  for (size_t i = 0; i < self.size(); ++i) {
    const at::Tensor& t = self[i];
    if (t.device() != dev || !at::isFloatingType(t.scalar_type())) return false;
    extra.clear();
    args(i, extra);
    for (const Arg& a : extra) {
      if (const auto* x = std::get_if<at::Tensor>(&a)) {
        auto it = owner.find(x->storage().unsafeGetStorageImpl());
        if (it != owner.end() && it->second != i) return false;
        bool cpu_scalar = IsCpuScalar(*x);
        if (!cpu_scalar && (x->device() != dev || x->scalar_type() != t.scalar_type())) return false;
        if (!cpu_scalar && x->sizes() != t.sizes() && x->dim() != 0) return false;
      }
    }
  }
  (void)first_args;
  return true;
}

// Lowers fn over every tensor of `self` as one program. Results go to `self` (in-place) or to
// new tensors of self's dtype, which are returned.
std::vector<at::Tensor> Lower(const char* op, at::TensorList self, bool inplace, const ArgsFn& args, const MathFn& fn) {
  std::vector<at::Tensor> outs;
  outs.reserve(self.size());
  Lowering l(op);
  std::vector<Arg> extra;
  std::vector<int> vals;
  for (size_t i = 0; i < self.size(); ++i) {
    const at::Tensor& t = self[i];
    at::ScalarType compute = OpMath(t.scalar_type());
    Dims dims = ToDims(t.sizes());
    vals.clear();
    vals.push_back(l.Input(t, compute));
    extra.clear();
    args(i, extra);
    for (const Arg& a : extra) {
      int v;
      if (const auto* x = std::get_if<at::Tensor>(&a)) v = IsCpuScalar(*x) ? l.Scalar(x->item(), compute) : l.Input(*x, compute);
      else v = l.Scalar(std::get<at::Scalar>(a), compute);
      vals.push_back(l.b().BroadcastTo(v, dims));
    }
    int r = fn(l.b(), vals);
    at::Tensor out = inplace ? t : at::empty_like(t);
    if (out.numel() > 0) l.Output(r, out);
    outs.push_back(out);
  }
  l.Run();
  return outs;
}

ArgsFn NoArgs() {
  return [](size_t, std::vector<Arg>&) {};
}
ArgsFn ScalarArg(const at::Scalar& s) {
  return [s](size_t, std::vector<Arg>& out) { out.emplace_back(s); };
}
ArgsFn ScalarListArg(at::ArrayRef<at::Scalar> s, size_t n) {
  TORCH_CHECK(s.size() == n, "Tensor list must have same number of elements as scalar list.");
  std::vector<at::Scalar> v(s.begin(), s.end());
  return [v](size_t i, std::vector<Arg>& out) { out.emplace_back(v.at(i)); };
}
ArgsFn ListArg(at::TensorList list) {
  std::vector<at::Tensor> v(list.begin(), list.end());
  return [v](size_t i, std::vector<Arg>& out) { out.emplace_back(v.at(i)); };
}
ArgsFn TensorArg(const at::Tensor& t) {
  return [t](size_t, std::vector<Arg>& out) { out.emplace_back(t); };
}
ArgsFn Concat(ArgsFn a, ArgsFn b) {
  return [a, b](size_t i, std::vector<Arg>& out) {
    a(i, out);
    b(i, out);
  };
}

void CheckSizes(const char* op, at::TensorList self, size_t n) {
  TORCH_CHECK(self.size() == n, op, ": tensor lists must have the same number of tensors, got ", self.size(), " and ", n);
}

// ---- math ----------------------------------------------------------------------------------
int AddMath(Builder& b, const std::vector<int>& v, bool sub, bool has_alpha) {
  int y = has_alpha ? b.Binary(OpCode::kMultiply, v[2], v[1]) : v[1];
  return b.Binary(sub ? OpCode::kSubtract : OpCode::kAdd, v[0], y);
}
MathFn Bin(OpCode code) {
  return [code](Builder& b, const std::vector<int>& v) { return b.Binary(code, v[0], v[1]); };
}
MathFn AddFn(bool sub, bool has_alpha) {
  return [sub, has_alpha](Builder& b, const std::vector<int>& v) { return AddMath(b, v, sub, has_alpha); };
}
// PyTorch's lerp: weight < 0.5 ? self + weight * (end - self) : end - (end - self) * (1 - weight)
int LerpMath(Builder& b, const std::vector<int>& v) {
  int diff = b.Binary(OpCode::kSubtract, v[1], v[0]);
  int lo = b.Binary(OpCode::kAdd, v[0], b.Binary(OpCode::kMultiply, v[2], diff));
  int one_minus = b.Binary(OpCode::kSubtract, b.ScalarLike(1, v[2]), v[2]);
  int hi = b.Binary(OpCode::kSubtract, v[1], b.Binary(OpCode::kMultiply, diff, one_minus));
  int small = b.Compare(CompareDirection::kLT, b.Unary(OpCode::kAbs, v[2]), b.ScalarLike(0.5, v[2]));
  return b.Select(small, lo, hi);
}
// self + value * t1 * t2 and self + value * t1 / t2, in PyTorch's CPU evaluation order.
int AddcmulMath(Builder& b, const std::vector<int>& v) {
  return b.Binary(OpCode::kAdd, v[0], b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, v[3], v[1]), v[2]));
}
int AddcdivMath(Builder& b, const std::vector<int>& v) {
  return b.Binary(OpCode::kAdd, v[0], b.Binary(OpCode::kDivide, b.Binary(OpCode::kMultiply, v[3], v[1]), v[2]));
}
MathFn Un(OpCode code) {
  return [code](Builder& b, const std::vector<int>& v) { return b.Unary(code, v[0]); };
}
int ReciprocalMath(Builder& b, const std::vector<int>& v) {
  return b.Binary(OpCode::kDivide, b.ScalarLike(1, v[0]), v[0]);
}

// ---- registration helpers ---------------------------------------------------------------------
#define TPU_FOREACH_INPLACE(fname, opname, ARGS, MATH, SLOW, ...)                  \
  void fname(__VA_ARGS__) {                                                       \
    ArgsFn args = ARGS;                                                           \
    if (!OnOneDevice(self, {}, args)) return SLOW;                                \
    Lower(opname, self, true, args, MATH);                                        \
  }
#define TPU_FOREACH_FUNCTIONAL(fname, opname, ARGS, MATH, SLOW, ...)              \
  std::vector<at::Tensor> fname(__VA_ARGS__) {                                    \
    ArgsFn args = ARGS;                                                           \
    if (!OnOneDevice(self, {}, args)) return SLOW;                                \
    return Lower(opname, self, false, args, MATH);                                \
  }

using TL = at::TensorList;
using SL = at::ArrayRef<at::Scalar>;
using at::native::foreach_tensor_add_list_kernel_slow;
namespace nat = at::native;

// add / sub
TPU_FOREACH_INPLACE(add_scalar_, "aten::_foreach_add_", ScalarArg(s), AddFn(false, false), nat::foreach_tensor_add_scalar_kernel_slow_(self, s), TL self, const at::Scalar& s)
TPU_FOREACH_INPLACE(add_list_, "aten::_foreach_add_", (CheckSizes("_foreach_add_", self, o.size()), Concat(ListArg(o), ScalarArg(a))), AddFn(false, true), nat::foreach_tensor_add_list_kernel_slow_(self, o, a), TL self, TL o, const at::Scalar& a)
TPU_FOREACH_INPLACE(add_slist_, "aten::_foreach_add_", ScalarListArg(s, self.size()), AddFn(false, false), nat::foreach_tensor_add_scalarlist_kernel_slow_(self, s), TL self, SL s)
TPU_FOREACH_INPLACE(add_tensor_, "aten::_foreach_add_", Concat(TensorArg(o), ScalarArg(a)), AddFn(false, true), nat::foreach_tensor_add_tensor_kernel_slow_(self, o, a), TL self, const at::Tensor& o, const at::Scalar& a)
TPU_FOREACH_FUNCTIONAL(add_scalar, "aten::_foreach_add", ScalarArg(s), AddFn(false, false), nat::foreach_tensor_add_scalar_kernel_slow(self, s), TL self, const at::Scalar& s)
TPU_FOREACH_FUNCTIONAL(add_list, "aten::_foreach_add", (CheckSizes("_foreach_add", self, o.size()), Concat(ListArg(o), ScalarArg(a))), AddFn(false, true), nat::foreach_tensor_add_list_kernel_slow(self, o, a), TL self, TL o, const at::Scalar& a)
TPU_FOREACH_FUNCTIONAL(add_slist, "aten::_foreach_add", ScalarListArg(s, self.size()), AddFn(false, false), nat::foreach_tensor_add_scalarlist_kernel_slow(self, s), TL self, SL s)
TPU_FOREACH_FUNCTIONAL(add_tensor, "aten::_foreach_add", Concat(TensorArg(o), ScalarArg(a)), AddFn(false, true), nat::foreach_tensor_add_tensor_kernel_slow(self, o, a), TL self, const at::Tensor& o, const at::Scalar& a)
TPU_FOREACH_INPLACE(sub_scalar_, "aten::_foreach_sub_", ScalarArg(s), AddFn(true, false), nat::foreach_tensor_sub_scalar_kernel_slow_(self, s), TL self, const at::Scalar& s)
TPU_FOREACH_INPLACE(sub_list_, "aten::_foreach_sub_", (CheckSizes("_foreach_sub_", self, o.size()), Concat(ListArg(o), ScalarArg(a))), AddFn(true, true), nat::foreach_tensor_sub_list_kernel_slow_(self, o, a), TL self, TL o, const at::Scalar& a)
TPU_FOREACH_INPLACE(sub_slist_, "aten::_foreach_sub_", ScalarListArg(s, self.size()), AddFn(true, false), nat::foreach_tensor_sub_scalarlist_kernel_slow_(self, s), TL self, SL s)

// mul / div
#define TPU_FOREACH_MULDIV(name, IROP)                                                                                       \
  TPU_FOREACH_INPLACE(name##_scalar_, "aten::_foreach_" #name "_", ScalarArg(s), Bin(IROP), nat::foreach_tensor_##name##_scalar_kernel_slow_(self, s), TL self, const at::Scalar& s) \
  TPU_FOREACH_INPLACE(name##_list_, "aten::_foreach_" #name "_", (CheckSizes("_foreach_" #name "_", self, o.size()), ListArg(o)), Bin(IROP), nat::foreach_tensor_##name##_list_kernel_slow_(self, o), TL self, TL o) \
  TPU_FOREACH_INPLACE(name##_slist_, "aten::_foreach_" #name "_", ScalarListArg(s, self.size()), Bin(IROP), nat::foreach_tensor_##name##_scalarlist_kernel_slow_(self, s), TL self, SL s) \
  TPU_FOREACH_INPLACE(name##_tensor_, "aten::_foreach_" #name "_", TensorArg(o), Bin(IROP), nat::foreach_tensor_##name##_tensor_kernel_slow_(self, o), TL self, const at::Tensor& o) \
  TPU_FOREACH_FUNCTIONAL(name##_scalar, "aten::_foreach_" #name, ScalarArg(s), Bin(IROP), nat::foreach_tensor_##name##_scalar_kernel_slow(self, s), TL self, const at::Scalar& s) \
  TPU_FOREACH_FUNCTIONAL(name##_list, "aten::_foreach_" #name, (CheckSizes("_foreach_" #name, self, o.size()), ListArg(o)), Bin(IROP), nat::foreach_tensor_##name##_list_kernel_slow(self, o), TL self, TL o) \
  TPU_FOREACH_FUNCTIONAL(name##_slist, "aten::_foreach_" #name, ScalarListArg(s, self.size()), Bin(IROP), nat::foreach_tensor_##name##_scalarlist_kernel_slow(self, s), TL self, SL s) \
  TPU_FOREACH_FUNCTIONAL(name##_tensor, "aten::_foreach_" #name, TensorArg(o), Bin(IROP), nat::foreach_tensor_##name##_tensor_kernel_slow(self, o), TL self, const at::Tensor& o)
TPU_FOREACH_MULDIV(mul, OpCode::kMultiply)
TPU_FOREACH_MULDIV(div, OpCode::kDivide)

// maximum / clamp_min / clamp_max (NaN-propagating like the ATen kernels)
TPU_FOREACH_INPLACE(maximum_list_, "aten::_foreach_maximum_", (CheckSizes("_foreach_maximum_", self, o.size()), ListArg(o)), Bin(OpCode::kMaximum), nat::foreach_tensor_clamp_min_list_kernel_slow_(self, o), TL self, TL o)
TPU_FOREACH_INPLACE(maximum_scalar_, "aten::_foreach_maximum_", ScalarArg(s), Bin(OpCode::kMaximum), nat::foreach_tensor_clamp_min_scalar_kernel_slow_(self, s), TL self, const at::Scalar& s)
TPU_FOREACH_INPLACE(clamp_min_scalar_, "aten::_foreach_clamp_min_", ScalarArg(s), Bin(OpCode::kMaximum), nat::foreach_tensor_clamp_min_scalar_kernel_slow_(self, s), TL self, const at::Scalar& s)
TPU_FOREACH_INPLACE(clamp_max_scalar_, "aten::_foreach_clamp_max_", ScalarArg(s), Bin(OpCode::kMinimum), nat::foreach_tensor_clamp_max_scalar_kernel_slow_(self, s), TL self, const at::Scalar& s)

// lerp
TPU_FOREACH_INPLACE(lerp_scalar_, "aten::_foreach_lerp_", (CheckSizes("_foreach_lerp_", self, e.size()), Concat(ListArg(e), ScalarArg(w))), LerpMath, nat::foreach_tensor_lerp_list_kernel_slow_(self, e, w), TL self, TL e, const at::Scalar& w)
TPU_FOREACH_INPLACE(lerp_list_, "aten::_foreach_lerp_", (CheckSizes("_foreach_lerp_", self, e.size()), Concat(ListArg(e), ListArg(w))), LerpMath, nat::foreach_tensor_ternary_lerp_slow_(self, e, w), TL self, TL e, TL w)

// addcmul / addcdiv
#define TPU_FOREACH_ADDC(name, MATH)                                                                                         \
  TPU_FOREACH_INPLACE(name##_scalar_, "aten::_foreach_" #name "_", (CheckSizes("_foreach_" #name "_", self, t1.size()), Concat(Concat(ListArg(t1), ListArg(t2)), ScalarArg(v))), MATH, nat::foreach_tensor_##name##_scalar_slow_(self, t1, t2, v), TL self, TL t1, TL t2, const at::Scalar& v) \
  TPU_FOREACH_INPLACE(name##_slist_, "aten::_foreach_" #name "_", (CheckSizes("_foreach_" #name "_", self, t1.size()), Concat(Concat(ListArg(t1), ListArg(t2)), ScalarListArg(v, self.size()))), MATH, nat::foreach_tensor_##name##_scalarlist_slow_(self, t1, t2, v), TL self, TL t1, TL t2, SL v)
TPU_FOREACH_ADDC(addcmul, AddcmulMath)
TPU_FOREACH_ADDC(addcdiv, AddcdivMath)

// unary
TPU_FOREACH_FUNCTIONAL(sqrt, "aten::_foreach_sqrt", NoArgs(), Un(OpCode::kSqrt), nat::foreach_tensor_sqrt_slow(self), TL self)
TPU_FOREACH_INPLACE(sqrt_, "aten::_foreach_sqrt_", NoArgs(), Un(OpCode::kSqrt), nat::foreach_tensor_sqrt_slow_(self), TL self)
TPU_FOREACH_FUNCTIONAL(neg, "aten::_foreach_neg", NoArgs(), Un(OpCode::kNegate), nat::foreach_tensor_neg_slow(self), TL self)
TPU_FOREACH_INPLACE(neg_, "aten::_foreach_neg_", NoArgs(), Un(OpCode::kNegate), nat::foreach_tensor_neg_slow_(self), TL self)
TPU_FOREACH_INPLACE(reciprocal_, "aten::_foreach_reciprocal_", NoArgs(), ReciprocalMath, nat::foreach_tensor_reciprocal_slow_(self), TL self)
TPU_FOREACH_INPLACE(zero_, "aten::_foreach_zero_", NoArgs(), [](Builder& b, const std::vector<int>& v) { return b.ScalarLike(0, v[0]); }, nat::foreach_tensor_zero_slow_(self), TL self)
TPU_FOREACH_FUNCTIONAL(pow_scalar, "aten::_foreach_pow", ScalarArg(e), Bin(OpCode::kPower), nat::foreach_tensor_pow_scalar_kernel_slow(self, e), TL self, const at::Scalar& e)
TPU_FOREACH_FUNCTIONAL(pow_list, "aten::_foreach_pow", (CheckSizes("_foreach_pow", self, e.size()), ListArg(e)), Bin(OpCode::kPower), nat::foreach_tensor_pow_list_kernel_slow(self, e), TL self, TL e)

void copy_(TL self, TL src, bool non_blocking) {
  CheckSizes("_foreach_copy_", self, src.size());
  bool native = !self.empty() && self[0].device().type() == c10::DeviceType::PrivateUse1;
  for (size_t i = 0; native && i < self.size(); ++i)
    native = self[i].device() == self[0].device() && src[i].device() == self[0].device();
  if (!native) return nat::foreach_tensor_copy_list_kernel_slow_(self, src, non_blocking);
  Lowering l("aten::_foreach_copy_");
  for (size_t i = 0; i < self.size(); ++i) {
    if (self[i].numel() == 0) continue;
    int v = l.Input(src[i], self[i].scalar_type());
    l.Output(l.b().BroadcastTo(v, ToDims(self[i].sizes())), self[i]);
  }
  l.Run();
}

// Vector norms of every tensor, as 0-dim tensors (what clip_grad_norm_ needs).
std::vector<at::Tensor> norm(TL self, const at::Scalar& ord, std::optional<at::ScalarType> dtype) {
  double p = ord.toDouble();
  bool supported = p == 1.0 || p == 2.0 || std::isinf(p);
  if (!supported || !OnOneDevice(self, {}, NoArgs())) return nat::foreach_tensor_norm_slow(self, ord, dtype);
  Lowering l("aten::_foreach_norm");
  std::vector<at::Tensor> outs;
  for (const at::Tensor& t : self) {
    at::ScalarType out_type = dtype.value_or(t.scalar_type());
    int x = l.Input(t, at::kFloat);
    Builder& b = l.b();
    Dims all(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) all[d] = d;
    int r;
    if (p == 2.0) {
      r = b.Unary(OpCode::kSqrt, b.Reduce(b.Binary(OpCode::kMultiply, x, x), b.Constant(0, DType::kF32), all, ReduceKind::kAdd));
    } else if (p == 1.0) {
      r = b.Reduce(b.Unary(OpCode::kAbs, x), b.Constant(0, DType::kF32), all, ReduceKind::kAdd);
    } else {
      bool pos = p > 0;
      r = b.Reduce(b.Unary(OpCode::kAbs, x), b.Constant(pos ? 0 : INFINITY, DType::kF32), all,
                   pos ? ReduceKind::kMax : ReduceKind::kMin);
    }
    at::Tensor out = at::empty({}, t.options().dtype(out_type));
    l.Output(r, out);
    outs.push_back(out);
  }
  l.Run();
  return outs;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_foreach_add_.Scalar", add_scalar_);
  m.impl("_foreach_add_.List", add_list_);
  m.impl("_foreach_add_.ScalarList", add_slist_);
  m.impl("_foreach_add_.Tensor", add_tensor_);
  m.impl("_foreach_add.Scalar", add_scalar);
  m.impl("_foreach_add.List", add_list);
  m.impl("_foreach_add.ScalarList", add_slist);
  m.impl("_foreach_add.Tensor", add_tensor);
  m.impl("_foreach_sub_.Scalar", sub_scalar_);
  m.impl("_foreach_sub_.List", sub_list_);
  m.impl("_foreach_sub_.ScalarList", sub_slist_);
#define TPU_REG_MULDIV(name)                                  \
  m.impl("_foreach_" #name "_.Scalar", name##_scalar_);       \
  m.impl("_foreach_" #name "_.List", name##_list_);           \
  m.impl("_foreach_" #name "_.ScalarList", name##_slist_);    \
  m.impl("_foreach_" #name "_.Tensor", name##_tensor_);       \
  m.impl("_foreach_" #name ".Scalar", name##_scalar);         \
  m.impl("_foreach_" #name ".List", name##_list);             \
  m.impl("_foreach_" #name ".ScalarList", name##_slist);      \
  m.impl("_foreach_" #name ".Tensor", name##_tensor);
  TPU_REG_MULDIV(mul)
  TPU_REG_MULDIV(div)
  m.impl("_foreach_maximum_.List", maximum_list_);
  m.impl("_foreach_maximum_.Scalar", maximum_scalar_);
  m.impl("_foreach_clamp_min_.Scalar", clamp_min_scalar_);
  m.impl("_foreach_clamp_max_.Scalar", clamp_max_scalar_);
  m.impl("_foreach_lerp_.Scalar", lerp_scalar_);
  m.impl("_foreach_lerp_.List", lerp_list_);
  m.impl("_foreach_addcmul_.Scalar", addcmul_scalar_);
  m.impl("_foreach_addcmul_.ScalarList", addcmul_slist_);
  m.impl("_foreach_addcdiv_.Scalar", addcdiv_scalar_);
  m.impl("_foreach_addcdiv_.ScalarList", addcdiv_slist_);
  m.impl("_foreach_sqrt", sqrt);
  m.impl("_foreach_sqrt_", sqrt_);
  m.impl("_foreach_neg", neg);
  m.impl("_foreach_neg_", neg_);
  m.impl("_foreach_reciprocal_", reciprocal_);
  m.impl("_foreach_zero_", zero_);
  m.impl("_foreach_pow.Scalar", pow_scalar);
  m.impl("_foreach_pow.List", pow_list);
  m.impl("_foreach_copy_", copy_);
  m.impl("_foreach_norm.Scalar", norm);
}

}  // namespace tpu::torch_bridge
