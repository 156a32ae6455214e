// Ops that make, take apart or conjugate complex tensors (Note [Complex tensors]): polar, complex,
// conj_physical, angle. The views (view_as_real, view_as_complex) are registered in tensor_ops.cc.
#include <torch/library.h>

#include <cmath>

#include "torch/lower/complex_util.h"
#include "torch/lower/pointwise_expr.h"

namespace tpu::torch_bridge {
namespace {

// ATen's complex_check_dtype: two real inputs of one float dtype, and a complex result of it.
void CheckMakeComplex(const char* op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  TORCH_CHECK((a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble || a.scalar_type() == at::kHalf) &&
                  (b.scalar_type() == at::kFloat || b.scalar_type() == at::kDouble || b.scalar_type() == at::kHalf),
              "Expected both inputs to be Half, Float or Double tensors but got ", a.scalar_type(), " and ",
              b.scalar_type());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "Expected object of scalar type ", a.scalar_type(),
              " but got scalar type ", b.scalar_type(), " for second argument");
  TORCH_CHECK(out.scalar_type() == at::toComplexType(a.scalar_type()), "Expected object of scalar type ",
              at::toComplexType(a.scalar_type()), " but got scalar type ", out.scalar_type(), " for argument 'out'");
  CheckSameDevice(op, {&a, &b, &out});
}

// out = f(a, b) for two real inputs broadcast together: polar (abs, angle) and complex (re, im).
template <typename F>
at::Tensor& MakeComplex(const char* op, const at::Tensor& a, const at::Tensor& b, at::Tensor& out, F f) {
  CheckMakeComplex(op, a, b, out);
  TORCH_CHECK_NOT_IMPLEMENTED(out.scalar_type() != at::kComplexHalf, op, ": complex32 is not supported on the tpu device");
  at::DimVector shape = at::infer_size_dimvector(a.sizes(), b.sizes());
  ResizeOut(out, shape);
  if (out.numel() == 0) return out;
  Lowering l(op);
  Dims dims(shape.begin(), shape.end());
  at::ScalarType real = a.scalar_type();
  int x = l.b().BroadcastTo(l.Input(a, real), dims);
  int y = l.b().BroadcastTo(l.Input(b, real), dims);
  Expr e(l, x);
  ComplexOutput(l, f(e, x, y), out);
  l.Run();
  return out;
}

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  return MakeComplex("aten::polar", abs, angle, out, [](Expr& e, int r, int theta) {
    return CValue{e.Mul(r, e.b().Unary(OpCode::kCosine, theta)), e.Mul(r, e.b().Unary(OpCode::kSine, theta))};
  });
}

at::Tensor& complex_out(const at::Tensor& real, const at::Tensor& imag, at::Tensor& out) {
  return MakeComplex("aten::complex", real, imag, out, [](Expr&, int re, int im) { return CValue{re, im}; });
}

at::Tensor& conj_physical_out(const at::Tensor& self, at::Tensor& out) {
  if (self.is_complex()) {
    LowerComplexElementwise("aten::conj_physical", {self}, Out(out), nullptr);
    return out;
  }
  // A real tensor is its own conjugate: a copy.
  LowerElementwise("aten::conj_physical", {self}, Out(out), ResultKind::kCommon,
                   [](Lowering&, const ValueList& v, DType) { return v[0]; });
  return out;
}

// In place: ATen's conj_physical_ runs a DispatchStub the device has no kernel for (an internal
// assert), so it is the out= lowering with self as the output.
at::Tensor& conj_physical_(at::Tensor& self) { return torch_bridge::conj_physical_out(self, self); }

// angle of a real number: pi for negatives, 0 otherwise, NaN kept (ATen's angle_impl).
LoweredResult Angle(const at::Tensor& self, OutArg out) {
  if (self.is_complex()) return LowerComplexElementwise("aten::angle", {self}, out, nullptr);
  return LowerElementwise("aten::angle", {self}, out, ResultKind::kFloat, [](Lowering& l, const ValueList& v, DType) {
    Expr e(l, v[0]);
    if (!e.is_float()) return e.Select(e.Lt(v[0], e.K(0)), e.K(M_PI), e.K(0));
    return e.Select(e.IsNan(v[0]), v[0], e.Select(e.Lt(v[0], e.K(0)), e.K(M_PI), e.K(0)));
  });
}
at::Tensor angle(const at::Tensor& self) { return Angle(self, Functional()); }
at::Tensor& angle_out(const at::Tensor& self, at::Tensor& out) {
  Angle(self, Out(out));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("polar.out", polar_out);
  m.impl("complex.out", complex_out);
  m.impl("conj_physical.out", conj_physical_out);
  m.impl("conj_physical_", conj_physical_);
  m.impl("angle", angle);
  m.impl("angle.out", angle_out);
}

}  // namespace tpu::torch_bridge
