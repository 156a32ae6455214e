// 1-d and 3-d upsampling: upsample_nearest1d/3d, upsample_linear1d and upsample_trilinear3d with
// their backward ops, on upsample.cc's N-d lowerings. ATen's meta functions check the arguments
// and size the results; the dtype checks after them are those of ATen's CPU kernels.
#include <ATen/ops/upsample_linear1d_backward_meta.h>
#include <ATen/ops/upsample_linear1d_meta.h>
#include <ATen/ops/upsample_nearest1d_backward_meta.h>
#include <ATen/ops/upsample_nearest1d_meta.h>
#include <ATen/ops/upsample_nearest3d_backward_meta.h>
#include <ATen/ops/upsample_nearest3d_meta.h>
#include <ATen/ops/upsample_trilinear3d_backward_meta.h>
#include <ATen/ops/upsample_trilinear3d_meta.h>
#include <torch/library.h>

#include "torch/lower/nn_util.h"
#include "torch/lower/structured.h"
#include "torch/lower/upsample.h"

namespace tpu::torch_bridge {
namespace {

using OptD = std::optional<double>;
using Ints = at::IntArrayRef;

void CheckNearestDtype(const at::Tensor& self) {
  at::ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t) || t == at::kByte,
                              "\"compute_indices_weights_nearest\" not implemented for '", t, "'");
}

void CheckLinearDtype(const at::Tensor& self) {
  at::ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t),
                              "\"compute_indices_weights_linear\" not implemented for '", t, "'");
}

// Runs Meta's checks on (args...) for the result `out` (undefined: a new tensor).
template <class Meta, class... Args>
at::Tensor Sized(const at::Tensor& out, const Args&... args) {
  MetaOut<Meta> m(out);
  m.meta(args...);
  return m.out();
}

// ---- nearest ------------------------------------------------------------------------------------
at::Tensor Nearest1d(const at::Tensor& out, const at::Tensor& self, Ints os, OptD s) {
  CheckSameDevice("upsample_nearest1d", {&self, &out});
  at::Tensor r = Sized<at::meta::structured_upsample_nearest1d>(out, self, os, s);
  CheckNearestDtype(self);
  if (r.numel() > 0) UpsampleNearestInto("aten::upsample_nearest1d", self, os, {s}, r);
  return r;
}

at::Tensor Nearest1dBackward(const at::Tensor& out, const at::Tensor& g, Ints os, Ints is, OptD s) {
  CheckSameDevice("upsample_nearest1d_backward", {&g, &out});
  at::Tensor r = Sized<at::meta::structured_upsample_nearest1d_backward>(out, g, os, is, s);
  if (r.numel() > 0)
    UpsampleNearestBackwardInto("aten::upsample_nearest1d_backward", g, os, is, {s}, r);
  return r;
}

at::Tensor Nearest3d(const at::Tensor& out, const at::Tensor& self, Ints os, OptD sd, OptD sh,
                     OptD sw) {
  CheckSameDevice("upsample_nearest3d", {&self, &out});
  at::Tensor r = Sized<at::meta::structured_upsample_nearest3d>(out, self, os, sd, sh, sw);
  CheckNearestDtype(self);
  if (r.numel() > 0) UpsampleNearestInto("aten::upsample_nearest3d", self, os, {sd, sh, sw}, r);
  return r;
}

at::Tensor Nearest3dBackward(const at::Tensor& out, const at::Tensor& g, Ints os, Ints is, OptD sd,
                             OptD sh, OptD sw) {
  CheckSameDevice("upsample_nearest3d_backward", {&g, &out});
  at::Tensor r =
      Sized<at::meta::structured_upsample_nearest3d_backward>(out, g, os, is, sd, sh, sw);
  if (r.numel() > 0)
    UpsampleNearestBackwardInto("aten::upsample_nearest3d_backward", g, os, is, {sd, sh, sw}, r);
  return r;
}

// ---- linear / trilinear -------------------------------------------------------------------------
at::Tensor Linear1d(const at::Tensor& out, const at::Tensor& self, Ints os, bool ac, OptD s) {
  CheckSameDevice("upsample_linear1d", {&self, &out});
  at::Tensor r = Sized<at::meta::structured_upsample_linear1d>(out, self, os, ac, s);
  CheckLinearDtype(self);
  if (r.numel() > 0) UpsampleLinearInto("aten::upsample_linear1d", self, os, ac, {s}, r);
  return r;
}

at::Tensor Linear1dBackward(const at::Tensor& out, const at::Tensor& g, Ints os, Ints is, bool ac,
                            OptD s) {
  CheckSameDevice("upsample_linear1d_backward", {&g, &out});
  at::Tensor r = Sized<at::meta::structured_upsample_linear1d_backward>(out, g, os, is, ac, s);
  if (r.numel() > 0)
    UpsampleLinearBackwardInto("aten::upsample_linear1d_backward", g, os, is, ac, {s}, r);
  return r;
}

at::Tensor Trilinear3d(const at::Tensor& out, const at::Tensor& self, Ints os, bool ac, OptD sd,
                       OptD sh, OptD sw) {
  CheckSameDevice("upsample_trilinear3d", {&self, &out});
  at::Tensor r = Sized<at::meta::structured_upsample_trilinear3d>(out, self, os, ac, sd, sh, sw);
  CheckLinearDtype(self);
  if (r.numel() > 0)
    UpsampleLinearInto("aten::upsample_trilinear3d", self, os, ac, {sd, sh, sw}, r);
  return r;
}

at::Tensor Trilinear3dBackward(const at::Tensor& out, const at::Tensor& g, Ints os, Ints is,
                               bool ac, OptD sd, OptD sh, OptD sw) {
  CheckSameDevice("upsample_trilinear3d_backward", {&g, &out});
  at::Tensor r =
      Sized<at::meta::structured_upsample_trilinear3d_backward>(out, g, os, is, ac, sd, sh, sw);
  if (r.numel() > 0)
    UpsampleLinearBackwardInto("aten::upsample_trilinear3d_backward", g, os, is, ac, {sd, sh, sw},
                               r);
  return r;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest1d", Forms<Nearest1d>::Functional);
  m.impl("upsample_nearest1d.out", Forms<Nearest1d>::Out);
  m.impl("upsample_nearest1d_backward", Forms<Nearest1dBackward>::Functional);
  m.impl("upsample_nearest1d_backward.grad_input", Forms<Nearest1dBackward>::Out);
  m.impl("upsample_nearest3d", Forms<Nearest3d>::Functional);
  m.impl("upsample_nearest3d.out", Forms<Nearest3d>::Out);
  m.impl("upsample_nearest3d_backward", Forms<Nearest3dBackward>::Functional);
  m.impl("upsample_nearest3d_backward.grad_input", Forms<Nearest3dBackward>::Out);
  m.impl("upsample_linear1d", Forms<Linear1d>::Functional);
  m.impl("upsample_linear1d.out", Forms<Linear1d>::Out);
  m.impl("upsample_linear1d_backward", Forms<Linear1dBackward>::Functional);
  m.impl("upsample_linear1d_backward.grad_input", Forms<Linear1dBackward>::Out);
  m.impl("upsample_trilinear3d", Forms<Trilinear3d>::Functional);
  m.impl("upsample_trilinear3d.out", Forms<Trilinear3d>::Out);
  m.impl("upsample_trilinear3d_backward", Forms<Trilinear3dBackward>::Functional);
  m.impl("upsample_trilinear3d_backward.grad_input", Forms<Trilinear3dBackward>::Out);
}

}  // namespace tpu::torch_bridge
