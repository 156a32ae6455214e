"""What the OpInfo walk compares, and how closely: one tolerance for every op, loosened per op only
with a written reason; the ops whose values are random (compared by dtype and shape only)."""
from __future__ import annotations

import torch

# torch.testing.assert_close's defaults: float32 within ~10 ulp, bfloat16 within 2 ulp.
DEFAULT = {
    torch.float32: (1.3e-6, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}

# Values drawn from a random generator (the device's differs from CPU's by design) or left
# uninitialized: only dtypes and shapes are compared.
RANDOM_OPS = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "uniform", "rand_like", "randn_like", "randint_like", "randint", "randn", "rand", "randperm",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
    # pooling windows drawn at random; a random projection (torch.randn inside)
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "svd_lowrank", "pca_lowrank",
}


def random_sample(op, sample) -> bool:
    """Samples of otherwise deterministic ops that draw random numbers (attention dropout)."""
    if op.name == "nn.functional.scaled_dot_product_attention":
        return sample.kwargs.get("dropout_p", 0.0) > 0
    if op.name == "nn.functional.multi_head_attention_forward":
        return sample.args[9] > 0 and sample.kwargs.get("training", True)
    return False


# Ops whose tensor arguments (other than the input) PyTorch requires on the CPU.
CPU_TENSOR_ARGS = {
    "tensor_split": "tensor_indices_or_sections must be a CPU tensor (ATen checks)",
}

# op id -> ({dtype: (rtol, atol)}, reason). Keep each entry justified.
LOOSER: dict[str, tuple[dict, str]] = {}

# op id -> ({dtype: (rtol, atol)}, reason) for gradients (float32).
LOOSER_GRAD: dict[str, tuple[dict, str]] = {}

# Ops whose float32 gradients CPU computes less accurately (another algorithm, or a rounding
# residue): a gradient mismatch goes to the "accurate" criterion against float64 gradients.
JUDGE_GRAD: dict[str, str] = {
    "native_layer_norm": "a one-element group: CPU's backward leaves a residue of x*rstd - mean*rstd "
                         "(rstd = 1/sqrt(eps) = 316) where ours is the exact 0",
    "nn.functional.layer_norm": "as native_layer_norm",
    "nn.functional.scaled_dot_product_attention": "CPU's flash attention backward sums in another order",
    "linalg.householder_product": "CPU's backward is an ill-conditioned sequence of reflections",
    "linalg.lstsq": "the backward goes through an SVD whose conditioning amplifies rounding",
    "linalg.lstsq.grad_oriented": "as linalg.lstsq",
    **{name: "convolution gradients are sums of products in another order" for name in (
        "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.conv_transpose1d",
        "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d")},
}


# Ops whose CPU kernel rounds differently from one float32 computation rounded once (ours), so
# results legitimately differ by more than the tolerance: a mismatch goes to a second opinion from
# the op computed in float64 (compare.judge). op id -> ({dtypes}, criterion, reason).
BF16 = {torch.bfloat16}
JUDGE: dict[str, tuple[set, str, str]] = {
    # CPU rounds intermediates to bfloat16 where we compute in float32 and round once.
    "addr": (BF16, "bilinear", "CPU's kernel and the decomposition we run (outer, mul, add) round "
                               "each step to bfloat16, in different orders"),
    "_unsafe_masked_index_put_accumulate": (BF16, "accurate", "CPU accumulates duplicates in bfloat16"),
    "index_reduce.mean": (BF16, "accurate", "CPU sums the slices in bfloat16 before dividing by the count"),
    "div.trunc_rounding": (BF16, "accurate", "CPU's vectorized kernel rounds the quotient to "
                           "bfloat16 before truncating (its scalar path does not)"),
    "linspace": (BF16, "accurate", "CPU rounds the step to bfloat16 before scaling it"),
    "linspace.tensor_overload": (BF16, "accurate", "CPU rounds the step to bfloat16 before scaling it"),
    "log_softmax": (BF16, "accurate", "CPU rounds x - max to bfloat16 before subtracting log(sum)"),
    "masked.log_softmax": (BF16, "accurate", "as log_softmax"),
    "masked.logsumexp": (BF16, "accurate", "CPU's composite rounds each step to bfloat16"),
    "nn.functional.nll_loss": (BF16, "accurate", "CPU divides the bfloat16-rounded sum by the weight total"),
    "nn.functional.binary_cross_entropy_with_logits": (BF16, "accurate", "CPU's composite rounds each step to bfloat16"),
    "nn.functional.linear_cross_entropy": (BF16, "accurate", "CPU's composite rounds each step to bfloat16"),
    "native_layer_norm": (BF16, "accurate", "CPU computes x*rstd - mean*rstd: a zero deviation leaves a residue"),
    **{name: (BF16, "accurate", "CPU's bfloat16 batch norm rounds per path: its non-contiguous kernel rounds each "
                                "step of (x - mean) * invstd * weight + bias to bfloat16, and whether the "
                                "variance sum is rounded before invstd depends on the shape")
       for name in ("native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update",
                    "nn.functional.batch_norm", "nn.functional.instance_norm")},
    "nn.functional.layer_norm": (BF16, "accurate", "as native_layer_norm"),
    **{name: (BF16, "accurate", "CPU's bfloat16 linear/trilinear upsampling rounds intermediates to bfloat16 "
                                "(its error against float64 is up to 3x ours); we compute in float32 and round once")
       for name in ("nn.functional.interpolate.linear", "nn.functional.interpolate.trilinear")},
    # A different algorithm: CPU runs flash attention (blockwise online softmax), we the math form.
    "nn.functional.scaled_dot_product_attention": ({torch.float32, torch.bfloat16}, "accurate",
                                                   "CPU's flash kernel sums in another order"),
}
# Sums of products: another summation order (blocking, threads, oneDNN) rounds differently, and
# under cancellation the difference scales with sum |a*b|, not with the result.
JUDGE.update({name: ({torch.float32, torch.bfloat16}, "bilinear", "dot products: rounding scales with sum |a*b|")
              for name in ("mm", "bmm", "addmm", "addmm.decomposed", "baddbmm", "addbmm", "addmv", "mv",
                           "dot", "vdot", "inner", "matmul", "__rmatmul__", "einsum", "tensordot",
                           "nn.functional.linear", "nn.functional.bilinear", "linalg.multi_dot",
                           "linalg.vecdot", "outer", "kron")})
# Convolutions are sums of products too (oneDNN's blocking sums in another order than CPU's).
CONVS = ("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.conv_transpose1d",
         "nn.functional.conv_transpose2d", "nn.functional.conv_transpose3d")
JUDGE.update({name: ({torch.float32, torch.bfloat16}, "bilinear", "convolution: rounding scales with sum |x*w|")
              for name in CONVS})

# (op id, dtype) whose values PyTorch itself computes differently per device: dtypes and shapes
# only. -> reason.
UNVERIFIABLE: dict[tuple[str, torch.dtype], str] = {
    ("nn.functional.linear_cross_entropy.chunked", torch.bfloat16):
        "acc_policy='auto' accumulates in float32 on CPU and in bfloat16 on other devices",
    ("nn.functional.linear_cross_entropy.chunked_none", torch.bfloat16):
        "acc_policy='auto' accumulates in float32 on CPU and in bfloat16 on other devices",
}


# Ops whose index results are unspecified among equal elements: CPU orders ties as its algorithm
# happens to leave them (introselect, a non-stable sort), the device as a stable sort does. Their
# index outputs are checked by the input elements they select (and for being distinct), every
# other output exactly. op id -> (the sample's dim, the index output's position or None for a lone
# tensor, whether the dim is kept in the index output).
def _arg(sample, i, name, default):
    return sample.kwargs.get(name, sample.args[i] if len(sample.args) > i else default)


TIE_INDICES = {
    "sort": lambda s: None if s.kwargs.get("stable") else (_arg(s, 0, "dim", -1), 1, True),
    "argsort": lambda s: None if s.kwargs.get("stable") else (_arg(s, 0, "dim", -1), None, True),
    "topk": lambda s: (_arg(s, 1, "dim", -1), 1, True),
    "kthvalue": lambda s: (_arg(s, 1, "dim", -1), 1, _arg(s, 2, "keepdim", False)),
    "median": lambda s: (_arg(s, 0, "dim", None), 1, _arg(s, 1, "keepdim", False)),
    "nanmedian": lambda s: (_arg(s, 0, "dim", None), 1, _arg(s, 1, "keepdim", False)),
}


def tie_indices(op, sample):
    """(dim, index output position, keepdim) when `sample`'s index results may order ties freely."""
    spec = TIE_INDICES.get(_id(op))
    r = spec(sample) if spec else None
    return r if r is not None and r[0] is not None else None


def judge_criterion(op, dtype):
    entry = JUDGE.get(_id(op))
    return entry[1] if entry and dtype in entry[0] else None


def _id(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def is_random(op) -> bool:
    return op.name in RANDOM_OPS or bool(op.has_nondeterministic_output)


def values_comparable(op, dtype) -> bool:
    return not is_random(op) and (_id(op), dtype) not in UNVERIFIABLE


def tolerance(op) -> dict:
    tol = dict(DEFAULT)
    tol.update(LOOSER.get(_id(op), ({}, ""))[0])
    return tol


def judges_grads(op) -> bool:
    return _id(op) in JUDGE_GRAD


def grad_tolerance(op) -> dict:
    tol = tolerance(op)
    tol.update(LOOSER_GRAD.get(_id(op), ({}, ""))[0])
    return tol
