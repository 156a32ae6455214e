// Matrix products -> stablehlo.dot_general: mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, vdot.
//
// Operands enter as their strided views: the executor hands them to oneDNN with their strides,
// so a transposed weight (linear's weight.t()) is read in place and never copied here. The
// beta * self + alpha * product terms are an elementwise epilogue after the product. bfloat16
// products accumulate in float32 inside oneDNN; a product with an epilogue is returned in float32
// so the whole expression rounds once, as PyTorch's CPU kernels do.
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include "torch/lower/nn_util.h"

namespace tpu::torch_bridge {
namespace {

using nn::ResultTensor;
using nn::Splat;

// dot_general dimension numbers.
struct DotDims {
  Dims lhs_batch, rhs_batch, lhs_contract, rhs_contract;
};
const DotDims kMatrix{{}, {}, {1}, {0}};          // mm, addmm, mv, addmv
const DotDims kBatched{{0}, {0}, {2}, {1}};       // bmm, baddbmm
const DotDims kBatchSum{{}, {}, {0, 2}, {0, 1}};  // addbmm: sum over batches and k together
const DotDims kVector{{}, {}, {0}, {0}};          // dot

void CheckSupported(const char* op, at::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(t != at::kBool && !at::isComplexType(t), "\"", op,
                              "\" not implemented for '", t, "'");
}

// Where the epilogue computes: float32 for bfloat16/float16; 8/16-bit integers go through int64
// (the executor's integer product covers int32/int64; the low bits equal PyTorch's wrapping
// arithmetic in the narrow type).
at::ScalarType ComputeType(at::ScalarType t) {
  if (t == at::kBFloat16 || t == at::kHalf) return at::kFloat;
  if (t == at::kChar || t == at::kShort || t == at::kByte) return at::kLong;
  return t;
}

// lhs · rhs. `rounded`: the plain product, returned in the operand dtype (bfloat16 rounds once
// inside oneDNN); otherwise in ComputeType, ready for an epilogue.
int Product(Lowering& l, const at::Tensor& lhs, const at::Tensor& rhs, const DotDims& d,
            bool rounded, const Dims& out_dims) {
  at::ScalarType t = lhs.scalar_type();
  // float16 operands run as float32: oneDNN has no CPU float16 matmul without native float16
  // hardware (this host has none), and a float32 product rounded once is what PyTorch's CPU gives.
  at::ScalarType operand =
      t == at::kHalf ? at::kFloat : (at::isFloatingType(t) ? t : ComputeType(t));
  at::ScalarType result = rounded ? operand : ComputeType(t);
  // An empty contraction: the product is zeros (and the empty operands are not bound).
  if (lhs.numel() == 0 || rhs.numel() == 0) return nn::Fill(l.b(), 0, ToDType(result), out_dims);
  int a = l.Input(lhs, operand), b = l.Input(rhs, operand);
  return l.b().DotGeneral(a, b, d.lhs_batch, d.rhs_batch, d.lhs_contract, d.rhs_contract,
                          ToDType(result));
}

// beta * self + alpha * product, self broadcast to the result. beta == 0 ignores self entirely
// (NaN/Inf in it do not propagate), as PyTorch documents.
int AddScaled(Lowering& l, int prod, const at::Tensor& self, const at::Scalar& beta,
              const at::Scalar& alpha, const Dims& dims) {
  Builder& b = l.b();
  at::ScalarType ct = ComputeType(self.scalar_type());
  DType c = ToDType(ct);
  int r = b.ConvertIfNeeded(prod, c);
  if (!alpha.equal(1)) r = b.Binary(OpCode::kMultiply, r, Splat(l, alpha, c, dims));
  if (beta.equal(0)) return r;
  int s = b.BroadcastTo(TensorOrScalar(l, self, ct), dims);
  if (!beta.equal(1)) s = b.Binary(OpCode::kMultiply, s, Splat(l, beta, c, dims));
  return b.Binary(OpCode::kAdd, s, r);
}

// self must expand to the result shape (ATen's message when it does not).
void CheckExpandable(const at::Tensor& self, const Dims& dims) {
  if (!IsCpuScalar(self))
    (void)at::inferExpandGeometry_dimvector(self.sizes(), self.strides(), dims);
}

// The result: a new tensor, `self` for the in-place form (which must already have the result
// shape), or the out= tensor.
at::Tensor Result(const at::Tensor& self, OutArg o, const Dims& dims, at::ScalarType dtype) {
  if (!o.inplace) return ResultTensor(o.t, dims, dtype, self);
  TORCH_CHECK(self.sizes() == at::IntArrayRef(dims), "Bad in-place call: input tensor size ",
              self.sizes(), " and output tensor size ", at::IntArrayRef(dims), " should match");
  at::assert_no_internal_overlap(self);
  return self;
}

// Lowers product (+ epilogue) into `result`.
void Emit(const char* op, const at::Tensor& lhs, const at::Tensor& rhs, const DotDims& d,
          const at::Tensor& result, const at::Tensor* self = nullptr, const at::Scalar& beta = 0,
          const at::Scalar& alpha = 1) {
  if (result.numel() == 0) return;
  Dims dims(result.sizes().begin(), result.sizes().end());
  Lowering l(op);
  bool plain = !self || (beta.equal(0) && alpha.equal(1));
  int r = Product(l, lhs, rhs, d, plain, dims);
  if (!plain) r = AddScaled(l, r, *self, beta, alpha, dims);
  l.Output(r, result);
  l.Run();
}

std::string ShapeStr(const at::Tensor& t) {
  return std::to_string(t.size(0)) + "x" + std::to_string(t.size(1));
}

// ---- mm / addmm ------------------------------------------------------------------------------
at::Tensor Mm(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor* out) {
  CheckSameDevice("mm", {&self, &mat2});
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ", self.dtype(),
              " != ", mat2.dtype());
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              ShapeStr(self), " and ", ShapeStr(mat2), ")");
  CheckSupported("mm", self.scalar_type());
  at::Tensor result = ResultTensor(out, {self.size(0), mat2.size(1)}, self.scalar_type(), self);
  Emit("aten::mm", self, mat2, kMatrix, result);
  return result;
}

at::Tensor Addmm(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                 const at::Scalar& beta, const at::Scalar& alpha, OutArg o) {
  CheckSameDevice("addmm", {&self, &m1, &m2});
  TORCH_CHECK(m1.dim() == 2, "mat1 must be a matrix, got ", m1.dim(), "-D tensor");
  TORCH_CHECK(m2.dim() == 2, "mat2 must be a matrix, got ", m2.dim(), "-D tensor");
  TORCH_CHECK(m1.size(1) == m2.size(0), "mat1 and mat2 shapes cannot be multiplied (", ShapeStr(m1),
              " and ", ShapeStr(m2), ")");
  TORCH_CHECK(self.scalar_type() == m2.scalar_type(),
              "self and mat2 must have the same dtype, but got ", self.scalar_type(), " and ",
              m2.scalar_type());
  TORCH_CHECK(m1.scalar_type() == m2.scalar_type(),
              "mat1 and mat2 must have the same dtype, but got ", m1.scalar_type(), " and ",
              m2.scalar_type());
  CheckSupported("addmm", m1.scalar_type());
  Dims dims{m1.size(0), m2.size(1)};
  at::Tensor result = Result(self, o, dims, m1.scalar_type());  // (the in-place shape check first)
  CheckExpandable(self, dims);
  Emit("aten::addmm", m1, m2, kMatrix, result, &self, beta, alpha);
  return result;
}

// ---- bmm / baddbmm / addbmm ------------------------------------------------------------------
void CheckBatched(const at::Tensor& b1, const at::Tensor& b2) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b2.size(0) == b1.size(0) && b2.size(1) == b1.size(2),
              "Expected size for first two dimensions of batch2 tensor to be: [", b1.size(0), ", ",
              b1.size(2), "] but got: [", b2.size(0), ", ", b2.size(1), "].");
}

at::Tensor Bmm(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor* out) {
  CheckSameDevice("bmm", {&self, &mat2});
  CheckBatched(self, mat2);
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "expected scalar type ", self.scalar_type(),
              " but found ", mat2.scalar_type());
  CheckSupported("bmm", self.scalar_type());
  at::Tensor result =
      ResultTensor(out, {self.size(0), self.size(1), mat2.size(2)}, self.scalar_type(), self);
  Emit("aten::bmm", self, mat2, kBatched, result);
  return result;
}

at::Tensor Baddbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                   const at::Scalar& beta, const at::Scalar& alpha, OutArg o) {
  CheckSameDevice("baddbmm", {&self, &b1, &b2});
  CheckBatched(b1, b2);
  TORCH_CHECK(self.scalar_type() == b1.scalar_type() && b1.scalar_type() == b2.scalar_type(),
              "Input dtypes must be the same, got: input ", self.dtype(), ", batch1: ", b1.dtype(),
              ", batch2: ", b2.dtype());
  CheckSupported("baddbmm", b1.scalar_type());
  Dims dims{b1.size(0), b1.size(1), b2.size(2)};
  CheckExpandable(self, dims);
  if (o.inplace)
    TORCH_CHECK(self.sizes() == at::IntArrayRef(dims), "Expected an output tensor with shape ",
                at::IntArrayRef(dims), " but got shape ", self.sizes());
  at::Tensor result = Result(self, o, dims, b1.scalar_type());
  Emit("aten::baddbmm", b1, b2, kBatched, result, &self, beta, alpha);
  return result;
}

at::Tensor Addbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                  const at::Scalar& beta, const at::Scalar& alpha, OutArg o) {
  CheckSameDevice("addbmm", {&self, &b1, &b2});
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == b2.size(0), "batch1 and batch2 must have same number of batches, got ",
              b1.size(0), " and ", b2.size(0));
  TORCH_CHECK(b1.size(2) == b2.size(1), "Incompatible matrix sizes for bmm (", b1.size(1), "x",
              b1.size(2), " and ", b2.size(1), "x", b2.size(2), ")");
  TORCH_CHECK(self.scalar_type() == b2.scalar_type(),
              "self and mat2 must have the same dtype, but got ", self.scalar_type(), " and ",
              b2.scalar_type());
  TORCH_CHECK(b1.scalar_type() == b2.scalar_type(),
              "mat1 and mat2 must have the same dtype, but got ", b1.scalar_type(), " and ",
              b2.scalar_type());
  CheckSupported("addbmm", b1.scalar_type());
  Dims dims{b1.size(1), b2.size(2)};
  at::Tensor result = Result(self, o, dims, b1.scalar_type());
  CheckExpandable(self, dims);
  Emit("aten::addbmm", b1, b2, kBatchSum, result, &self, beta, alpha);
  return result;
}

// ---- mv / addmv / dot ------------------------------------------------------------------------
// `self` described by its rank, element count and dtype: mv checks as addmv into a result of
// vec's dtype with mat's row count, and PyTorch's messages say so.
void CheckMv(int64_t self_dim, int64_t self_numel, at::ScalarType self_type, const at::Tensor& mat,
             const at::Tensor& vec) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self_dim <= 1,
              "vector + matrix @ vector expected, got ", self_dim, ", ", mat.dim(), ", ",
              vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self_numel || self_numel == 1),
              "size mismatch, got input (", self_numel, "), mat (", ShapeStr(mat), "), vec (",
              vec.size(0), ")");
  TORCH_CHECK(self_type == mat.scalar_type() && mat.scalar_type() == vec.scalar_type(),
              "addmv input tensors must have the same dtype, but got ", self_type, ", ",
              mat.scalar_type(), ", and ", vec.scalar_type());
}

at::Tensor Mv(const at::Tensor& self, const at::Tensor& vec, const at::Tensor* out) {
  CheckSameDevice("mv", {&self, &vec});
  CheckMv(1, self.dim() == 2 ? self.size(0) : 0, vec.scalar_type(), self, vec);
  CheckSupported("mv", self.scalar_type());
  at::Tensor result = ResultTensor(out, {self.size(0)}, self.scalar_type(), self);
  Emit("aten::mv", self, vec, kMatrix, result);
  return result;
}

at::Tensor Addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const at::Scalar& beta, const at::Scalar& alpha, OutArg o) {
  CheckSameDevice("addmv", {&self, &mat, &vec});
  CheckMv(self.dim(), self.numel(), self.scalar_type(), mat, vec);
  CheckSupported("addmv", mat.scalar_type());
  Dims dims{mat.size(0)};
  at::Tensor result = Result(self, o, dims, mat.scalar_type());
  Emit("aten::addmv", mat, vec, kMatrix, result, &self, beta, alpha);
  return result;
}

// vdot conjugates its first argument: the same as dot for the real dtypes the device holds.
at::Tensor Dot(const char* name, const char* op, const at::Tensor& self, const at::Tensor& other,
               const at::Tensor* out) {
  CheckSameDevice(name, {&self, &other});
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(),
              "D and ", other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), name,
              " : expected both vectors to have same dtype, but found ", self.scalar_type(),
              " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [",
              self.numel(), "] and src [", other.numel(),
              "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
  CheckSupported(name, self.scalar_type());
  if (out)
    TORCH_CHECK(out->scalar_type() == self.scalar_type(), "result dtype ", out->scalar_type(),
                " does not match input dtype ", self.scalar_type());
  at::Tensor result = ResultTensor(out, {}, self.scalar_type(), self);
  Emit(op, self, other, kVector, result);
  return result;
}

// ---- registered forms ------------------------------------------------------------------------
at::Tensor mm(const at::Tensor& s, const at::Tensor& m) { return Mm(s, m, nullptr); }
at::Tensor& mm_out(const at::Tensor& s, const at::Tensor& m, at::Tensor& out) {
  Mm(s, m, &out);
  return out;
}
at::Tensor bmm(const at::Tensor& s, const at::Tensor& m) { return Bmm(s, m, nullptr); }
at::Tensor& bmm_out(const at::Tensor& s, const at::Tensor& m, at::Tensor& out) {
  Bmm(s, m, &out);
  return out;
}
at::Tensor mv(const at::Tensor& s, const at::Tensor& v) { return Mv(s, v, nullptr); }
at::Tensor& mv_out(const at::Tensor& s, const at::Tensor& v, at::Tensor& out) {
  Mv(s, v, &out);
  return out;
}
at::Tensor dot(const at::Tensor& s, const at::Tensor& o) {
  return Dot("dot", "aten::dot", s, o, nullptr);
}
at::Tensor& dot_out(const at::Tensor& s, const at::Tensor& o, at::Tensor& out) {
  Dot("dot", "aten::dot", s, o, &out);
  return out;
}
at::Tensor vdot(const at::Tensor& s, const at::Tensor& o) {
  return Dot("vdot", "aten::vdot", s, o, nullptr);
}
at::Tensor& vdot_out(const at::Tensor& s, const at::Tensor& o, at::Tensor& out) {
  Dot("vdot", "aten::vdot", s, o, &out);
  return out;
}

#define TPU_ADD_PRODUCT(name, Impl)                                                          \
  at::Tensor name(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b,             \
                  const at::Scalar& beta, const at::Scalar& alpha) {                         \
    return Impl(s, a, b, beta, alpha, Functional());                                         \
  }                                                                                          \
  at::Tensor& name##_(at::Tensor& s, const at::Tensor& a, const at::Tensor& b,               \
                      const at::Scalar& beta, const at::Scalar& alpha) {                     \
    Impl(s, a, b, beta, alpha, Inplace(s));                                                  \
    return s;                                                                                \
  }                                                                                          \
  at::Tensor& name##_out(const at::Tensor& s, const at::Tensor& a, const at::Tensor& b,      \
                         const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) { \
    Impl(s, a, b, beta, alpha, Out(out));                                                    \
    return out;                                                                              \
  }
TPU_ADD_PRODUCT(addmm, Addmm)
TPU_ADD_PRODUCT(baddbmm, Baddbmm)
TPU_ADD_PRODUCT(addbmm, Addbmm)
TPU_ADD_PRODUCT(addmv, Addmv)

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", mm);
  m.impl("mm.out", mm_out);
  m.impl("bmm", bmm);
  m.impl("bmm.out", bmm_out);
  m.impl("mv", mv);
  m.impl("mv.out", mv_out);
  m.impl("dot", dot);
  m.impl("dot.out", dot_out);
  m.impl("vdot", vdot);
  m.impl("vdot.out", vdot_out);
#define TPU_REG_ADD_PRODUCT(name) \
  m.impl(#name, name);            \
  m.impl(#name "_", name##_);     \
  m.impl(#name ".out", name##_out);
  TPU_REG_ADD_PRODUCT(addmm)
  TPU_REG_ADD_PRODUCT(baddbmm)
  TPU_REG_ADD_PRODUCT(addbmm)
  TPU_REG_ADD_PRODUCT(addmv)
}

}  // namespace tpu::torch_bridge
