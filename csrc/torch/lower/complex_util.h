// Note [Complex tensors]: how complex64/complex128 live on the device.
//
// Storage: a complex tensor's buffer holds interleaved (real, imag) pairs, exactly as on the CPU,
// so copies are byte copies and view_as_real / view_as_complex / .real / .imag are views of the
// same buffer (a complex64 tensor of shape [..., n] is the float32 tensor [..., n, 2] with
// doubled strides).
//
// Programs: the IR stays real. A complex value in a lowering is a pair of real values (CValue:
// its real and imaginary parts, each of the tensor's shape, in float32 for complex64, float64 for
// complex128). A complex input enters the program as its float view [..., 2] and is split by two
// slices (views on the host executor); a complex result is the two parts joined along a new last
// dimension and written to the output's float view. Complex arithmetic is lowered to real
// arithmetic on the parts (the formulas of PyTorch's CPU kernels where they have a documented
// algorithm: Smith's division, |z| without overflow). So every backend runs complex ops without
// complex kernels, and fused mode fuses them like any real elementwise chain.
//
// Why not complex types in the IR (StableHLO has complex<f32>, stablehlo.real/imag/complex): the
// host executor's fused elementwise tiles, reductions and data movement would each need a complex
// path, for the same arithmetic this lowering writes once. A backend that wants native complex
// ops can still be handed them later by recognizing the pair pattern.
//
// Conjugate and negative bits (x.conj() is a lazy view): inputs honor them (the imaginary part,
// or both parts, negated in the program); ops that PyTorch lets see such views (copy_, clone)
// therefore give the resolved values.
//
// Coverage: copies and dtype conversions, fill_/zero_, the views, add/sub (with alpha)/mul/div/
// neg/conj_physical/reciprocal/exp/log/sqrt/abs/angle/sgn/eq/ne, polar, complex, sum/mean.
// Other native kernels raise NotImplementedError for complex inputs, naming the op; ops without
// a native lowering (the FFTs) run through the CPU fallback, which handles complex tensors.
#pragma once

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {

struct CValue {
  int re = -1;
  int im = -1;
};

inline bool IsComplex(at::ScalarType t) { return at::isComplexType(t); }

// `t` (complex or real, on the device or a CPU scalar) as a complex value of real dtype `real`
// broadcast to `dims`; a real tensor has a zero imaginary part.
CValue ComplexInput(Lowering& l, const at::Tensor& t, DType real, const Dims& dims);
// `t`'s storage as its real view (dims + [2]), without the conj/neg bits applied: for kernels
// that only move data.
int ComplexInputRaw(Lowering& l, const at::Tensor& t);
// The pair joined along a new last dimension: the float view of a complex value.
int JoinComplex(Builder& b, CValue v);
// Writes `v` to the complex tensor `out` (through its float view).
void ComplexOutput(Lowering& l, CValue v, const at::Tensor& out);

// LowerComplexElementwise (elementwise_util.h): its `op` names the formula (complex.cc's table);
// `alpha` scales the second input (add/sub).

// A complex tensor's values as its float pairs [..., 2], a view (after a copy that resolves lazy
// conj/neg bits, if set): ops that only move data run on it with the pair as one more dim.
inline at::Tensor ResolvedRealView(const at::Tensor& t) { return at::view_as_real(t.resolve_conj().resolve_neg()); }

// copy_ between device tensors when either is complex (conversions as on the CPU: a real source
// gets a zero imaginary part; a complex source copied to a real tensor keeps the real part).
void ComplexDeviceCopy(const at::Tensor& src, const at::Tensor& dst);
// fill_ of a complex tensor.
void ComplexFill(const at::Tensor& self, const at::Scalar& value);

}  // namespace tpu::torch_bridge
