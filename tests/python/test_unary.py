"""Unary elementwise ops, predicates, nan_to_num, clamp, lerp, addcmul/addcdiv, masked_fill_ and xlogy:
tpu results against PyTorch's CPU kernels.

Tolerances: float32 uses conftest's defaults (rtol 1.3e-6, about 10 ulp, atol 1e-5). The math
functions (exp, log, sin, tan, erf, ...) are computed by different implementations on the two
sides (Highway/libm on the host executor, SLEEF on PyTorch's CPU), which differ by up to 2-4 ulp,
and log2/log10/tan are composed (log(x) * c, sin/cos) for up to 3 ulp: well inside that tolerance.
Everything else (rounding, sign, clamp, lerp, ...) is exact. bfloat16 computes in float32 and
rounds once, so it stays within one bfloat16 ulp (its default rtol 1.6e-2).
"""
import math

import pytest
import torch
import torch_tpu

from conftest import check_same, to_tpu

UNARY = ["neg", "abs", "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
         "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh", "sigmoid", "erf", "floor", "ceil", "round",
         "trunc", "frac"]
INT_TO_FLOAT = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
                "sin", "cos", "tan", "tanh", "sigmoid", "erf"}
POSITIVE_DOMAIN = {"log", "log2", "log10", "log1p", "sqrt", "rsqrt"}
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, -0.5, 2.5, -1.5, 88.0, -100.0, 1e-30]


def floats(shape=(6, 37), scale=3.0, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * scale
    x.view(-1)[: len(SPECIALS)] = torch.tensor(SPECIALS)
    return x.to(dtype)


def ints(shape=(5, 9), dtype=torch.int64, lo=-20, hi=20, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def check_same_error(fn, *args, exact=True):
    """fn must raise the same exception type on CPU and tpu (and the same first line if exact)."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(type(cpu.value)) as tpu:
        fn(*to_tpu(args))
    if exact:
        assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]
    return tpu.value


# ---- the unary table -------------------------------------------------------------------------
@pytest.mark.parametrize("op", UNARY)
def test_float32(op, mode, no_fallback):
    check_same(getattr(torch, op), floats())


@pytest.mark.parametrize("op", UNARY)
def test_bfloat16(op, mode, no_fallback):
    check_same(getattr(torch, op), floats(dtype=torch.bfloat16))


@pytest.mark.parametrize("op", ["exp", "log1p", "tan", "sigmoid", "trunc", "frac", "round", "sign"])
def test_float64_and_float16(op, no_fallback):
    check_same(getattr(torch, op), floats(dtype=torch.float64))
    check_same(getattr(torch, op), floats(dtype=torch.float16))


@pytest.mark.parametrize("op", UNARY)
def test_integers(op, mode, no_fallback):
    fn = getattr(torch, op)
    if op == "frac":
        err = check_same_error(fn, ints(), exact=False)
        assert "not implemented for 'Long'" in str(err)
        return
    out = check_same(fn, ints())
    assert out.dtype == (torch.float32 if op in INT_TO_FLOAT else torch.int64)
    if op in ("neg", "abs", "sign", "floor"):
        check_same(fn, ints(dtype=torch.int32))
        check_same(fn, ints(dtype=torch.uint8, lo=0, hi=255))


def test_integers_follow_default_dtype(no_fallback):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert check_same(torch.exp, ints()).dtype == torch.float64
        assert check_same(torch.sigmoid, torch.tensor([True, False])).dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize("op", UNARY)
def test_bool(op, no_fallback):
    x = torch.tensor([True, False, True])
    fn = getattr(torch, op)
    if op in INT_TO_FLOAT or op in ("sign", "sgn"):
        check_same(fn, x)
    else:  # neg raises PyTorch's own message; the others are not implemented for bool
        err = check_same_error(fn, x, exact=op == "neg")
        if op != "neg":
            assert "not implemented for 'Bool'" in str(err)


@pytest.mark.parametrize("op", ["exp", "sqrt", "neg", "floor", "sign", "tan"])
def test_noncontiguous(op, mode, no_fallback):
    fn = getattr(torch, op)
    x = floats((12, 10))
    check_same(lambda t: fn(t.t()), x)
    check_same(lambda t: fn(t[1::3, ::2]), x)
    check_same(lambda t: fn(t.expand(3, 12, 10)), x)
    check_same(lambda t: fn(t[0, 0]), x)  # 0-dim


@pytest.mark.parametrize("op", UNARY)
def test_inplace_and_out(op, mode, no_fallback):
    def inplace(t):
        t = t.clone()
        getattr(t, op + "_")()
        return t

    def inplace_on_view(t):  # writes through a strided view into its base
        base = t.clone()
        getattr(base[:, 1::3], op + "_")()
        return base

    def out_same_dtype(t):
        out = torch.empty(0, dtype=t.dtype, device=t.device)  # resized by the op
        r = getattr(torch, op)(t, out=out)
        assert r is out
        return out

    def out_wider(t):
        out = torch.empty(t.shape, dtype=torch.float64, device=t.device)
        getattr(torch, op)(t, out=out)
        return out

    x = floats()
    check_same(inplace, x)
    check_same(inplace_on_view, x)
    check_same(out_same_dtype, x)
    if op in INT_TO_FLOAT:  # computed in float32, then cast: float32 tolerances
        check_same(out_wider, x, rtol=1.3e-6, atol=1e-5)
    else:  # ATen's plain unary kernels want out= of the input's dtype
        check_same_error(out_wider, x)


@pytest.mark.parametrize("op", sorted(INT_TO_FLOAT))
def test_inplace_int_cannot_hold_float(op):
    check_same_error(lambda t: getattr(t, op + "_")(), ints())


@pytest.mark.parametrize("op", UNARY)
def test_grad(op, mode):
    torch_tpu.metrics.reset()
    g = torch.Generator().manual_seed(3)
    x = torch.rand(4, 7, generator=g) + 0.1 if op in POSITIVE_DOMAIN else torch.randn(4, 7, generator=g)
    grad = torch.randn(4, 7, generator=g)

    def run(x, grad):
        x = x.clone().requires_grad_()
        getattr(torch, op)(x).backward(grad)
        return x.grad

    check_same(run, x, grad)
    # sgn's backward makes its zeros with _efficientzerotensor, a factory op of its own
    allowed = {"aten::_efficientzerotensor"} if op == "sgn" else set()
    assert set(torch_tpu.metrics.fallback_ops()) <= allowed


def test_empty_and_scalar(mode, no_fallback):
    check_same(torch.exp, torch.empty(0, 3))
    check_same(torch.sin, torch.tensor(0.7))


# ---- round with decimals -----------------------------------------------------------------------
@pytest.mark.parametrize("decimals", [0, 1, 2, 3, -1, -2])
def test_round_decimals(decimals, mode, no_fallback):
    x = floats(scale=300.0)
    check_same(lambda t: torch.round(t, decimals=decimals), x)
    check_same(lambda t: torch.round(t, decimals=decimals), x.bfloat16())
    check_same(lambda t: t.clone().round_(decimals=decimals), x)
    check_same(lambda t: torch.round(t, decimals=decimals, out=torch.empty_like(t)), x)


def test_round_decimals_errors(no_fallback):
    for decimals in (0, 2):  # round(int) is the identity, round(int, decimals=...) is not implemented
        err = check_same_error(lambda t: torch.round(t, decimals=decimals), ints(), exact=False)
        assert "not implemented for 'Long'" in str(err)
    wider_out = lambda t: torch.empty(0, dtype=torch.float64, device=t.device)  # noqa: E731
    check_same_error(lambda t: torch.round(t, decimals=1, out=wider_out(t)), floats())


# ---- predicates and nan_to_num -------------------------------------------------------------------
@pytest.mark.parametrize("op", ["isnan", "isinf", "isposinf", "isneginf", "isfinite"])
def test_predicates(op, mode, no_fallback):
    fn = getattr(torch, op)
    for x in (floats(), floats(dtype=torch.bfloat16), ints(), torch.tensor([True, False])):
        assert check_same(fn, x).dtype == torch.bool
    if op != "isfinite":  # isfinite is composite: no out= of its own
        out_fn = getattr(torch.ops.aten, op).out
        check_same(lambda t: out_fn(t, out=torch.empty(0, dtype=torch.bool, device=t.device)), floats().t())
        check_same_error(lambda t: out_fn(t, out=torch.empty(0, device=t.device)), floats())


@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5}, {"nan": -2.0, "posinf": 7.0, "neginf": -7.0},
                                    {"posinf": 1e300, "neginf": -1e300}])
def test_nan_to_num(kwargs, mode, no_fallback):
    x = floats()
    check_same(lambda t: torch.nan_to_num(t, **kwargs), x)
    check_same(lambda t: torch.nan_to_num(t, **kwargs), x.bfloat16())
    check_same(lambda t: torch.nan_to_num(t, **kwargs), x.half())
    check_same(lambda t: torch.nan_to_num(t, **kwargs), x.double())
    check_same(lambda t: t.clone().nan_to_num_(**kwargs), x)
    check_same(lambda t: torch.nan_to_num(t, **kwargs, out=torch.empty_like(t)), x.t())
    check_same(lambda t: torch.nan_to_num(t, **kwargs), ints())


# ---- clamp ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (-1.0, None), (None, 0.5), (1.0, -1.0), (math.nan, None)])
def test_clamp_scalar(lo, hi, mode, no_fallback):
    x = floats()
    check_same(lambda t: torch.clamp(t, lo, hi), x)
    check_same(lambda t: torch.clamp(t, lo, hi), x.bfloat16())
    check_same(lambda t: t.clone().clamp_(lo, hi), x)
    check_same(lambda t: torch.clamp(t, lo, hi, out=torch.empty(0, device=t.device)), x.t())
    if lo is not None and not math.isnan(lo):
        check_same(lambda t: torch.clamp_min(t, lo), x)
        check_same(lambda t: t.clone().clamp_min_(lo), x)
    if hi is not None:
        check_same(lambda t: torch.clamp_max(t, hi), x)
        check_same(lambda t: torch.clamp_max(t, hi, out=torch.empty_like(t)), x)


def test_clamp_integers_promote(mode, no_fallback):
    i = ints()
    assert check_same(lambda t: torch.clamp(t, -3, 4), i).dtype == torch.int64
    assert check_same(lambda t: torch.clamp(t, min=0.5), i).dtype == torch.float32
    assert check_same(lambda t: torch.clamp_max(t, 2.5), i.to(torch.int32)).dtype == torch.float32
    check_same(lambda t: torch.clamp(t, 0, 2), torch.tensor([True, False]))
    check_same_error(lambda t: t.clone().clamp_(min=0.5), i)


def test_clamp_tensor(mode, no_fallback):
    g = torch.Generator().manual_seed(5)
    x, lo, hi = floats((4, 6)), torch.randn(4, 1, generator=g) - 1, torch.randn(6, generator=g) + 1
    lo[0, 0] = math.nan
    check_same(lambda t, a, b: torch.clamp(t, a, b), x, lo, hi)
    check_same(lambda t, a: torch.clamp(t, min=a), x, lo)
    check_same(lambda t, b: torch.clamp(t, max=b), x, hi)
    check_same(lambda t, a, b: t.clone().clamp_(a, b), x, lo, hi)
    check_same(lambda t, a, b: torch.clamp(t, a, b, out=torch.empty_like(t)), x, lo, hi)
    check_same(lambda t, a: torch.clamp_min(t, a), x, lo)
    check_same(lambda t, a: t.clone().clamp_min_(a), x, lo)
    check_same(lambda t, b: torch.clamp_max(t, b), x, hi)
    check_same(lambda t, b: torch.clamp_max(t, b, out=torch.empty_like(t)), x, hi)
    # a bound may be a CPU scalar tensor, and it takes part in type promotion
    check_same(lambda t: torch.clamp(t, torch.tensor(-1.0), torch.tensor(2.0)), ints())
    # the bound broadcasts the result beyond self
    check_same(lambda t, b: torch.clamp(t, max=b), x[:, :1], hi)


def test_clamp_errors():
    check_same_error(lambda t: torch.clamp(t), floats())
    check_same_error(lambda t: torch.clamp(t, None, None), floats())


def test_clamp_grad(mode, no_fallback):
    def run(x, g):
        x = x.clone().requires_grad_()
        torch.clamp(x, -0.5, 0.7).backward(g)
        return x.grad

    g = torch.Generator().manual_seed(2)
    check_same(run, torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g))


# ---- lerp ---------------------------------------------------------------------------------------
def test_lerp(mode, no_fallback):
    g = torch.Generator().manual_seed(4)
    a, b = floats((5, 8)), torch.randn(5, 8, generator=g) * 10
    w = torch.rand(8, generator=g) * 2 - 0.5  # both branches (|w| < 0.5 and not)
    for weight in (0.25, 0.75, -1.0, 2):
        check_same(lambda x, y: torch.lerp(x, y, weight), a, b)
        check_same(lambda x, y: torch.lerp(x, y, weight), a.bfloat16(), b.bfloat16())
        check_same(lambda x, y: x.clone().lerp_(y, weight), a, b)
        check_same(lambda x, y: torch.lerp(x, y, weight, out=torch.empty(0, device=x.device)), a.t(), b.t())
    check_same(torch.lerp, a, b, w)
    check_same(torch.lerp, a.bfloat16(), b.bfloat16(), w.bfloat16())
    check_same(lambda x, y, z: x.clone().lerp_(y, z), a, b, w)
    check_same(lambda x, y, z: torch.lerp(x, y, z, out=torch.empty_like(x)), a, b, w)
    check_same(lambda x, y: torch.lerp(x, y, torch.tensor(0.3)), a, b[0])  # CPU scalar weight, broadcast end


def test_lerp_errors():
    a = floats((3, 4))
    check_same_error(torch.lerp, a, a.double(), 0.5)
    check_same_error(torch.lerp, a, a, a.double())
    err = check_same_error(torch.lerp, ints(), ints(), 0.5, exact=False)
    assert "not implemented for 'Long'" in str(err)


def test_lerp_grad(mode, no_fallback):
    g = torch.Generator().manual_seed(6)
    a, b, w, go = (torch.randn(3, 5, generator=g) for _ in range(4))

    def run(a, b, w, go):
        a, b, w = (t.clone().requires_grad_() for t in (a, b, w))
        torch.lerp(a, b, w).backward(go)
        return a.grad, b.grad, w.grad

    check_same(run, a, b, w, go)


# ---- addcmul / addcdiv -----------------------------------------------------------------------
@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addc(op, mode, no_fallback):
    fn = getattr(torch, op)
    g = torch.Generator().manual_seed(7)
    s, t1, t2 = floats((4, 6)), torch.randn(4, 1, generator=g), torch.randn(6, generator=g) + 3
    for value in (1, 0.5, -2):
        check_same(lambda a, b, c: fn(a, b, c, value=value), s, t1, t2)
        check_same(lambda a, b, c: fn(a, b, c, value=value), s.bfloat16(), t1.bfloat16(), t2.bfloat16())
        check_same(lambda a, b, c: getattr(a.clone(), op + "_")(b, c, value=value), s, t1, t2)
        check_same(lambda a, b, c: fn(a, b, c, value=value, out=torch.empty(0, device=a.device)), s.t(), t1.t(), t2[:4])
    check_same(lambda a, b, c: fn(a, b, c), s, t1.double(), t2)  # promotes to float64
    if op == "addcmul":
        i = ints((4, 6))
        check_same(lambda a, b, c: fn(a, b, c, value=3), i, i, i)
        check_same(lambda a, b, c: fn(a, b, c, value=0.5), i, i, i)  # the value truncates to 0
        check_same(lambda a, b, c: fn(a, b, c, value=0.5), i, s, i)
        err = check_same_error(fn, *(torch.tensor([True, False]),) * 3, exact=False)
        assert "not implemented for 'Bool'" in str(err)
    else:
        check_same_error(fn, ints(), ints(), ints())


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addc_grad(op, mode, no_fallback):
    g = torch.Generator().manual_seed(8)
    s, t1, t2, go = (torch.randn(3, 4, generator=g) + 2 for _ in range(4))

    def run(s, t1, t2, go):
        s, t1, t2 = (t.clone().requires_grad_() for t in (s, t1, t2))
        getattr(torch, op)(s, t1, t2, value=0.7).backward(go)
        return s.grad, t1.grad, t2.grad

    check_same(run, s, t1, t2, go)


# ---- masked_fill_ ------------------------------------------------------------------------------------
def test_masked_fill(mode, no_fallback):
    g = torch.Generator().manual_seed(9)
    x = floats((4, 6))
    mask = torch.rand(4, 6, generator=g) > 0.5
    row_mask = torch.rand(6, generator=g) > 0.5
    check_same(lambda t, m: t.clone().masked_fill_(m, -1.5), x, mask)
    check_same(lambda t, m: t.clone().masked_fill_(m, math.inf), x.bfloat16(), mask)
    check_same(lambda t, m: t.clone().masked_fill_(m, 3), x, row_mask)  # mask broadcasts
    check_same(lambda t, m: t.masked_fill(m, 2.5), x, mask)  # functional form (composite)
    check_same(lambda t, m: t.clone().masked_fill_(m, torch.tensor(7.0)), x, mask)  # CPU 0-dim value
    check_same(lambda t, m, v: t.clone().masked_fill_(m, v), x, mask, torch.tensor(-4.0))  # device value
    check_same(lambda t, m: t.clone().masked_fill_(m, 2.5), ints((4, 6)), mask)  # value cast to int
    check_same(lambda t, m: t.clone().masked_fill_(m, True), torch.zeros(4, 6, dtype=torch.bool), mask)
    check_same(lambda t, m: t.clone().masked_fill_(m, 2), torch.zeros(4, 6, dtype=torch.bool), mask)

    def on_view(t, m):
        base = t.clone()
        base[:, ::2].masked_fill_(m[:, ::2], 9.0)
        return base

    check_same(on_view, x, mask)


def test_masked_fill_errors():
    x, mask = floats((3, 4)), torch.ones(3, 4, dtype=torch.bool)
    check_same_error(lambda t, m: t.masked_fill_(m, 1.0), x, mask.long())
    check_same_error(lambda t, m: t.masked_fill_(m, torch.ones(1)), x, mask)
    check_same_error(lambda t, m: t.masked_fill_(m, 1.0), x[0], mask)  # self cannot broadcast
    check_same_error(lambda t, m: t.masked_fill_(m, 1.0), x, mask[:2])  # shapes do not broadcast
    check_same_error(lambda t, m: t.masked_fill_(m, 300), x.to(torch.int8), mask)  # overflow


def test_masked_fill_grad(mode, no_fallback):
    g = torch.Generator().manual_seed(10)
    x, go = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    mask = torch.rand(3, 4, generator=g) > 0.5

    def run(x, m, go):
        x = x.clone().requires_grad_()
        x.masked_fill(m, 0.5).backward(go)
        return x.grad

    check_same(run, x, mask, go)


def test_inplace_on_expanded_is_refused():
    """Elements of an expanded view share memory: writing to it in place is an error, as in ATen."""
    x = torch.full((1, 3), 0.5)
    check_same_error(lambda t: t.expand(4, 3).exp_(), x)
    check_same_error(lambda t: t.expand(4, 3).clamp_(0, 1), x)
    check_same_error(lambda t, o: torch.neg(t, out=o.expand(4, 3)), torch.ones(4, 3), x)


def test_masked_fill_expanded(mode, no_fallback):
    """Deprecated in ATen but allowed: a shared element is filled if any position viewing it is masked."""
    g = torch.Generator().manual_seed(12)
    x, mask = torch.randn(3, 1, 5, generator=g), torch.rand(3, 4, 5, generator=g) > 0.8

    def run(t, m):
        base = t.clone()
        with pytest.warns(UserWarning, match="expanded tensors is deprecated"):
            base.expand(3, 4, 5).masked_fill_(m, -7.0)
        return base

    check_same(run, x, mask)


# ---- xlogy ------------------------------------------------------------------------------------------
def xlogy_inputs(dtype=torch.float32):
    """x with zeros and NaN; y with zeros, negatives, infinities and NaN, also where x == 0."""
    x = floats((6, 8), seed=9)
    x[:, :3] = 0.0
    y = floats((6, 8), seed=10).abs()
    y[0] = torch.tensor([math.nan, 0.0, -1.0, math.inf, math.nan, 0.0, -2.0, math.inf])
    return x.to(dtype), y.to(dtype)


def test_xlogy(mode, no_fallback):
    x, y = xlogy_inputs()
    check_same(torch.xlogy, x, y)
    check_same(torch.special.xlogy, x, y)
    check_same(torch.xlogy, *xlogy_inputs(torch.bfloat16))
    check_same(torch.xlogy, x.t(), y.t()[::2][:, :6].repeat(2, 1)[:8])  # non-contiguous
    check_same(torch.xlogy, x, y[:1])  # broadcast
    check_same(torch.xlogy, x, y.double())  # promotes to float64
    check_same(torch.xlogy, ints((6, 8)), y)
    check_same(torch.xlogy, ints((6, 8)), ints((6, 8), lo=0))  # integers give float32
    check_same(lambda a, b: torch.xlogy(a, b > 1), x, y)  # bool
    check_same(lambda a: torch.xlogy(a, 2.5), x)  # Scalar forms
    check_same(lambda b: torch.xlogy(0.0, b), y)
    check_same(lambda b: torch.xlogy(3, b), y.bfloat16())
    check_same(lambda a, b: torch.xlogy(a, b, out=torch.empty(0, device=a.device)), x, y)
    check_same(lambda a, b: torch.xlogy(a, b, out=torch.empty(0, device=a.device, dtype=torch.float64)), x, y)
    check_same(lambda b: torch.xlogy(2, b, out=torch.empty(0, device=b.device)), y)
    check_same(lambda a, b: torch.special.xlogy(a, b, out=torch.empty(0, device=a.device)), x, y)
    check_same(lambda a, b: a.clone().xlogy_(b), x, y)
    check_same(lambda a: a.clone().xlogy_(0.5), x)


def test_xlogy_errors():
    check_same_error(lambda a, b: a.xlogy_(b), ints((6, 8)), xlogy_inputs()[1])  # float into long
    check_same_error(lambda a, b: torch.xlogy(a, b, out=torch.empty(0, dtype=torch.long, device=a.device)),
                     *xlogy_inputs())


def test_xlogy_grad(mode, no_fallback):
    x, y = xlogy_inputs()
    y = y.abs() + 0.5
    go = floats((6, 8), seed=11).nan_to_num(0.0, 1.0, -1.0)

    def run(x, y, go):
        x, y = (t.clone().requires_grad_() for t in (x, y))
        torch.xlogy(x, y).backward(go)
        return x.grad, y.grad

    check_same(run, x.nan_to_num(0.0, 1.0, -1.0), y.nan_to_num(1.0, 2.0), go)


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none"])
def test_kl_div(log_target, reduction, mode, no_fallback):
    g = torch.Generator().manual_seed(12)
    inp = torch.randn(4, 7, generator=g).log_softmax(-1)
    target = torch.rand(4, 7, generator=g)
    target[0, :3] = 0.0
    if log_target:
        target = target.log()

    def run(inp, target):
        inp = inp.clone().requires_grad_()
        out = torch.nn.functional.kl_div(inp, target, reduction=reduction, log_target=log_target)
        out.sum().backward()
        return out, inp.grad

    check_same(run, inp, target)
    check_same(lambda a, b: torch.nn.functional.kl_div(a, b, reduction=reduction, log_target=log_target),
               inp.bfloat16(), target.bfloat16())


def test_atan_of_a_larger_tensor_matches_cpu(mode):
    # Note [atan on XLA's CPU plugin] (csrc/torch/lower/unary_math.cc): with the 1 of atan2(x, 1) a
    # constant, the pjrt backend's results on 20x20 were off by up to 19. Same formula as the CPU's
    # to float32 rounding.
    x = torch.randn(20, 20, generator=torch.Generator().manual_seed(0)) * 5
    torch.testing.assert_close(torch.atan(x.to("tpu")).cpu(), torch.atan(x))
    torch.testing.assert_close(torch.atan(x.t().to("tpu")).cpu(), torch.atan(x.t()))
