"""The IR we emit is real StableHLO with the same semantics: each program an op compiles is printed
(the program log), handed to XLA (jaxlib, CPU) and run there on the same inputs; XLA's result must
match both the host executor's (the tpu tensor) and PyTorch's CPU result.

Parameters of a program are, in order, the Input()/Scalar() calls of its lowering
(csrc/torch/lower/*.cc); a Python number is a rank-0 parameter. Each test lists them explicitly and
the helper checks them against the program's signature, so a lowering that changes its parameters
fails loudly here instead of silently testing something else.

Tolerances: float32 rtol=1e-5, atol=1e-6 (XLA and the host executor differ only in summation order
and vectorized math). Transcendental ops compare with rtol=1e-5, atol=1e-5 where stated: XLA's
exp/tanh/erf/logistic are its own polynomial approximations, a few ulp from libm, and values near
zero (tanh(x) ~ x, erf(x) ~ 1.13x) make a relative bound alone too strict there. Random ops are not
expected to match bits: only that XLA parses, compiles and runs them to results of the right kind.
"""
from __future__ import annotations

import os
import re

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from conftest import to_tpu

# StableHLO's maximum/minimum are IEEE-754 maximum/minimum: a NaN operand gives NaN. XLA's CPU
# backend by default uses "fast" min/max that return the other operand when the NaN is on the
# right (maximum(0, NaN) = 0, and so a max-reduction skips NaNs); this flag restores the specified
# semantics. It is read when the XLA client starts, so it is set before jax is imported.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_fast_min_max=false").strip()
jax = pytest.importorskip("jax")
ml_dtypes = pytest.importorskip("ml_dtypes")
np = pytest.importorskip("numpy")
from jax.extend import backend as jax_backend  # noqa: E402

# 64-bit parameters must reach XLA as they are (jax would otherwise narrow i64 to i32).
jax.config.update("jax_enable_x64", True)

RTOL, ATOL = 1e-5, 1e-6
MATH = dict(rtol=1e-5, atol=1e-5)  # transcendental functions, see the module docstring

_NP_DTYPES = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
    "ui8": np.uint8, "ui32": np.uint32, "ui64": np.uint64, "i1": np.bool_,
}
_SIGNATURE = re.compile(r"func\.func public @\w+\((.*?)\) -> \((.*?)\) \{")


@pytest.fixture(scope="module")
def xla():
    return jax_backend.get_backend("cpu")


def _parse_type(s):
    *dims, dtype = s.split("x")
    return tuple(int(d) for d in dims), _NP_DTYPES[dtype]


def signature(text):
    m = _SIGNATURE.search(text)
    assert m, text
    params = [_parse_type(t) for t in re.findall(r"%arg\d+: tensor<([^>]*)>", m.group(1))]
    results = [_parse_type(t) for t in re.findall(r"tensor<([^>]*)>", m.group(2))]
    return params, results


def _to_numpy(value, shape, dtype):
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        arr = t.float().numpy().astype(dtype) if t.dtype == torch.bfloat16 else t.numpy()
        assert arr.dtype == np.dtype(dtype), f"parameter dtype {arr.dtype}, program wants {np.dtype(dtype)}"
    else:
        arr = np.asarray(value, dtype=dtype)
    assert arr.shape == shape, f"parameter shape {arr.shape}, program wants {shape}"
    return np.ascontiguousarray(arr)


def _to_torch(arr):
    arr = np.asarray(arr)
    if arr.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(arr.copy())


def run_on_xla(xla, text, params):
    """Compiles `text` with XLA and runs it on `params` (tensors or numbers, in program order)."""
    sig_params, sig_results = signature(text)
    assert len(params) == len(sig_params), f"{len(params)} parameters given, program has {len(sig_params)}:\n{text}"
    dev = xla.devices()[0]
    args = [jax.device_put(_to_numpy(p, *s), dev) for p, s in zip(params, sig_params)]
    exe = xla.compile_and_load(text, xla.devices()[:1])
    outs = [_to_torch(o) for o in exe.execute(args)]
    assert [tuple(o.shape) for o in outs] == [s for s, _ in sig_results]
    return outs


def logged_program(op, fn, *args):
    """Runs fn(*args) with the program log on (compile cache cleared, so every program of the call
    is compiled and logged) and returns (fn's result, the text of the one program named `op`)."""
    torch.tpu.synchronize()
    torch_tpu._C.clear_compile_cache()
    torch_tpu._C._take_program_log()
    torch_tpu._C._set_program_log(True)
    try:
        torch_tpu.metrics.reset()
        result = fn(*args)
        torch.tpu.synchronize()
    finally:
        torch_tpu._C._set_program_log(False)
    progs = torch_tpu._C._take_program_log()
    fb = torch_tpu.metrics.fallback_ops()
    if fb:
        pytest.skip(f"not native on this branch (CPU fallback: {fb})")
    texts = [t for name, t in progs if name == op]
    assert len(texts) == 1, f"expected one program named {op}, got {[n for n, _ in progs]}"
    return result, texts[0]


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    out = []
    for v in x:
        out += _flat(v)
    return out


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    return x


def check_xla(xla, op, fn, args, params, rtol=RTOL, atol=ATOL):
    """fn(*args) on tpu and on CPU; the program `op` of the tpu call runs on XLA with `params`.
    XLA's results (in program result order = fn's flattened results) must match both."""
    expected = _flat(fn(*_clone(args)))
    result, text = logged_program(op, fn, *to_tpu(_clone(args)))
    host = [t.cpu() for t in _flat(result)]
    got = run_on_xla(xla, text, params)
    assert len(got) == len(host) == len(expected), f"{len(got)} XLA results for {len(host)} outputs:\n{text}"
    for g, h, e in zip(got, host, expected):
        # The program's result is the op's compute type; the output tensor may convert it.
        g = g.to(h.dtype)
        torch.testing.assert_close(g, h, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"XLA vs host executor: {m}\n{text}")
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"XLA vs PyTorch CPU: {m}\n{text}")
    return text


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


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
    check_xla(xla, "aten::pow", torch.pow, (pos, b), [pos, b], **MATH)
    check_xla(xla, "aten::remainder", lambda x: x.remainder(0.7), (a,), [a, 0.7])
    a[0, 0] = float("nan")
    check_xla(xla, "aten::maximum", torch.maximum, (a, b), [a, b])  # NaN propagates
    check_xla(xla, "aten::atan2", torch.atan2, (a, b), [a, b], **MATH)
    check_xla(xla, "aten::clamp", lambda x: x.clamp(-0.5, 0.5), (a,), [a, -0.5, 0.5])


# ---- elementwise unary -----------------------------------------------------------------------

UNARY = {  # name: (input domain, tolerance, an IR op the program must contain)
    "exp": ("any", MATH, "stablehlo.exponential"),
    "expm1": ("any", MATH, "stablehlo.exponential_minus_one"),
    "log": ("pos", MATH, "stablehlo.log"),
    "log1p": ("pos", MATH, "stablehlo.log_plus_one"),
    "tanh": ("any", MATH, "stablehlo.tanh"),
    "sigmoid": ("any", MATH, "stablehlo.logistic"),
    "erf": ("any", MATH, "chlo.erf"),
    "sin": ("any", MATH, "stablehlo.sine"),
    "cos": ("any", MATH, "stablehlo.cosine"),
    "sqrt": ("pos", {}, "stablehlo.sqrt"),
    "rsqrt": ("pos", MATH, "stablehlo.rsqrt"),
    "abs": ("any", {}, "stablehlo.abs"),
    "neg": ("any", {}, "stablehlo.negate"),
    "sign": ("any", {}, "stablehlo.sign"),
    "floor": ("any", {}, "stablehlo.floor"),
    "ceil": ("any", {}, "stablehlo.ceil"),
    "round": ("half", {}, "stablehlo.round_nearest_even"),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(xla, name):
    domain, tol, ir_op = UNARY[name]
    x = randn(4, 6) * 3
    if domain == "pos":
        x = x.abs() + 1e-3
    elif domain == "half":  # ties round to even
        x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.7])
    x.view(-1)[0] = float("nan")
    text = check_xla(xla, f"aten::{name}", getattr(torch, name), (x,), [x], **tol)
    assert ir_op in text


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


def test_mean_var_std_prod_logsumexp(xla):
    x = randn(4, 6)
    check_xla(xla, "aten::mean", lambda t: t.mean(1), (x,), [x])
    # The scalar parameter is the divisor n - correction.
    check_xla(xla, "aten::var", lambda t: t.var(1), (x,), [x, 5.0])
    check_xla(xla, "aten::var_mean", lambda t: torch.var_mean(t, 0, correction=0), (x,), [x, 4.0])
    check_xla(xla, "aten::std", lambda t: t.std(0), (x,), [x, 3.0])
    check_xla(xla, "aten::prod", lambda t: t.prod(1), (x,), [x])
    check_xla(xla, "aten::logsumexp", lambda t: t.logsumexp(1), (x,), [x], **MATH)
    check_xla(xla, "aten::linalg_vector_norm", lambda t: t.norm(dim=1), (x,), [x])


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


def test_isnan_isinf_nan_to_num(xla):
    x = torch.tensor([0.0, float("nan"), float("inf"), -float("inf"), -1.5, 3e38])
    check_xla(xla, "aten::isnan", torch.isnan, (x,), [x])
    check_xla(xla, "aten::isinf", torch.isinf, (x,), [x])
    check_xla(xla, "aten::nan_to_num", lambda t: t.nan_to_num(1.0, 2.0, -2.0), (x,), [x, 1.0, 2.0, -2.0])


# ---- fused-region programs of composite ops -------------------------------------------------

def test_gelu_both_forms_and_backward(xla):
    x = randn(4, 8) * 3
    x[0, :2] = torch.tensor([float("inf"), -float("inf")])
    text = check_xla(xla, "aten::gelu", F.gelu, (x,), [x], **MATH)
    assert "chlo.erf" in text
    text = check_xla(xla, "aten::gelu", lambda t: F.gelu(t, approximate="tanh"), (x,), [x], **MATH)
    assert "stablehlo.tanh" in text
    x, dy = randn(4, 8), randn(4, 8, seed=1)
    check_xla(xla, "aten::gelu_backward", lambda g, t: torch.ops.aten.gelu_backward(g, t), (dy, x), [dy, x], **MATH)


ACTIVATIONS = {  # name: (fn, scalar parameters after the input)
    "silu": (F.silu, []),
    "mish": (F.mish, []),
    "softplus": (lambda t: F.softplus(t, 2.0, 3.0), [2.0, 3.0]),
    "elu": (lambda t: F.elu(t, 0.7), [0.7, 1.0, 1.0]),
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.1), [0.1]),
    "hardtanh": (lambda t: F.hardtanh(t, -0.5, 2.0), [-0.5, 2.0]),
    "hardswish": (F.hardswish, []),
    "relu": (F.relu, []),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation(xla, name):
    fn, scalars = ACTIVATIONS[name]
    x = randn(5, 7) * 4
    check_xla(xla, f"aten::{name}", fn, (x,), [x] + scalars, **MATH)


def test_backward_regions(xla):
    dy, x = randn(3, 5), randn(3, 5, seed=1)
    for op in ["silu_backward", "sigmoid_backward", "tanh_backward"]:
        check_xla(xla, f"aten::{op}", getattr(torch.ops.aten, op), (dy, x), [dy, x], **MATH)
    check_xla(xla, "aten::threshold_backward", lambda g, t: torch.ops.aten.threshold_backward(g, t, 0.5),
              (dy, x), [dy, x, 0.5])


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


# ---- random ops: XLA must parse, compile and run them (bits are not expected to match) -------

def _random_program(op, fn, *args):
    _, text = logged_program(op, fn, *to_tpu(list(args)))
    assert "stablehlo.rng_bit_generator" in text
    return text


def test_random_programs_compile_and_run(xla):
    x = torch.zeros(64, 32)
    state = torch.tensor([1234, 7], dtype=torch.uint64)
    text = _random_program("aten::uniform_", lambda t: t.uniform_(-2.0, 3.0), x)
    (u,) = run_on_xla(xla, text, [state, -2.0, 3.0])
    assert u.min() >= -2.0 and u.max() < 3.0 and u.std() > 1.0
    text = _random_program("aten::normal_", lambda t: t.normal_(1.0, 2.0), x)
    (n,) = run_on_xla(xla, text, [state, 1.0, 2.0])
    assert abs(n.mean() - 1.0) < 0.2 and abs(n.std() - 2.0) < 0.2
    p = torch.full((64, 32), 0.25)
    text = _random_program("aten::bernoulli_", lambda t, q: t.bernoulli_(q), x, p)
    (bern,) = run_on_xla(xla, text, [state, p])
    assert set(bern.unique().tolist()) == {0.0, 1.0} and abs(bern.mean() - 0.25) < 0.05
    text = _random_program("aten::native_dropout", lambda t: torch.native_dropout(t, 0.5, True), x + 1)
    out, keep = run_on_xla(xla, text, [x + 1, state, 0.5, 2.0])  # keep-prob, scale
    assert keep.dtype == torch.bool and torch.equal(out, keep.float() * 2)
    text = _random_program("aten::random_", lambda t: t.random_(0, 10), x)
    (r,) = run_on_xla(xla, text, [state, 0, 10])
    assert set(r.unique().tolist()) == set(range(10))
    text = _random_program("aten::exponential_", lambda t: t.exponential_(2.0), x)
    (e,) = run_on_xla(xla, text, [state, 2.0])
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.1
