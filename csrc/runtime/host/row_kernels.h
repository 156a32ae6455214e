// Fused row kernels: softmax, log-softmax, layer norm, RMS norm and cross-entropy, forward and
// backward, each one pass per row (the row read once or twice from cache, written once) instead
// of the chain of reduce + elementwise programs the lowerings emit today (csrc/torch/lower/
// softmax.cc, norm.cc, loss.cc). The host planner runs the softmax and log-softmax chains (forward and
// backward) and layer norm's forward as these kernels (Note [Row chains], row_match.cc); the
// others are not matched yet. The IR each one
// replaces is written above it.
//
// Conventions. A "row" is the dims [first, last) of a view (one dim for softmax and
// cross-entropy, the normalized trailing dims for the norms); they must merge into one strided run
// (any stride), the other dims index the rows in any layout. Row-shaped operands (weight, bias)
// have the row's dims; per-row operands (mean, rstd, loss, targets) have the other dims, in
// order, plus any number of trailing size-1 dims. Views may be strided and of type f32, bf16 or
// f16 (values computed in f32 and rounded once when stored, as the lowerings do); sums are the reduce
// kernel's (Note [Float sums], reduce_simd.h), so the results equal the IR chain's for f32 rows. float64 and
// layouts the kernels do not take return Unimplemented (the caller keeps the IR chain).
#pragma once

#include "base/status.h"
#include "runtime/host/view.h"

namespace tpu::host {

// y = softmax(x) along dim (log: log_softmax). IR (softmax.cc Forward):
//   m = reduce_max(x, dim); s = x - bcast(m); e = exp(s); z = reduce_add(e, dim)
//   softmax: y = e / bcast(z)            log_softmax: y = s - bcast(log(z))
// fill (softmax only; null for none): the safe-softmax guard of PyTorch's _safe_softmax (SDPA's
// math path) -- rows whose every x is -inf are *fill (a rank-0 float32 view) instead of the NaN
// their chain computes. IR: select(bcast(reduce_and(x == -inf, dim)), bcast(fill), y).
Status SoftmaxRows(const View& x, int dim, bool log, const View& y, const View* fill = nullptr);

// dx from the output y and its gradient g. IR (softmax.cc Backward):
//   softmax: dx = y * (g - bcast(reduce_add(g * y, dim)))
//   log_softmax: dx = g - exp(y) * bcast(reduce_add(g, dim))
Status SoftmaxBackwardRows(const View& g, const View& y, int dim, bool log, const View& dx);

// Layer norm over dims [axis, rank). weight/bias: null for none; mean/rstd: null when not wanted.
// IR (norm.cc layer_norm): mu = reduce_add(x)/n; xc = x - mu; var = reduce_add(xc * xc)/n;
//   r = rsqrt(var + eps); y = xc * r (* w) (+ b)
Status LayerNormRows(const View& x, int axis, const View* weight, const View* bias, double eps,
                     const View& y, const View* mean, const View* rstd);

// The sums of a variance over dims [axis, rank) (reduce_stats.cc LowerVar): mu = reduce_add(x)/n;
//   ss = reduce_add((x - mu) * (x - mu)). The divide by n - correction stays outside the chain.
//   mean: null when not wanted.
Status VarianceRows(const View& x, int axis, const View& ss, const View* mean);

// IR (norm.cc layer_norm_backward), xhat = (x - mu) * r, gw = g * w:
//   dx = r * (gw - mean(gw) - xhat * mean(gw * xhat)); dw = sum_rows(g * xhat); db = sum_rows(g)
// dx, dw, db: null when not wanted.
Status LayerNormBackwardRows(const View& g, const View& x, int axis, const View& mean,
                             const View& rstd, const View* weight, const View* dx, const View* dw,
                             const View* db);

// RMS norm (llama.py RMSNorm, torch's rms_norm): r = rsqrt(reduce_add(x * x)/n + eps);
//   y = x * r (* w). rrms: the per-row r, null when not wanted.
Status RmsNormRows(const View& x, int axis, const View* weight, double eps, const View& y,
                   const View* rrms);

// xhat = x * r, gw = g * w: dx = r * (gw - xhat * mean(gw * xhat)); dw = sum_rows(g * xhat).
Status RmsNormBackwardRows(const View& g, const View& x, int axis, const View& rrms,
                           const View* weight, const View* dx, const View* dw);

// Cross-entropy along the class dim `dim`: loss[r] = logsumexp(x_r) - x_r[t_r] (0 where t_r is
// ignore_index; an out-of-range target is an error). targets: i64 per row. lse: per-row
// logsumexp (f32) for the backward, null when not wanted. IR: log_softmax (above) followed by
// nll_loss's gather of -logp[t] and select on t != ignore_index (loss.cc NllForward).
Status CrossEntropyRows(const View& x, int dim, const View& targets, int64_t ignore_index,
                        const View& loss, const View* lse);

// dx = (softmax(x) - onehot(t)) * gl[r], 0 on ignored rows; gl: the per-row gradient of the loss
// (for reduction='mean': grad / valid count, as a broadcast view). IR: nll_loss_backward's
// scatter of -gl into zeros followed by log_softmax's backward.
Status CrossEntropyBackwardRows(const View& x, int dim, const View& targets, int64_t ignore_index,
                                const View& gl, const View& dx);

}  // namespace tpu::host
