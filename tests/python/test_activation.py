"""Activations and their backward kernels: tpu results against PyTorch's CPU kernels.

Tolerances: float32 uses conftest's defaults (rtol 1.3e-6, atol 1e-5). The formulas follow ATen's
kernels operation for operation; only the math functions inside (exp, tanh, erf, log1p) come from
other implementations than ATen's (SLEEF and its own erf polynomial), 1-4 ulp apart, well inside
that tolerance. bfloat16 computes in float32 and rounds once (its default rtol 1.6e-2).

Special values (NaN, +-inf, 0, the kinks at +-3, the clamp bounds) sit at the start of each input,
where ATen runs its vectorized kernel: for NaN the scalar tail loop of a few ATen backward kernels
picks another branch than the vectorized one, and we follow the vectorized one.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import check_same, to_tpu

A = torch.ops.aten

ACTS = {
    "relu": torch.relu,
    "relu6": F.relu6,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "hardtanh": lambda t: F.hardtanh(t, -0.7, 1.3),
    "leaky_relu": lambda t: F.leaky_relu(t, 0.05),
    "elu": lambda t: F.elu(t, alpha=1.3),
    "selu": F.selu,
    "celu": lambda t: F.celu(t, alpha=0.8),
    "softplus": lambda t: F.softplus(t, beta=1.5, threshold=10.0),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "threshold": lambda t: F.threshold(t, 0.1, -2.0),
    "logit": lambda t: torch.logit(t),
    "logit_eps": lambda t: torch.logit(t, eps=0.05),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 3.0, -3.0, -0.7, 1.3, 0.1, 1.0, 0.05, 0.95, 20.0, -20.0]
FINITE_SPECIALS = [s for s in SPECIALS if math.isfinite(s)]


def floats(shape=(6, 37), scale=3.0, seed=0, dtype=torch.float32, specials=SPECIALS):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * scale
    x.view(-1)[: len(specials)] = torch.tensor(specials)
    return x.to(dtype)


def unit_floats(**kw):  # logit's domain is [0, 1]: also values just outside it
    x = torch.rand(6, 37, generator=torch.Generator().manual_seed(kw.pop("seed", 0))) * 1.2 - 0.1
    x.view(-1)[:6] = torch.tensor([0.0, 1.0, 0.05, 0.95, math.nan, 0.5])
    return x.to(kw.pop("dtype", torch.float32))


def inputs(name, **kw):
    if name.startswith("logit"):
        return unit_floats(**kw)
    if name.startswith("gelu"):  # +-inf: see test_gelu_infinities
        kw.setdefault("specials", [s for s in SPECIALS if not math.isinf(s)])
    return floats(**kw)


def check_same_error(fn, *args, exact=True):
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(type(cpu.value)) as tpu:
        fn(*to_tpu(args))
    if exact:
        assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]
    return tpu.value


@pytest.mark.parametrize("name", list(ACTS))
def test_forward(name, mode, no_fallback):
    check_same(ACTS[name], inputs(name))
    check_same(ACTS[name], inputs(name, dtype=torch.bfloat16))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_infinities(approximate, no_fallback):
    """gelu(+inf) = +inf and gelu(-inf) = 0 (the limits), as ATen's current CPU and CUDA kernels
    return them; torch 2.13's vectorized CPU kernel returns NaN for both, so this is not compared
    against the CPU."""
    x = torch.tensor([math.inf, -math.inf, 1.0], device="tpu")
    y = F.gelu(x, approximate=approximate).cpu()
    assert y[0].item() == math.inf and y[1].item() == 0.0
    assert y[2].item() == pytest.approx(F.gelu(torch.tensor(1.0), approximate=approximate).item(), rel=1e-6)


def test_gelu_float32_against_float64(mode, no_fallback):
    """The host executor runs gelu's erf chain as one kernel (Note [Region composites]) that
    computes erfc directly, so it is judged against float64, not against CPU float32, whose
    1 + erf(x / sqrt 2) cancels for x < -2 (about 1e-3 relative at x = -5). Bounds: 3e-7
    relative for x >= 0; for x < 0, 4e-7 * (1 + |log erfc(-x / sqrt 2)|) relative (the float32
    rounding of exp's argument, 2.1e-6 at the end of the range), checked down to x = -5.5
    (gelu = -1.1e-7); below that only |gelu| < 1.2e-7. 200001 points: many tiles, both threads.
    Backends that compile the chain themselves (PJRT) keep the cancellation, as CPU float32
    does: there the error may also reach 1e-6 * |x| (erf's float32 error, scaled by x / 2)."""
    x = torch.linspace(-8, 8, 200001, dtype=torch.float32)
    y = F.gelu(x.to("tpu")).cpu().double()
    xd = x.double()
    erfc = torch.special.erfc(-xd / math.sqrt(2))
    want = 0.5 * xd * erfc
    err = (y - want).abs()
    rel = torch.where(xd >= 0, torch.full_like(xd, 3e-7), 4e-7 * (1 + erfc.log().abs()))
    near = xd >= -5.5
    bound = rel * want.abs()
    if torch.tpu.get_device_properties(0).backend != "host":
        bound = torch.maximum(bound, 1e-6 * xd.abs())
    bad = near & (err > bound)
    assert not bad.any(), f"gelu({x[bad][0].item()}) = {y[bad][0].item()}, want {want[bad][0].item()}"
    assert (y[~near].abs() < 1.2e-7).all()


@pytest.mark.parametrize("name", list(ACTS))
def test_forward_float64_and_noncontiguous(name, no_fallback):
    check_same(ACTS[name], inputs(name, dtype=torch.float64))
    check_same(lambda t: ACTS[name](t.t()[::2]), inputs(name))


@pytest.mark.parametrize("name", list(ACTS))
def test_grad(name, mode, no_fallback):
    x = inputs(name, seed=1, specials=FINITE_SPECIALS) if not name.startswith("logit") else unit_floats(seed=1)
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(2))

    def run(x, grad):
        x = x.clone().requires_grad_()
        ACTS[name](x).backward(grad)
        return x.grad

    check_same(run, x, grad)
    check_same(run, x.bfloat16(), grad.bfloat16())


# In-place forms (the out-of-place ones are above): results and, through autograd, the backward
# kernels that take the result instead of the input (elu_backward / leaky_relu_backward).
INPLACE = {
    "relu": lambda t: F.relu(t, inplace=True),
    "relu6": lambda t: F.relu6(t, inplace=True),
    "hardtanh": lambda t: F.hardtanh(t, -0.5, 0.5, inplace=True),
    "leaky_relu": lambda t: F.leaky_relu(t, 0.2, inplace=True),
    "elu": lambda t: F.elu(t, 0.7, inplace=True),
    "selu": lambda t: F.selu(t, inplace=True),
    "silu": lambda t: F.silu(t, inplace=True),
    "mish": lambda t: F.mish(t, inplace=True),
    "hardsigmoid": lambda t: F.hardsigmoid(t, inplace=True),
    "hardswish": lambda t: F.hardswish(t, inplace=True),
    "threshold": lambda t: F.threshold(t, 0.5, 9.0, inplace=True),
    "gelu": lambda t: A.gelu_(t, approximate="tanh"),
    "logit": lambda t: t.logit_(eps=0.1),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace(name, mode, no_fallback):
    fn = INPLACE[name]
    x = inputs(name)

    def on_view(t):  # writes through a strided view into its base
        base = t.clone()
        fn(base[1:, ::3])
        return base

    check_same(lambda t: fn(t.clone()), x)
    check_same(on_view, x)
    if name == "logit":
        return
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(4))

    def run(x, g):
        x = x.clone().requires_grad_()
        fn(x * 1.0).backward(g)
        return x.grad

    check_same(run, floats(specials=FINITE_SPECIALS), g)


OUT_FORMS = {
    "gelu": (A.gelu.out, {"approximate": "tanh"}),
    "silu": (A.silu.out, {}),
    "mish": (A.mish.out, {}),
    "hardtanh": (A.hardtanh.out, {"min_val": -2.0, "max_val": 0.5}),
    "leaky_relu": (A.leaky_relu.out, {"negative_slope": 0.3}),
    "elu": (A.elu.out, {"alpha": 0.5, "scale": 2.0, "input_scale": 1.5}),
    "softplus": (A.softplus.out, {"beta": 0.5, "threshold": 3.0}),
    "hardsigmoid": (A.hardsigmoid.out, {}),
    "hardswish": (A.hardswish.out, {}),
    "threshold": (A.threshold.out, {"threshold": 0.0, "value": 1.5}),
    "logit": (A.logit.out, {"eps": 0.2}),
}


@pytest.mark.parametrize("name", list(OUT_FORMS))
def test_out(name, mode, no_fallback):
    fn, kw = OUT_FORMS[name]
    x = inputs(name)
    check_same(lambda t: fn(t, **kw, out=torch.empty(0, device=t.device)), x.t())
    wider = lambda t: fn(t, **kw, out=torch.empty(t.shape, dtype=torch.float64, device=t.device))  # noqa: E731
    if name in ("threshold", "logit"):  # these cast to out's dtype; the rest want the input's
        check_same(wider, x, rtol=1.3e-6, atol=1e-5)
    else:
        check_same_error(wider, x)


# Backward kernels called directly: promotion of mixed dtypes and their grad_input= forms.
BACKWARD = {
    "threshold_backward": (A.threshold_backward, (0.1,)),
    "gelu_backward": (A.gelu_backward, ()),
    "gelu_backward_tanh": (lambda g, x: A.gelu_backward(g, x, approximate="tanh"), ()),
    "silu_backward": (A.silu_backward, ()),
    "mish_backward": (A.mish_backward, ()),
    "hardtanh_backward": (A.hardtanh_backward, (-0.7, 1.3)),
    "leaky_relu_backward": (A.leaky_relu_backward, (0.05, False)),
    "softplus_backward": (A.softplus_backward, (1.5, 10.0)),
    "hardsigmoid_backward": (A.hardsigmoid_backward, ()),
    "hardswish_backward": (A.hardswish_backward, ()),
    "tanh_backward": (A.tanh_backward, ()),
    "sigmoid_backward": (A.sigmoid_backward, ()),
    "logit_backward": (A.logit_backward, ()),
    "logit_backward_eps": (lambda g, x: A.logit_backward(g, x, eps=0.05), ()),
}


@pytest.mark.parametrize("name", list(BACKWARD))
def test_backward_kernels(name, mode, no_fallback):
    fn, extra = BACKWARD[name]
    x = unit_floats(seed=5) if name.startswith("logit") else floats(seed=5, specials=FINITE_SPECIALS)
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(6))
    check_same(lambda g, x: fn(g, x, *extra), g, x)
    check_same(lambda g, x: fn(g, x, *extra), g, x.double())  # promotes to float64
    check_same(lambda g, x: fn(g.t(), x.t(), *extra), g, x)
    packet = getattr(A, name.replace("_tanh", "").replace("_eps", ""))
    if "grad_input" in packet.overloads():
        kw = {"approximate": "tanh"} if name.endswith("_tanh") else {"eps": 0.05} if name.endswith("_eps") else {}
        check_same(lambda g, x: packet.grad_input(g, x, *extra, **kw, grad_input=torch.empty(0, device=x.device)),
                   g, x)


@pytest.mark.parametrize("is_result", [False, True])
def test_elu_backward(is_result, mode, no_fallback):
    x = floats(seed=7, specials=FINITE_SPECIALS)
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(8))
    y = F.elu(x, 1.2)
    arg = y if is_result else x
    check_same(lambda g, a: A.elu_backward(g, 1.2, 1.0, 1.0, is_result, a), g, arg)
    check_same(lambda g, a: A.elu_backward(g, 0.5, 1.5, 0.7, is_result, a), g.bfloat16(), arg.bfloat16())
    check_same(lambda g, a: A.elu_backward.grad_input(g, 1.2, 1.0, 1.0, is_result, a,
                                                      grad_input=torch.empty_like(a)), g, arg)


def test_integers(no_fallback):
    i = torch.randint(-10, 10, (4, 9), generator=torch.Generator().manual_seed(9))
    assert check_same(torch.relu, i).dtype == torch.int64
    check_same(lambda t: F.relu(t.clone(), inplace=True), i.to(torch.int32))
    check_same(lambda t: F.hardtanh(t, -1.5, 4.5), i)  # bounds truncate to the integer dtype
    check_same(lambda t: F.threshold(t, 1.5, 7.5), i)
    check_same(lambda g, x: A.threshold_backward(g, x, 0), i, i)
    check_same(lambda t: torch.logit(t), i)  # integers give float
    for name in ("gelu", "silu", "mish", "leaky_relu", "elu", "softplus", "hardsigmoid", "hardswish"):
        err = check_same_error(ACTS[name], i, exact=False)
        assert "not implemented for 'Long'" in str(err)
    check_same_error(A.tanh_backward, i, i, exact=False)


def test_errors():
    x, b = floats((3, 5)), torch.tensor([True, False])
    check_same_error(torch.relu, b)
    check_same_error(A.hardtanh, b)
    check_same_error(lambda t: F.gelu(t, approximate="fast"), x)
    check_same_error(lambda g, t: A.gelu_backward(g, t, approximate="fast"), x, x)
    check_same_error(lambda g, t: A.leaky_relu_backward(g, t, -0.1, True), x, x)
    check_same_error(lambda g, t: A.elu_backward(g, -1.0, 1.0, 1.0, True, t), x, x)
    err = check_same_error(A.threshold, b, 0, 1, exact=False)
    assert "not implemented for 'Bool'" in str(err)


def test_module_end_to_end(mode, no_fallback):
    """A small chain of activations, forward and backward, as a model would run them."""
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(11))

    def run(x):
        x = x.clone().requires_grad_()
        h = F.gelu(x) * F.silu(x) + F.leaky_relu(x, 0.1) - F.hardswish(x)
        y = torch.tanh(F.softplus(h)) * torch.sigmoid(F.elu(x))
        y.backward(torch.ones_like(y))
        return y, x.grad

    check_same(run, x)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_sum_backward(approximate, mode, no_fallback):
    def run(x):
        x = x.clone().requires_grad_()
        F.gelu(x, approximate=approximate).sum().backward()
        return x.grad

    check_same(run, torch.randn(7, 9, generator=torch.Generator().manual_seed(13)))
