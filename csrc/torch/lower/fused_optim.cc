// Fused optimizer steps (`_fused_adam_`, `_fused_adamw_`, `_fused_sgd_`: what torch.optim's
// fused=True and the HF Trainer's default adamw_torch_fused call) and GradScaler's
// `_amp_foreach_non_finite_check_and_unscale_` / `_amp_update_scale_`.
//
// One program per call covers every parameter of the list. The update follows ATen's fused CPU
// kernels element for element: bias corrections from each tensor's step in double precision
// (computed in the program, so reading the step costs no host sync), coefficients rounded to the
// compute dtype as the CPU kernel rounds them, the state updated in float for bfloat16/float16
// parameters and rounded once when stored. grad_scale divides the gradients (and the unscaled
// gradients are written back); found_inf == 1 leaves every tensor unchanged, as on CPU. The
// CPU kernel's vector loop uses fused multiply-adds where its scalar loop does not: the two agree
// to rounding, and so do we.
//
// Hyper-parameters are runtime parameters (a scheduler changing lr recompiles nothing); only what
// decides the program's structure (amsgrad, maximize, nesterov, weight decay on or off, which of
// lerp's two formulas 1 - beta1 selects, whether grad_scale/found_inf are given) is part of it.
#include <torch/library.h>

#include <cmath>
#include <unordered_set>

#include "torch/lower/elementwise_util.h"

namespace tpu::torch_bridge {
namespace {

using at::TensorList;
using OptTensor = std::optional<at::Tensor>;

// The program's view of the per-call inputs shared by every parameter.
struct Common {
  int found_skip = -1;  // rank-0 bool: found_inf == 1 (the step is skipped), or -1
  int grad_scale = -1;  // rank-0 f32, or -1
};

int Rank0(Builder& b, int v) { return b.Reshape(v, {}); }

// Rank-0 values in each compute dtype, made before any tensor op: a rank-0 op between a
// parameter's elementwise ops would split that parameter's fused pass in two. (For the few
// shared hyper-parameters: a linear search.)
class Rank0InDType {
 public:
  explicit Rank0InDType(Builder& b) : b_(b) {}
  int operator()(int v, DType t) {
    for (const auto& [key, id] : done_)
      if (key.first == v && key.second == t) return id;
    int id = b_.ConvertIfNeeded(v, t);
    done_.push_back({{v, t}, id});
    return id;
  }

 private:
  Builder& b_;
  std::vector<std::pair<std::pair<int, DType>, int>> done_;
};

// A 1-element float32 tensor argument (grad_scale, found_inf) as a rank-0 f32 value.
int OneElement(Lowering& l, const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.numel() == 1, op, ": ", name, " must be a 1-element tensor, got ", t.numel(), " elements");
  TORCH_CHECK(t.scalar_type() == at::kFloat, op, ": ", name, " must be a float tensor, got ", t.scalar_type());
  return Rank0(l.b(), TensorOrScalar(l, t, at::kFloat));
}

Common Prepare(Lowering& l, const char* op, const OptTensor& grad_scale, const OptTensor& found_inf) {
  Common c;
  Builder& b = l.b();
  if (grad_scale.has_value() && grad_scale->defined()) c.grad_scale = OneElement(l, op, "grad_scale", *grad_scale);
  if (found_inf.has_value() && found_inf->defined()) {
    int f = OneElement(l, op, "found_inf", *found_inf);
    c.found_skip = b.Compare(CompareDirection::kEQ, f, b.ScalarLike(1, f));
  }
  return c;
}

// Checks that list `name` matches the parameters (count, device, dtype, shape) and, with
// `written`, that no tensor the step writes shares storage with another (one program reads all,
// then writes). Tensors only read may share one: FSDP2's gradients are views of one buffer.
void CheckList(const char* op, const char* name, TensorList params, TensorList list,
               std::unordered_set<const void*>* written) {
  TORCH_CHECK(list.size() == params.size(), op, ": expected as many ", name, " as parameters (", params.size(),
              "), got ", list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const at::Tensor& t = list[i];
    const at::Tensor& p = params[i];
    TORCH_CHECK(t.defined(), op, ": ", name, "[", i, "] is undefined");
    TORCH_CHECK(t.device() == p.device(), op, ": expected all tensors on ", p.device(), ", but ", name, "[", i,
                "] is on ", t.device(), " (move it with .to('tpu'))");
    TORCH_CHECK(t.scalar_type() == p.scalar_type(), op, ": ", name, "[", i, "] has dtype ", t.scalar_type(),
                " but its parameter has ", p.scalar_type());
    TORCH_CHECK(t.sizes() == p.sizes(), op, ": ", name, "[", i, "] has shape ", t.sizes(),
                " but its parameter has shape ", p.sizes());
    if (written) {
      TORCH_CHECK(written->insert(t.storage().unsafeGetStorageImpl()).second, op, ": ", name, "[", i,
                  "] shares its storage with another tensor the step writes; the fused step needs distinct "
                  "tensors");
    }
  }
}

// The step writes the gradients back only when it unscales them (UpdateGradient).
bool GradsWritten(const OptTensor& grad_scale) { return grad_scale.has_value() && grad_scale->defined(); }

void CheckParams(const char* op, TensorList params, std::unordered_set<const void*>* written) {
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    TORCH_CHECK(p.defined() && p.device().type() == c10::DeviceType::PrivateUse1, op,
                ": expected the parameters on the tpu device, but params[", i, "] is on ",
                p.defined() ? p.device().str() : std::string("(undefined)"));
    TORCH_CHECK(p.device() == params[0].device(), op, ": expected all parameters on ", params[0].device(),
                ", but params[", i, "] is on ", p.device());
    TORCH_CHECK(at::isFloatingType(p.scalar_type()), op, ": expected floating-point parameters, params[", i,
                "] has dtype ", p.scalar_type());
    TORCH_CHECK(written->insert(p.storage().unsafeGetStorageImpl()).second, op, ": params[", i,
                "] shares its storage with another parameter; the fused step needs distinct tensors");
  }
}

// A learning rate given as a number or as a tensor (the tensor_lr overloads; CPU reads it as a
// double), as a rank-0 f64 value.
int LearningRate(Lowering& l, const char* op, double lr, const at::Tensor* lr_tensor) {
  if (!lr_tensor) return l.Scalar(lr, at::kDouble);
  TORCH_CHECK(lr_tensor->numel() == 1, op, ": lr must be a 1-element tensor, got ", lr_tensor->numel(), " elements");
  return Rank0(l.b(), TensorOrScalar(l, *lr_tensor, at::kDouble));
}

// Writes `value` to `t`, or keeps t's value `old` when the step is skipped (found_inf).
void Store(Lowering& l, const Common& c, int value, int old, const at::Tensor& t) {
  if (t.numel() == 0) return;
  Builder& b = l.b();
  if (c.found_skip >= 0) value = b.Select(b.BroadcastTo(c.found_skip, b.TypeOf(value).dims), old, value);
  l.Output(value, t);
}

// The gradient as the update uses it: unscaled (and written back unscaled), then negated for
// maximize. `grad_in` is the input value in the compute dtype.
template <typename Cast>
int UpdateGradient(Lowering& l, const Common& c, int grad_in, bool maximize, const at::Tensor& grad, Cast& cast) {
  Builder& b = l.b();
  int g = grad_in;
  if (c.grad_scale >= 0) {
    TensorType t = b.TypeOf(g);
    g = b.Binary(OpCode::kDivide, g, b.BroadcastTo(cast(c.grad_scale, t.dtype), t.dims));
    Store(l, c, g, grad_in, grad);
  }
  return maximize ? b.Unary(OpCode::kNegate, g) : g;
}

// ---- Adam / AdamW ------------------------------------------------------------------------------
struct AdamConfig {
  double lr;
  const at::Tensor* lr_tensor;
  double beta1, beta2, weight_decay, eps;
  bool amsgrad, maximize, adamw;
};

void FusedAdam(const char* op, TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
               TensorList max_exp_avg_sqs, TensorList state_steps, const AdamConfig& a, const OptTensor& grad_scale,
               const OptTensor& found_inf) {
  std::unordered_set<const void*> written;
  CheckParams(op, params, &written);
  CheckList(op, "grads", params, grads, GradsWritten(grad_scale) ? &written : nullptr);
  CheckList(op, "exp_avgs", params, exp_avgs, &written);
  CheckList(op, "exp_avg_sqs", params, exp_avg_sqs, &written);
  if (a.amsgrad) {
    CheckList(op, "max_exp_avg_sqs", params, max_exp_avg_sqs, &written);
  } else {
    TORCH_CHECK(max_exp_avg_sqs.empty(), op, ": max_exp_avg_sqs must be empty when amsgrad is False");
  }
  TORCH_CHECK(state_steps.size() == params.size(), op, ": expected as many state_steps as parameters (",
              params.size(), "), got ", state_steps.size());
  for (size_t i = 0; i < state_steps.size(); ++i)
    TORCH_CHECK(state_steps[i].numel() == 1, op, ": state_steps[", i, "] must have one element");
  if (params.empty()) return;
  c10::DeviceGuard guard(params[0].device());

  Lowering l(op);
  Builder& b = l.b();
  // Runtime parameters in a fixed order: grad_scale, found_inf, lr, the constants below, each
  // tensor's step, then each tensor's param, grad and states.
  Common c = Prepare(l, op, grad_scale, found_inf);
  int lr = LearningRate(l, op, a.lr, a.lr_tensor);
  int beta1 = l.Scalar(a.beta1, at::kDouble);
  int beta2 = l.Scalar(a.beta2, at::kDouble);
  int avg_coeff = l.Scalar(1 - a.beta1, at::kDouble);
  int sq_coeff = l.Scalar(1 - a.beta2, at::kDouble);
  int wd = l.Scalar(a.weight_decay, at::kDouble);
  int eps = l.Scalar(a.eps, at::kDouble);
  int one = b.Constant(1, DType::kF64);
  int decay = b.Binary(OpCode::kSubtract, one, b.Binary(OpCode::kMultiply, lr, wd));  // AdamW: 1 - lr * wd
  // exp_avg.lerp_(grad, 1 - beta1): ATen's lerp picks its formula by |weight| < 0.5.
  bool small_weight = std::abs(static_cast<float>(1 - a.beta1)) < 0.5f;

  // Per-step scalars in double, as the CPU kernel computes them, then rounded to the compute
  // dtype: -lr / (1 - beta1^step) and sqrt(1 - beta2^step).
  Rank0InDType cast(b);
  std::vector<std::pair<int, int>> per_step;
  for (size_t i = 0; i < params.size(); ++i) {
    DType ct = ToDType(OpMath(params[i].scalar_type()));
    int step = b.ConvertIfNeeded(Rank0(b, TensorOrScalar(l, state_steps[i], at::kFloat)), DType::kF64);
    int bc1 = b.Binary(OpCode::kSubtract, one, b.Binary(OpCode::kPower, beta1, step));
    int bc2 = b.Binary(OpCode::kSubtract, one, b.Binary(OpCode::kPower, beta2, step));
    per_step.emplace_back(b.ConvertIfNeeded(b.Unary(OpCode::kNegate, b.Binary(OpCode::kDivide, lr, bc1)), ct),
                          b.ConvertIfNeeded(b.Unary(OpCode::kSqrt, bc2), ct));
    for (int h : {decay, wd, avg_coeff, beta2, sq_coeff, eps}) cast(h, ct);
    if (c.grad_scale >= 0) cast(c.grad_scale, ct);
  }

  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& param = params[i];
    at::ScalarType cs = OpMath(param.scalar_type());
    DType ct = ToDType(cs);
    Dims dims = ToDims(param.sizes());
    auto bc = [&](int scalar) { return b.BroadcastTo(cast(scalar, ct), dims); };
    int p_in = l.Input(param, cs);
    int g_in = l.Input(grads[i], cs);
    int m_in = l.Input(exp_avgs[i], cs);
    int v_in = l.Input(exp_avg_sqs[i], cs);
    int vmax_in = a.amsgrad ? l.Input(max_exp_avg_sqs[i], cs) : -1;

    int g = UpdateGradient(l, c, g_in, a.maximize, grads[i], cast);
    int p = p_in;
    if (a.weight_decay != 0) {
      if (a.adamw) p = b.Binary(OpCode::kMultiply, p, bc(decay));
      else g = b.Binary(OpCode::kAdd, g, b.Binary(OpCode::kMultiply, p, bc(wd)));
    }
    int w = bc(avg_coeff);
    int diff = b.Binary(OpCode::kSubtract, g, m_in);
    int m = small_weight
                ? b.Binary(OpCode::kAdd, m_in, b.Binary(OpCode::kMultiply, w, diff))
                : b.Binary(OpCode::kSubtract, g,
                           b.Binary(OpCode::kMultiply, diff, b.Binary(OpCode::kSubtract, b.ScalarLike(1, w), w)));
    int v = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, v_in, bc(beta2)),
                     b.Binary(OpCode::kMultiply, b.Binary(OpCode::kMultiply, bc(sq_coeff), g), g));
    int vmax = a.amsgrad ? b.Binary(OpCode::kMaximum, vmax_in, v) : -1;
    int root = b.Unary(OpCode::kSqrt, a.amsgrad ? vmax : v);
    int denom = b.Binary(OpCode::kAdd, b.Binary(OpCode::kDivide, root, b.BroadcastTo(per_step[i].second, dims)), bc(eps));
    int update = b.Binary(OpCode::kMultiply, b.BroadcastTo(per_step[i].first, dims), m);
    p = b.Binary(OpCode::kAdd, p, b.Binary(OpCode::kDivide, update, denom));

    Store(l, c, p, p_in, param);
    Store(l, c, m, m_in, exp_avgs[i]);
    Store(l, c, v, v_in, exp_avg_sqs[i]);
    if (a.amsgrad) Store(l, c, vmax, vmax_in, max_exp_avg_sqs[i]);
  }
  l.Run();
}

#define TPU_FUSED_ADAM(fname, opname, adamw, LR_TYPE, LR_NUMBER, LR_TENSOR)                                        \
  void fname(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,                       \
             TensorList max_exp_avg_sqs, TensorList state_steps, LR_TYPE lr, double beta1, double beta2,           \
             double weight_decay, double eps, bool amsgrad, bool maximize, const OptTensor& grad_scale,            \
             const OptTensor& found_inf) {                                                                          \
    AdamConfig a{LR_NUMBER, LR_TENSOR, beta1, beta2, weight_decay, eps, amsgrad, maximize, adamw};                \
    FusedAdam(opname, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, a, grad_scale, found_inf); \
  }
TPU_FUSED_ADAM(fused_adam_, "aten::_fused_adam_", false, double, lr, nullptr)
TPU_FUSED_ADAM(fused_adam_tensor_lr_, "aten::_fused_adam_", false, const at::Tensor&, 0.0, &lr)
TPU_FUSED_ADAM(fused_adamw_, "aten::_fused_adamw_", true, double, lr, nullptr)
TPU_FUSED_ADAM(fused_adamw_tensor_lr_, "aten::_fused_adamw_", true, const at::Tensor&, 0.0, &lr)
#undef TPU_FUSED_ADAM

// ---- SGD ---------------------------------------------------------------------------------------
struct SgdConfig {
  double weight_decay, momentum, lr;
  const at::Tensor* lr_tensor;
  double dampening;
  bool nesterov, maximize, is_first_step;
};

void FusedSgd(const char* op, TensorList params, TensorList grads, TensorList momentum_buffers, const SgdConfig& s,
              const OptTensor& grad_scale, const OptTensor& found_inf) {
  std::unordered_set<const void*> written;
  CheckParams(op, params, &written);
  CheckList(op, "grads", params, grads, GradsWritten(grad_scale) ? &written : nullptr);
  bool has_momentum = s.momentum != 0;
  if (has_momentum) {
    CheckList(op, "momentum_buffer_list", params, momentum_buffers, &written);
  } else {
    TORCH_CHECK(momentum_buffers.empty(), op, ": momentum_buffer_list must be empty when momentum is 0");
  }
  if (params.empty()) return;
  c10::DeviceGuard guard(params[0].device());

  Lowering l(op);
  Builder& b = l.b();
  Common c = Prepare(l, op, grad_scale, found_inf);  // parameters: grad_scale, found_inf, lr, ...
  int lr = LearningRate(l, op, s.lr, s.lr_tensor);
  int wd = l.Scalar(s.weight_decay, at::kDouble);
  int momentum = l.Scalar(s.momentum, at::kDouble);
  int grad_coeff = l.Scalar(1 - s.dampening, at::kDouble);
  Rank0InDType cast(b);
  for (const at::Tensor& p : params)
    for (int h : {lr, wd, momentum, grad_coeff, c.grad_scale})
      if (h >= 0) cast(h, ToDType(OpMath(p.scalar_type())));

  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& param = params[i];
    at::ScalarType ct = OpMath(param.scalar_type());
    Dims dims = ToDims(param.sizes());
    auto bc = [&](int scalar) { return b.BroadcastTo(cast(scalar, ToDType(ct)), dims); };
    int p_in = l.Input(param, ct);
    int g_in = l.Input(grads[i], ct);
    int buf_in = has_momentum && !s.is_first_step ? l.Input(momentum_buffers[i], ct) : -1;

    int g = UpdateGradient(l, c, g_in, s.maximize, grads[i], cast);
    if (s.weight_decay != 0) g = b.Binary(OpCode::kAdd, g, b.Binary(OpCode::kMultiply, p_in, bc(wd)));
    if (has_momentum) {
      int buf = s.is_first_step ? g
                                : b.Binary(OpCode::kAdd, b.Binary(OpCode::kMultiply, buf_in, bc(momentum)),
                                           b.Binary(OpCode::kMultiply, g, bc(grad_coeff)));
      // A skipped first step leaves the buffer as it was (uninitialized memory on CPU too).
      int buf_old = buf_in >= 0 || c.found_skip < 0 ? buf_in : l.Input(momentum_buffers[i], ct);
      Store(l, c, buf, buf_old, momentum_buffers[i]);
      g = s.nesterov ? b.Binary(OpCode::kAdd, g, b.Binary(OpCode::kMultiply, buf, bc(momentum))) : buf;
    }
    int p = b.Binary(OpCode::kSubtract, p_in, b.Binary(OpCode::kMultiply, g, bc(lr)));
    Store(l, c, p, p_in, param);
  }
  l.Run();
}

void fused_sgd_(TensorList self, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
                double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                const OptTensor& grad_scale, const OptTensor& found_inf) {
  SgdConfig s{weight_decay, momentum, lr, nullptr, dampening, nesterov, maximize, is_first_step};
  FusedSgd("aten::_fused_sgd_", self, grads, momentum_buffer_list, s, grad_scale, found_inf);
}

void fused_sgd_tensor_lr_(TensorList self, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
                          double momentum, const at::Tensor& lr, double dampening, bool nesterov, bool maximize,
                          bool is_first_step, const OptTensor& grad_scale, const OptTensor& found_inf) {
  SgdConfig s{weight_decay, momentum, 0.0, &lr, dampening, nesterov, maximize, is_first_step};
  FusedSgd("aten::_fused_sgd_", self, grads, momentum_buffer_list, s, grad_scale, found_inf);
}

// ---- GradScaler ------------------------------------------------------------------------------
void CheckAmpScalar(const char* name, const at::Tensor& t, at::ScalarType dtype, const char* dtype_name) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, name, " must be a tpu tensor.");
  TORCH_CHECK(t.numel() == 1, name, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == dtype, name, " must be a ", dtype_name, " tensor.");
}

// Multiplies every gradient by inv_scale in place; found_inf becomes 1 if any element of any
// gradient is inf or NaN (and keeps its value otherwise).
void amp_non_finite_check_and_unscale_(TensorList grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  if (grads.empty()) return;
  CheckAmpScalar("inv_scale", inv_scale, at::kFloat, "float");
  CheckAmpScalar("found_inf", found_inf, at::kFloat, "float");
  for (const at::Tensor& t : grads) {
    TORCH_CHECK(t.device() == found_inf.device(), "one of scaled_grads was not on ", found_inf.device(),
                " (it is on ", t.device(), ").");
    TORCH_CHECK(t.layout() == at::kStrided, "one of scaled_grads was not a strided tensor.");
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), "one of scaled_grads is not a floating-point tensor (",
                t.scalar_type(), ").");
  }
  c10::DeviceGuard guard(found_inf.device());
  Lowering l("aten::_amp_foreach_non_finite_check_and_unscale_");
  Builder& b = l.b();
  int inv = Rank0(b, l.Input(inv_scale));
  int found_in = l.Input(found_inf);
  int inv_f64 = b.ConvertIfNeeded(inv, DType::kF64);  // made before any tensor op (double gradients)
  std::vector<int> bad;
  for (const at::Tensor& t : grads) {
    if (t.numel() == 0) continue;
    at::ScalarType ct = OpMath(t.scalar_type());
    Dims dims = ToDims(t.sizes());
    int x = l.Input(t, ct);
    Dims all(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) all[d] = static_cast<int64_t>(d);
    bad.push_back(b.Reduce(b.Unary(OpCode::kNot, b.Unary(OpCode::kIsFinite, x)), b.Constant(0, DType::kBool), all,
                           ReduceKind::kOr));
    // x * 1 == x exactly (inf and NaN included), so CPU's inv_scale == 1 shortcut needs no branch.
    int scale = ct == at::kDouble ? inv_f64 : inv;
    l.Output(b.Binary(OpCode::kMultiply, x, b.BroadcastTo(scale, dims)), t);
  }
  int any = b.Constant(0, DType::kBool);
  for (int v : bad) any = b.Binary(OpCode::kOr, any, v);
  Dims fdims = ToDims(found_inf.sizes());
  l.Output(b.Select(b.BroadcastTo(any, fdims), b.ScalarLike(1, found_in), found_in), found_inf);
  l.Run();
}

// GradScaler's scale update: backoff after a step with inf/NaN gradients, growth after
// growth_interval clean steps in a row (never to inf), as ATen's kernels.
at::Tensor& amp_update_scale_(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                              double growth_factor, double backoff_factor, int64_t growth_interval) {
  CheckAmpScalar("growth_tracker", growth_tracker, at::kInt, "int");
  CheckAmpScalar("current_scale", scale, at::kFloat, "float");
  CheckAmpScalar("found_inf", found_inf, at::kFloat, "float");
  CheckSameDevice("_amp_update_scale_", {&scale, &growth_tracker, &found_inf});
  c10::DeviceGuard guard(scale.device());
  Lowering l("aten::_amp_update_scale_");
  Builder& b = l.b();
  int s = Rank0(b, l.Input(scale));
  int tracker = Rank0(b, l.Input(growth_tracker));
  int found = Rank0(b, l.Input(found_inf));
  int growth = l.Scalar(growth_factor, at::kDouble);
  int backoff = l.Scalar(backoff_factor, at::kDouble);
  int interval = l.Scalar(growth_interval, at::kInt);
  int s64 = b.Convert(s, DType::kF64);
  int backed_off = b.Convert(b.Binary(OpCode::kMultiply, s64, backoff), DType::kF32);
  int grown = b.Convert(b.Binary(OpCode::kMultiply, s64, growth), DType::kF32);
  grown = b.Select(b.Unary(OpCode::kIsFinite, grown), grown, s);
  int successful = b.Binary(OpCode::kAdd, tracker, b.ScalarLike(1, tracker));
  int grow = b.Compare(CompareDirection::kEQ, successful, interval);
  int had_inf = b.Compare(CompareDirection::kNE, found, b.ScalarLike(0, found));
  int zero = b.ScalarLike(0, tracker);
  int new_scale = b.Select(had_inf, backed_off, b.Select(grow, grown, s));
  int new_tracker = b.Select(had_inf, zero, b.Select(grow, zero, successful));
  l.Output(b.Reshape(new_scale, ToDims(scale.sizes())), scale);
  l.Output(b.Reshape(new_tracker, ToDims(growth_tracker.sizes())), growth_tracker);
  l.Run();
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // The functional and out= forms are CompositeExplicitAutograd wrappers of these.
  m.impl("_fused_adam_", fused_adam_);
  m.impl("_fused_adam_.tensor_lr", fused_adam_tensor_lr_);
  m.impl("_fused_adamw_", fused_adamw_);
  m.impl("_fused_adamw_.tensor_lr", fused_adamw_tensor_lr_);
  m.impl("_fused_sgd_", fused_sgd_);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_tensor_lr_);
  m.impl("_amp_foreach_non_finite_check_and_unscale_", amp_non_finite_check_and_unscale_);
  m.impl("_amp_update_scale_", amp_update_scale_);
}

}  // namespace tpu::torch_bridge
