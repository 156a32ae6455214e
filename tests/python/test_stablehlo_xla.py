"""The IR we emit is real StableHLO with the same semantics: each program an op compiles is printed
(the program log), handed to XLA (jaxlib, CPU) and run there on the same inputs; XLA's result must
match both the host executor's (the tpu tensor) and PyTorch's CPU result.

Parameters of a program are, in order, the Input()/Scalar() calls of its lowering
(csrc/torch/lower/*.cc); a Python number is a rank-0 parameter. Each test lists them explicitly and
the helper checks them against the program's signature, so a lowering that changes its parameters
fails loudly here instead of silently testing something else.

Tolerances: float32 rtol=1e-5, atol=1e-6 for every op, transcendental ones included: XLA's
exp/tanh/erf/logistic are its own approximations, not libm's, but on these inputs they stay within
that bound of the host executor and of PyTorch (the largest gap seen is 3e-7 absolute, on gelu near
zero). Random ops are not expected to match bits: only that XLA parses, compiles and runs them to
results of the right kind.
"""
import re

import pytest
import torch
import torch.nn.functional as F

from conftest import to_tpu
from xla_check import check_xla, logged_program, randn, run_on_xla, signature, xla_client


@pytest.fixture(scope="module")
def xla():
    return xla_client()


# ---- elementwise binary ----------------------------------------------------------------------

def test_add_alpha_broadcast(xla):
    a, b = randn(3, 4), randn(4, seed=1)
    text = check_xla(xla, "aten::add", lambda x, y: torch.add(x, y, alpha=2.5), (a, b), [a, b, 2.5])
    assert "stablehlo.broadcast_in_dim" in text


def test_add_scalar_and_ints(xla):
    a = randn(2, 5)
    check_xla(xla, "aten::add", lambda x: x + 1.5, (a,), [a, 1.5])
    i = torch.arange(-6, 6).reshape(3, 4)
    check_xla(xla, "aten::sub", lambda x, y: torch.sub(x, y, alpha=3), (i, i.flip(1)), [i, i.flip(1), 3])


def test_mul_div_noncontiguous(xla):
    a, b = randn(4, 3), randn(3, 4, seed=1)
    check_xla(xla, "aten::mul", lambda x, y: x.t() * y, (a, b), [a.t(), b])
    b = b.abs() + 0.5
    check_xla(xla, "aten::div", lambda x, y: x.t() / y, (a, b), [a.t(), b])
    i, j = torch.arange(1, 13).reshape(3, 4), torch.tensor([1, 2, 3, 5])
    check_xla(xla, "aten::div", lambda x, y: x / y, (i, j), [i, j])  # true division of ints
    check_xla(xla, "aten::div", lambda x, y: torch.div(x, y, rounding_mode="floor"), (-i, j), [-i, j])


@pytest.mark.parametrize("cmp", ["lt", "le", "eq", "ne", "gt", "ge"])
def test_comparisons_give_i1(xla, cmp):
    a = torch.tensor([[1.0, 2.0, float("nan")], [0.5, -1.0, 3.0]])
    b = torch.tensor([1.0, 3.0, float("nan")])
    text = check_xla(xla, f"aten::{cmp}", getattr(torch, cmp), (a, b), [a, b])
    assert "tensor<2x3xi1>" in text
    check_xla(xla, f"aten::{cmp}", lambda x: getattr(torch, cmp)(x, 1.0), (a,), [a, 1.0])


def test_where_select(xla):
    c = torch.tensor([[True, False, True], [False, False, True]])
    a, b = randn(2, 3), randn(3, seed=1)
    text = check_xla(xla, "aten::where", torch.where, (c, a, b), [c, a, b])
    assert "stablehlo.select" in text


def test_pow_remainder_maximum_atan2(xla):
    a, b = randn(3, 4), randn(3, 4, seed=1)
    pos = a.abs() + 0.1
    check_xla(xla, "aten::pow", torch.pow, (pos, b), [pos, b])
    check_xla(xla, "aten::remainder", lambda x: x.remainder(0.7), (a,), [a, 0.7])
    a[0, 0] = float("nan")
    check_xla(xla, "aten::maximum", torch.maximum, (a, b), [a, b])  # NaN propagates
    check_xla(xla, "aten::atan2", torch.atan2, (a, b), [a, b])
    check_xla(xla, "aten::clamp", lambda x: x.clamp(-0.5, 0.5), (a,), [a, -0.5, 0.5])


# ---- elementwise unary -----------------------------------------------------------------------

UNARY = {  # name: an IR op the program must contain
    "exp": "stablehlo.exponential", "expm1": "stablehlo.exponential_minus_one", "log": "stablehlo.log",
    "log1p": "stablehlo.log_plus_one", "tanh": "stablehlo.tanh", "sigmoid": "stablehlo.logistic",
    "erf": "chlo.erf", "sin": "stablehlo.sine", "cos": "stablehlo.cosine", "sqrt": "stablehlo.sqrt",
    "rsqrt": "stablehlo.rsqrt", "abs": "stablehlo.abs", "neg": "stablehlo.negate", "sign": "stablehlo.sign",
    "floor": "stablehlo.floor", "ceil": "stablehlo.ceil", "round": "stablehlo.round_nearest_even",
}
# NaN, infinities, signed zeros, tiny values (expm1/log1p/erf keep their relative precision),
# negative values (log/sqrt give NaN), large ones (exp overflows, logistic saturates), ties of
# round-half-to-even, and a normal spread.
SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-10, -1e-10, -1.0, 100.0, -100.0,
            2.5, -2.5, 0.5, -1.5]


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(xla, name):
    x = torch.cat([torch.tensor(SPECIALS), randn(30) * 3]).reshape(4, 11)
    text = check_xla(xla, f"aten::{name}", getattr(torch, name), (x,), [x])
    assert UNARY[name] in text


def test_unary_bf16_and_transposed(xla):
    x = randn(5, 3, dtype=torch.bfloat16)
    check_xla(xla, "aten::tanh", lambda v: v.t().tanh(), (x,), [x.t()])
    check_xla(xla, "aten::exp", torch.exp, (x,), [x])


# ---- convert ---------------------------------------------------------------------------------

CONVERTS = [
    (torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32), (torch.float32, torch.int64),
    (torch.int64, torch.float32), (torch.float32, torch.bool), (torch.bool, torch.float32),
    (torch.int64, torch.bool), (torch.bfloat16, torch.int64), (torch.int64, torch.bfloat16),
    (torch.bool, torch.int64), (torch.float32, torch.uint8), (torch.int32, torch.float64),
]


@pytest.mark.parametrize("src,dst", CONVERTS, ids=lambda t: str(t).replace("torch.", ""))
def test_convert(xla, src, dst):
    # Values that round differently in each direction: bf16 ties (1 + 2^-8 rounds to even),
    # negative fractions (truncation toward zero), zeros and non-zeros for bool.
    v = torch.tensor([0.0, -0.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.75, 2.5, 7.9, 100.0, 255.0, -0.3])
    if dst == torch.uint8 or src == torch.bool:
        v = v.abs()
    x = v.to(src)
    if src.is_floating_point and (dst.is_floating_point or dst == torch.bool):
        # Non-finite values keep their meaning (any non-zero, NaN included, is true). Not
        # denormals: XLA's CPU runtime flushes them to zero, so convert(1e-45) -> i1 is false there.
        x = torch.cat([x, torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=src)])
    if src == torch.int64 and dst.is_floating_point:
        # Integers that round: 2^24 + 1 is a float32 tie; int64 -> bfloat16 rounds through float32
        # (twice) in PyTorch, in XLA and in the host executor alike.
        x = torch.cat([x, torch.tensor([2 ** 24 + 1, -(2 ** 24 + 3), 2 ** 32 + 2 ** 24 + 1, 257])])
    text = check_xla(xla, "aten::copy_", lambda t: t.to(dst), (x,), [x], rtol=0, atol=0)
    assert "stablehlo.convert" in text


# ---- reductions ------------------------------------------------------------------------------

def test_sum_over_dims(xla):
    x = randn(3, 4, 5)
    check_xla(xla, "aten::sum", lambda t: t.sum((0, 2)), (x,), [x])
    check_xla(xla, "aten::sum", lambda t: t.sum(1, keepdim=True), (x,), [x])
    xb = x.to(torch.bfloat16)
    check_xla(xla, "aten::sum", lambda t: t.sum(2), (xb,), [xb])
    m = x > 0
    check_xla(xla, "aten::sum", lambda t: t.sum(1), (m,), [m])  # bool -> i64


def test_amax_amin_with_nan(xla):
    x = randn(4, 5)
    x[1, 2] = float("nan")
    check_xla(xla, "aten::amax", lambda t: t.amax(1), (x,), [x])
    check_xla(xla, "aten::amin", lambda t: t.amin(0), (x,), [x])
    i = torch.tensor([[3, -7, 3], [0, 9, 9]])
    check_xla(xla, "aten::amax", lambda t: t.amax(0), (i,), [i])


def test_argmax_argmin_variadic_reduce(xla):
    # Ties keep the first index; a NaN wins (the first NaN), as in PyTorch.
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, float("nan"), 5.0, float("nan")], [-1.0, -1.0, -4.0, -4.0]])
    text = check_xla(xla, "aten::argmax", lambda t: t.argmax(1), (x,), [x])
    assert re.search(r'%\d+:2 = "stablehlo.reduce"', text)
    check_xla(xla, "aten::argmin", lambda t: t.argmin(1), (x,), [x])
    check_xla(xla, "aten::argmax", lambda t: t.argmax(), (x,), [x])
    i = torch.tensor([[5, 1, 5], [-3, -3, 2]], dtype=torch.int32)
    check_xla(xla, "aten::argmin", lambda t: t.argmin(0), (i,), [i])
    check_xla(xla, "aten::max", lambda t: t.max(1), (x,), [x, x])  # values and indices


def test_sort_topk_kthvalue_median(xla):
    # A stable variadic sort of (x, iota): ties keep their order, NaN sorts greatest.
    nan = float("nan")
    x = torch.tensor([[3.0, nan, 1.0, 3.0, -0.0, 0.0], [nan, 2.0, 2.0, nan, -5.0, 7.0]])
    text = check_xla(xla, "aten::sort", lambda t: torch.sort(t, stable=True), (x,), [x])
    assert re.search(r'%\d+:2 = "stablehlo.sort"', text) and "is_stable = true" in text
    check_xla(xla, "aten::sort", lambda t: torch.sort(t, dim=0, descending=True, stable=True), (x,), [x])
    check_xla(xla, "aten::sort", lambda t: torch.sort(t, descending=True, stable=True), (x,), [x])
    i = torch.tensor([[5, -1, 5, 2], [0, 0, -3, 9]], dtype=torch.int32)
    check_xla(xla, "aten::sort", lambda t: torch.sort(t.t(), stable=True), (i,), [i.t()])
    b = torch.tensor([True, False, True, False])
    check_xla(xla, "aten::sort", lambda t: torch.sort(t, descending=True, stable=True), (b,), [b])
    y = randn(4, 7, dtype=torch.bfloat16)
    check_xla(xla, "aten::topk", lambda t: torch.topk(t, 3, dim=1), (y,), [y])
    check_xla(xla, "aten::kthvalue", lambda t: torch.kthvalue(t, 2, dim=0), (x[:, :3],), [x[:, :3], 1])
    z = randn(5, 6)
    check_xla(xla, "aten::median", lambda t: torch.median(t, dim=1), (z,), [z])
    check_xla(xla, "aten::nanmedian", torch.nanmedian, (x,), [x])


def test_mean_var_std_prod_logsumexp(xla):
    x = randn(4, 6)
    check_xla(xla, "aten::mean", lambda t: t.mean(1), (x,), [x])
    # The scalar parameter is the divisor n - correction.
    check_xla(xla, "aten::var", lambda t: t.var(1), (x,), [x, 5.0])
    check_xla(xla, "aten::var_mean", lambda t: torch.var_mean(t, 0, correction=0), (x,), [x, 4.0])
    check_xla(xla, "aten::std", lambda t: t.std(0), (x,), [x, 3.0])
    check_xla(xla, "aten::prod", lambda t: t.prod(1), (x,), [x])
    check_xla(xla, "aten::logsumexp", lambda t: t.logsumexp(1), (x,), [x])
    y = x.clone()
    y[0] = -float("inf")  # a row of -inf: logsumexp is -inf, not NaN
    y[1, 2] = float("inf")
    check_xla(xla, "aten::logsumexp", lambda t: t.logsumexp(1), (y,), [y])
    i = torch.tensor([[3, -2, 5], [1, 7, -1]])
    check_xla(xla, "aten::prod", lambda t: t.prod(1), (i,), [i])
    xb = x.bfloat16()
    check_xla(xla, "aten::mean", lambda t: t.mean(0), (xb,), [xb])
    check_xla(xla, "aten::amax", lambda t: t.amax(1), (xb,), [xb])


@pytest.mark.parametrize("ord", [2, 1, 0, 3, float("inf"), -float("inf")])
def test_vector_norm(xla, ord):
    x = randn(4, 6)
    x[0, 1] = 0.0
    extra = [float(ord), 1.0 / ord] if ord == 3 else []  # a general order: |x|^p summed, ^(1/p)
    check_xla(xla, "aten::linalg_vector_norm", lambda t: torch.linalg.vector_norm(t, ord, dim=1), (x,), [x] + extra)


def test_any_all(xla):
    m = randn(3, 4) > 0.5
    check_xla(xla, "aten::any", lambda t: t.any(1), (m,), [m])
    check_xla(xla, "aten::all", lambda t: t.all(0), (m,), [m])


# ---- gather / scatter ------------------------------------------------------------------------

def test_index_select_gather_index(xla):
    x, i = randn(4, 5), torch.tensor([3, 0, 3, 1])
    text = check_xla(xla, "aten::index_select", lambda t, j: t.index_select(1, j), (x, i), [x, i])
    assert "stablehlo.gather" in text
    j = torch.tensor([[0, 4], [1, 1], [2, 0], [3, 3]])
    check_xla(xla, "aten::gather", lambda t, k: t.gather(1, k), (x, j), [x, j])
    check_xla(xla, "aten::index", lambda t, k: t[k], (x, i), [x, i])


def test_scatter_add_and_embedding_backward(xla):
    base, j, src = randn(3, 5), torch.tensor([[0, 1, 1], [4, 4, 4], [2, 0, 3]]), randn(3, 3, seed=1)
    text = check_xla(xla, "aten::scatter_add", lambda b, k, s: b.scatter_add(1, k, s), (base, j, src), [base, j, src])
    assert "stablehlo.scatter" in text
    check_xla(xla, "aten::scatter", lambda b, k, s: b.scatter(1, k[:, :1], s), (base, j, src), [base, j[:, :1], src])
    grad, idx = randn(6, 4), torch.tensor([1, 3, 1, 0, 3, 3])
    check_xla(xla, "aten::embedding_dense_backward",
              lambda g, k: torch.ops.aten.embedding_dense_backward(g, k, 5, 0, False), (grad, idx), [idx, grad, 0])
    check_xla(xla, "aten::embedding_dense_backward",
              lambda g, k: torch.ops.aten.embedding_dense_backward(g, k, 5, -1, True), (grad, idx), [idx, grad, -1])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(xla, reduce, include_self):
    base, src = randn(3, 5), randn(3, 4, seed=1)
    j = torch.tensor([[0, 1, 1, 3], [4, 4, 4, 4], [2, 0, 2, 0]])
    # include_self=False first writes the reduction's identity (a parameter) where src lands.
    ident = {"sum": 0.0, "prod": 1.0, "mean": 0.0, "amax": -float("inf"), "amin": float("inf")}
    extra = [] if include_self else [ident[reduce]]
    check_xla(xla, "aten::scatter_reduce", lambda b, k, v: b.scatter_reduce(1, k, v, reduce, include_self=include_self),
              (base, j, src), [base, j, src] + extra)


def test_multi_index(xla):
    x, i, j = randn(4, 5, 3), torch.tensor([3, 0, 3]), torch.tensor([[1], [4]])
    check_xla(xla, "aten::index", lambda t, a, b: t[a, b], (x, i, j), [x, i, j])  # broadcast to 2x3
    check_xla(xla, "aten::index", lambda t, b: t[:, b], (x, j), [x, j])


def test_index_put_accumulate(xla):
    x, i, v = randn(4, 3), torch.tensor([2, 0, 2]), randn(3, 3, seed=1)
    check_xla(xla, "aten::index_put_", lambda t, k, u: t.index_put_((k,), u, accumulate=True), (x, i, v), [x, v, i])


# ---- shape ops -------------------------------------------------------------------------------

def test_cat(xla):
    a, b = randn(2, 3), randn(4, 3, seed=1)
    text = check_xla(xla, "aten::cat", lambda x, y: torch.cat([x, y]), (a, b), [a, b])
    assert "stablehlo.concatenate" in text
    c = torch.arange(6).reshape(2, 3)
    check_xla(xla, "aten::cat", lambda x, y: torch.cat([x, y], 1), (a, c), [a, c])  # promotes in the program


def test_constant_pad_nd_negative(xla):
    x = randn(3, 4, 5)
    text = check_xla(xla, "aten::constant_pad_nd", lambda t: F.pad(t, (1, -2, -1, 3), value=2.5), (x,), [x, 2.5])
    assert "stablehlo.pad" in text


def test_flip_roll_repeat_tril(xla):
    x = randn(3, 4)
    check_xla(xla, "aten::flip", lambda t: t.flip(0, 1), (x,), [x])
    check_xla(xla, "aten::roll", lambda t: t.roll(1, 1), (x,), [x, 3])
    check_xla(xla, "aten::roll", lambda t: t.roll(-5), (x,), [x, 5])
    text = check_xla(xla, "aten::repeat", lambda t: t.repeat(2, 1, 3), (x,), [x])
    assert "stablehlo.reshape" in text and "stablehlo.broadcast_in_dim" in text
    check_xla(xla, "aten::tril", lambda t: t.tril(1), (x,), [1, x])
    check_xla(xla, "aten::triu", lambda t: t.triu(-1), (x,), [-1, x])


def test_iota_factories(xla):
    # fn gets an empty tensor only to say which device to build on (it is not a parameter).
    on = (torch.empty(0),)
    text = check_xla(xla, "aten::arange", lambda d: torch.arange(2, 11, 3, device=d.device), on, [3, 2])
    assert "stablehlo.iota" in text
    check_xla(xla, "aten::arange", lambda d: torch.arange(0.5, 3.0, 0.25, device=d.device), on, [0.25, 0.5])
    check_xla(xla, "aten::eye", lambda d: torch.eye(3, 4, device=d.device), on, [])
    check_xla(xla, "aten::linspace", lambda d: torch.linspace(-1, 2, 7, device=d.device), on, [-1.0, 2.0])


# ---- integer and logical ops -----------------------------------------------------------------

def test_integer_div_rem_pow_not(xla):
    i = torch.tensor([-7, -3, 0, 4, 9, 12])
    check_xla(xla, "aten::div", lambda t: t // 4, (i,), [i, 4])  # floor, not truncation
    check_xla(xla, "aten::remainder", lambda t: t % 4, (i,), [i, 4])  # sign of the divisor
    check_xla(xla, "aten::remainder", lambda t: t % -4, (i,), [i, -4])
    check_xla(xla, "aten::pow", lambda t: t ** 3, (i,), [i, 3])
    check_xla(xla, "aten::bitwise_not", torch.bitwise_not, (i,), [i])
    m, n = i > 0, i.remainder(3) == 0
    check_xla(xla, "aten::bitwise_not", torch.bitwise_not, (m,), [m])
    check_xla(xla, "aten::logical_not", torch.logical_not, (m,), [m])
    check_xla(xla, "aten::logical_and", torch.logical_and, (m, n), [m, n])
    check_xla(xla, "aten::logical_xor", torch.logical_xor, (i, n), [i, n])


def test_narrow_and_wide_dtypes(xla):
    u, v = torch.tensor([200, 3, 255, 128], dtype=torch.uint8), torch.tensor([100, 4, 1, 127], dtype=torch.uint8)
    check_xla(xla, "aten::add", torch.add, (u, v), [u, v])  # wraps modulo 256
    check_xla(xla, "aten::gt", torch.gt, (u, v), [u, v])  # unsigned order: 200 > 100
    check_xla(xla, "aten::gt", lambda t: t > 127, (u,), [u, 127])
    check_xla(xla, "aten::max", torch.max, (u,), [u])
    p = torch.tensor([100, -100, 7, -128], dtype=torch.int8)
    check_xla(xla, "aten::mul", torch.mul, (p, p.flip(0)), [p, p.flip(0)])  # wraps
    k = torch.tensor([[2 ** 30, 2 ** 30], [3, -4]], dtype=torch.int32)
    check_xla(xla, "aten::sum", lambda t: t.sum(), (k,), [k])  # int32 sums in int64
    d = randn(3, 4).double() * 10
    check_xla(xla, "aten::exp", torch.exp, (d,), [d], rtol=1e-13, atol=0)
    check_xla(xla, "aten::sum", lambda t: t.sum(1), (d,), [d], rtol=1e-13, atol=0)
    h = randn(3, 4).half()
    check_xla(xla, "aten::add", torch.add, (h, h.flip(0)), [h, h.flip(0)])
    check_xla(xla, "aten::tanh", torch.tanh, (h,), [h])
    check_xla(xla, "aten::sum", lambda t: t.sum(1), (h,), [h])
    x = randn(3, 4) * 3
    check_xla(xla, "aten::remainder", lambda t: t.remainder(-0.7), (x,), [x, -0.7])
    i = torch.tensor([-7, -3, 0, 4, 9, 12])
    check_xla(xla, "aten::div", lambda t: torch.div(t, -4, rounding_mode="trunc"), (i,), [i, -4])


def test_isnan_isinf_nan_to_num(xla):
    x = torch.tensor([0.0, float("nan"), float("inf"), -float("inf"), -1.5, 3e38])
    check_xla(xla, "aten::isnan", torch.isnan, (x,), [x])
    check_xla(xla, "aten::isinf", torch.isinf, (x,), [x])
    # Parameters: neginf, posinf, nan replacements.
    check_xla(xla, "aten::nan_to_num", lambda t: t.nan_to_num(1.0, 2.0, -2.0), (x,), [x, -2.0, 2.0, 1.0])


# ---- fused-region programs of composite ops -------------------------------------------------

@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_both_forms(xla, approximate):
    x = randn(4, 8) * 3
    text = check_xla(xla, "aten::gelu", lambda t: F.gelu(t, approximate=approximate), (x,), [x])
    assert ("stablehlo.tanh" if approximate == "tanh" else "chlo.erf") in text
    # gelu(+-inf) are the limits +inf and 0 by design (test_activation.py::test_gelu_infinities);
    # this PyTorch's CPU kernels give NaN there, so XLA is compared with the host executor only.
    inf = torch.tensor([float("inf"), -float("inf"), 1.0])
    y, text = logged_program("aten::gelu", lambda t: F.gelu(t, approximate=approximate), inf.to("tpu"))
    (got,) = run_on_xla(xla, text, [inf])
    torch.testing.assert_close(got, y.cpu())
    assert got[0] == float("inf") and got[1] == 0.0


def test_gelu_backward(xla):
    x, dy = randn(4, 8), randn(4, 8, seed=1)
    check_xla(xla, "aten::gelu_backward", lambda g, t: torch.ops.aten.gelu_backward(g, t), (dy, x), [dy, x])
    check_xla(xla, "aten::gelu_backward", lambda g, t: torch.ops.aten.gelu_backward(g, t, approximate="tanh"),
              (dy, x), [dy, x])


ACTIVATIONS = {  # name: (fn, scalar parameters after the input)
    "silu": (F.silu, []),
    "mish": (F.mish, []),
    "softplus": (lambda t: F.softplus(t, 2.0, 3.0), [2.0, 3.0]),
    "elu": (lambda t: F.elu(t, 0.7), [1.0, 0.7, 1.0]),  # scale, alpha, input_scale
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.1), [0.1]),
    "hardtanh": (lambda t: F.hardtanh(t, -0.5, 2.0), [-0.5, 2.0]),
    "hardswish": (F.hardswish, []),
    "relu": (F.relu, []),
    "threshold": (lambda t: F.threshold(t, 0.1, 20.0), [0.1, 20.0]),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation(xla, name):
    fn, scalars = ACTIVATIONS[name]
    x = randn(5, 7) * 4
    check_xla(xla, f"aten::{name}", fn, (x,), [x] + scalars)


def test_backward_regions(xla):
    dy, x = randn(3, 5), randn(3, 5, seed=1)
    for op in ["silu_backward", "sigmoid_backward", "tanh_backward"]:
        check_xla(xla, f"aten::{op}", getattr(torch.ops.aten, op), (dy, x), [dy, x])
    check_xla(xla, "aten::threshold_backward", lambda g, t: torch.ops.aten.threshold_backward(g, t, 0.5),
              (dy, x), [dy, x, 0.5])
    check_xla(xla, "aten::hardtanh_backward", lambda g, t: torch.ops.aten.hardtanh_backward(g, t, -0.5, 0.5),
              (dy, x), [dy, x, -0.5, 0.5])


def test_pointwise_composites(xla):
    a, b, c = randn(3, 4), randn(4, seed=1), randn(3, 4, seed=2)
    check_xla(xla, "aten::addcmul", lambda x, y, z: torch.addcmul(x, z, y, value=0.5), (a, b, c), [a, c, b, 0.5])
    d = b.abs() + 1
    check_xla(xla, "aten::addcdiv", lambda x, y, z: torch.addcdiv(x, z, y, value=-2.0), (a, d, c), [a, c, d, -2.0])
    check_xla(xla, "aten::lerp", lambda x, y: torch.lerp(x, y, 0.3), (a, b), [a, b, 0.3])
    check_xla(xla, "aten::lerp", lambda x, y: torch.lerp(x, y, 0.8), (a, b), [a, b, 0.8])
    m = c > 0
    check_xla(xla, "aten::masked_fill_", lambda x, k: x.masked_fill_(k, 2.0), (a, m), [a, m, 2.0])
    check_xla(xla, "aten::where", lambda k, x: torch.where(k, x, 0.25), (m, a), [m, a, 0.25])
    check_xla(xla, "aten::round", lambda x: x.round(decimals=2), (a,), [a, 100.0])
    check_xla(xla, "aten::count_nonzero", lambda x: torch.count_nonzero(x, 1), (m.float(),), [m.float()])
    x, y = c.clone(), a.abs()
    x[0, :2] = 0.0
    y[0, 0], y[1, 1] = float("nan"), 0.0  # xlogy(0, NaN) is NaN, xlogy(0, 0) is 0
    check_xla(xla, "aten::xlogy", torch.xlogy, (x, y), [x, y])
    check_xla(xla, "aten::cumprod", lambda x: torch.cumprod(x, 1), (c,), [c])


# ---- dot_general and the nn regions --------------------------------------------------------

def test_mm_bmm_transposed_operands(xla):
    a, b = randn(5, 3), randn(4, 5, seed=1)
    text = check_xla(xla, "aten::mm", lambda x, y: x.t() @ y.t(), (a, b), [a.t(), b.t()])
    assert "stablehlo.dot_general" in text
    p, q = randn(2, 3, 4), randn(2, 5, 4, seed=1)
    check_xla(xla, "aten::bmm", lambda x, y: torch.bmm(x, y.transpose(1, 2)), (p, q), [p, q.transpose(1, 2)])
    v = randn(4, seed=2)
    check_xla(xla, "aten::mv", torch.mv, (p[0], v), [p[0], v])
    check_xla(xla, "aten::dot", torch.dot, (v, v), [v, v])
    i, j = torch.arange(-6, 6).reshape(3, 4), torch.arange(8).reshape(4, 2)
    check_xla(xla, "aten::mm", torch.mm, (i, j), [i, j], rtol=0, atol=0)


def test_addmm_linear_epilogue(xla):
    x, w, bias = randn(3, 4), randn(5, 4, seed=1), randn(5, seed=2)
    check_xla(xla, "aten::addmm", F.linear, (x, w, bias), [x, w.t(), bias])
    # Parameters: mat1, mat2, alpha, self, beta.
    check_xla(xla, "aten::addmm", lambda s, m1, m2: torch.addmm(s, m1, m2, beta=0.5, alpha=2.0),
              (bias, x, w.t()), [x, w.t(), 2.0, bias, 0.5])
    xb, wb, bb = x.bfloat16(), w.bfloat16(), bias.bfloat16()
    # bfloat16 operands with a float32 dot_general result, rounded once after the epilogue.
    text = check_xla(xla, "aten::addmm", lambda s, m1, m2: torch.addmm(s, m1, m2, beta=0.5),
                     (bb, xb, wb.t()), [xb, wb.t(), bb, 0.5])
    assert "-> tensor<3x5xf32>" in text


def test_softmax_log_softmax_and_backward(xla):
    x = randn(4, 7) * 3
    x[1, :3] = -float("inf")  # masked entries, as attention masks give
    check_xla(xla, "aten::_softmax", lambda t: torch.softmax(t, 1), (x,), [x])
    check_xla(xla, "aten::_log_softmax", lambda t: torch.log_softmax(t, 0), (x,), [x])
    y, dy = torch.softmax(x, 1), randn(4, 7, seed=1)
    check_xla(xla, "aten::_softmax_backward_data",
              lambda g, o: torch.ops.aten._softmax_backward_data(g, o, 1, torch.float32), (dy, y), [dy, y])
    ly = torch.log_softmax(x, 1)
    check_xla(xla, "aten::_log_softmax_backward_data",
              lambda g, o: torch.ops.aten._log_softmax_backward_data(g, o, 1, torch.float32), (dy, ly), [dy, ly])


def test_layer_norm_and_backward(xla):
    x, w, bias = randn(3, 4, 6), randn(6, seed=1), randn(6, seed=2)
    # Results: out, mean, rstd. Parameters: x, eps, weight, bias.
    check_xla(xla, "aten::native_layer_norm", lambda t, g, h: torch.native_layer_norm(t, (6,), g, h, 1e-5),
              (x, w, bias), [x, 1e-5, w, bias])
    _, mean, rstd = torch.native_layer_norm(x, (6,), w, bias, 1e-5)
    dy = randn(3, 4, 6, seed=3)
    check_xla(xla, "aten::native_layer_norm_backward",
              lambda g, t, m, r, wt, h: torch.ops.aten.native_layer_norm_backward(g, t, (6,), m, r, wt, h,
                                                                                  [True, True, True]),
              (dy, x, mean, rstd, w, bias), [dy, x, mean, rstd, w])  # bias only shapes db


def test_cross_entropy_regions(xla):
    x, t = randn(5, 4), torch.tensor([0, 3, 1, 1, 2])
    lp = torch.log_softmax(x, 1)
    # Parameters: target, ignore_index, input. Results: loss, total_weight.
    check_xla(xla, "aten::nll_loss_forward", lambda v, k: torch.ops.aten.nll_loss_forward(v, k, None, 1, -100),
              (lp, t), [t, -100, lp])
    w = randn(4, seed=2).abs()  # class weights, an ignored class, summed and per-element
    check_xla(xla, "aten::nll_loss_forward", lambda v, k, c: torch.ops.aten.nll_loss_forward(v, k, c, 2, 1),
              (lp, t, w), [t, 1, lp, w])
    check_xla(xla, "aten::nll_loss_forward", lambda v, k: torch.ops.aten.nll_loss_forward(v, k, None, 0, -100),
              (lp, t), [t, -100, lp])
    y = randn(5, 4, seed=1)
    check_xla(xla, "aten::mse_loss", F.mse_loss, (x, y), [x, y])
    p, q = torch.sigmoid(x), torch.sigmoid(y)  # not symmetric in (input, target): checks the order
    check_xla(xla, "aten::binary_cross_entropy", F.binary_cross_entropy, (p, q), [p, q])
    check_xla(xla, "aten::huber_loss", lambda u, v: F.huber_loss(u, v, delta=0.5), (x, y), [x, y, 0.5])


# ---- _foreach (multi-result programs) --------------------------------------------------------

def _lists(n, seed):
    shapes = [(3, 4), (5,), (2, 1, 3)]
    return [randn(*s, seed=seed + k) for k, s in enumerate(shapes[:n])]


def test_foreach_add_list_functional(xla):
    a, b = _lists(3, 0), _lists(3, 10)
    params = [v for x, y in zip(a, b) for v in (x, y, 2.0)]  # per tensor: self, other, alpha
    text = check_xla(xla, "aten::_foreach_add", lambda x, y: torch._foreach_add(x, y, alpha=2.0), (a, b), params)
    assert len(signature(text)[1]) == 3


def test_foreach_inplace(xla):
    a, b, c = _lists(3, 0), _lists(3, 10), _lists(3, 20)

    def addcmul(x, y, z):
        torch._foreach_addcmul_(x, y, z, value=0.5)
        return x

    params = [v for x, y, z in zip(a, b, c) for v in (x, y, z, 0.5)]
    check_xla(xla, "aten::_foreach_addcmul_", addcmul, (a, b, c), params)

    def lerp(x, y):
        torch._foreach_lerp_(x, y, 0.3)
        return x

    check_xla(xla, "aten::_foreach_lerp_", lerp, (a, b), [v for x, y in zip(a, b) for v in (x, y, 0.3)])


def test_foreach_norm(xla):
    a = _lists(3, 0)
    check_xla(xla, "aten::_foreach_norm", torch._foreach_norm, (a,), a)


def test_fused_adamw_and_sgd(xla):
    # One program for the whole step; results per tensor: unscaled grad, param, exp_avg,
    # exp_avg_sq, max_exp_avg_sq. Parameters: grad_scale, found_inf, lr, beta1, beta2, 1 - beta1,
    # 1 - beta2, weight_decay, eps, each step, then per tensor param, grad, exp_avg, exp_avg_sq,
    # max_exp_avg_sq.
    p, g, m = _lists(2, 0), _lists(2, 10), _lists(2, 20)
    v, vmax = [t.abs() for t in _lists(2, 30)], [t.abs() for t in _lists(2, 40)]
    steps = [torch.tensor(3.0), torch.tensor(5.0)]
    scale, found = torch.tensor([4.0]), torch.tensor([0.0])
    kw = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, amsgrad=True, maximize=False)

    def adamw(p, g, m, v, vmax, steps, scale, found):
        torch._fused_adamw_(p, g, m, v, vmax, steps, grad_scale=scale, found_inf=found, **kw)
        return [t for i in range(len(p)) for t in (g[i], p[i], m[i], v[i], vmax[i])]

    params = [scale, found, 0.01, 0.9, 0.99, 0.1, 0.01, 0.1, 1e-8] + steps
    params += [t for i in range(2) for t in (p[i], g[i], m[i], v[i], vmax[i])]
    check_xla(xla, "aten::_fused_adamw_", adamw, (p, g, m, v, vmax, steps, scale, found), params)

    def sgd(p, g, m):
        torch._fused_sgd_(p, g, m, weight_decay=0.1, momentum=0.9, lr=0.05, dampening=0.0, nesterov=True,
                          maximize=False, is_first_step=False)
        return [t for i in range(len(p)) for t in (m[i], p[i])]

    params = [0.05, 0.1, 0.9, 1.0] + [t for i in range(2) for t in (p[i], g[i], m[i])]
    check_xla(xla, "aten::_fused_sgd_", sgd, (p, g, m), params)


def test_amp_unscale_and_update_scale(xla):
    g = _lists(2, 0)
    g[1][1] = float("inf")
    found, inv = torch.tensor([0.0]), torch.tensor([0.5])

    def unscale(g, found, inv):
        torch._amp_foreach_non_finite_check_and_unscale_(g, found, inv)
        return g + [found]

    check_xla(xla, "aten::_amp_foreach_non_finite_check_and_unscale_", unscale, (g, found, inv), [inv, found] + g)
    scale, tracker = torch.tensor([1024.0]), torch.tensor([1], dtype=torch.int32)

    def update(scale, tracker, found):
        torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2)
        return scale, tracker

    for f in (0.0, 1.0):
        check_xla(xla, "aten::_amp_update_scale_", update, (scale, tracker, torch.tensor([f])),
                  [scale, tracker, torch.tensor([f]), 2.0, 0.5, 2])


def test_searchsorted_histc_cdist(xla):
    # searchsorted parameters: values, boundaries (then sorter); the search is unrolled rounds.
    bd = torch.tensor([-1.0, 0.0, 0.0, 2.0, 5.0])
    v = torch.tensor([[-3.0, 0.0, 1.0], [2.0, 7.0, float("nan")]])
    check_xla(xla, "aten::searchsorted", lambda b, x: torch.searchsorted(b, x, right=True), (bd, v), [v, bd])
    x = randn(50)
    check_xla(xla, "aten::histc", lambda t: torch.histc(t, bins=6, min=-1.0, max=1.5), (x,), [x, -1.0, 1.5, 6.0])
    a, b = randn(4, 3), randn(5, 3, seed=1)
    check_xla(xla, "aten::_cdist_forward", lambda u, w: torch.cdist(u, w, p=3.0), (a, b), [a, b, 3.0])


def test_multinomial_program(xla):
    p = torch.tensor([[0.1, 0.0, 0.9], [0.5, 0.5, 0.0]])
    state = torch.tensor([1234, 7], dtype=torch.uint64)
    _, text = logged_program("aten::multinomial", lambda t: torch.multinomial(t, 1), p.to("tpu"))
    draws, error = run_on_xla(xla, text, [p, state])
    assert error.item() == 0 and draws.shape == (2, 1)
    assert draws[0, 0].item() in (0, 2) and draws[1, 0].item() in (0, 1)
    _, text = logged_program("aten::multinomial", lambda t: torch.multinomial(t, 6, replacement=True), p.to("tpu"))
    draws, error = run_on_xla(xla, text, [p, state])
    assert error.item() == -1 and draws.shape == (2, 6)
    assert set(draws[0].tolist()) <= {0, 2} and set(draws[1].tolist()) <= {0, 1}


# ---- random ops: XLA must parse, compile and run them (bits are not expected to match) -------

def _random_program(op, fn, *args):
    _, text = logged_program(op, fn, *to_tpu(list(args)))
    assert "stablehlo.rng_bit_generator" in text
    return text


def test_random_programs_compile_and_run(xla):
    x = torch.zeros(64, 32)
    state = torch.tensor([1234, 7], dtype=torch.uint64)
    text = _random_program("aten::uniform_", lambda t: t.uniform_(-2.0, 3.0), x)
    (u,) = run_on_xla(xla, text, [state, 5.0, -2.0])  # to - from, from
    assert u.min() >= -2.0 and u.max() < 3.0 and u.std() > 1.0
    text = _random_program("aten::normal_", lambda t: t.normal_(1.0, 2.0), x)
    (n,) = run_on_xla(xla, text, [state, 2.0, 1.0])  # std, mean
    assert abs(n.mean() - 1.0) < 0.2 and abs(n.std() - 2.0) < 0.2
    p = torch.full((64, 32), 0.25)
    text = _random_program("aten::bernoulli_", lambda t, q: t.bernoulli_(q), x, p)
    (bern,) = run_on_xla(xla, text, [state, p])
    assert set(bern.unique().tolist()) == {0.0, 1.0} and abs(bern.mean() - 0.25) < 0.05
    text = _random_program("aten::native_dropout", lambda t: torch.native_dropout(t, 0.5, True), x + 1)
    out, keep = run_on_xla(xla, text, [x + 1, state, 0.5, 2.0])  # keep-prob, scale
    assert keep.dtype == torch.bool and torch.equal(out, keep.float() * 2)
    text = _random_program("aten::random_", lambda t: t.random_(0, 10), x)
    (r,) = run_on_xla(xla, text, [state, 10, 0])  # range, from
    assert set(r.unique().tolist()) == set(range(10))
    text = _random_program("aten::exponential_", lambda t: t.exponential_(2.0), x)
    (e,) = run_on_xla(xla, text, [state, 2.0])
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.1
