"""float32 binary ops with a scalar operand on the host executor: inside a fused region a scalar
broadcast is held in a register by the op that reads it (Note [Scalar operands],
csrc/runtime/host/elementwise_simd.cc) instead of being read from a tile-length splat. Each op is
one IEEE operation per element, which PyTorch's CPU kernels also compute, so the device must give
the CPU's bits exactly: on either side of the op, for lengths that end in a partial vector, for
NaN, infinities and signed zeros, as a Python scalar, a 0-dim tensor and an expanded one, alone
and inside a chain, in every eager mode."""
import math

import pytest
import torch

from conftest import to_cpu, to_tpu


def vals(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g) * 3
    x[::97] = math.nan
    x[5::89] = math.inf
    x[7::83] = -math.inf
    x[11::79] = 0.0
    x[13::73] = -0.0
    return x


def exact(actual, expected, signed_zeros=True):
    actual = to_cpu(actual)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    if signed_zeros:  # (assert_close treats -0.0 == 0.0)
        assert torch.equal(torch.signbit(actual), torch.signbit(expected))


OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}
SCALARS = [0.5, -3.0, 1e-30, math.inf, math.nan, -0.0]


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 70001])
@pytest.mark.parametrize("op", list(OPS))
def test_a_scalar_on_either_side_gives_the_cpu_bits(mode, op, n):
    f = OPS[op]
    # max/min of +0.0 and -0.0 is either zero (IEEE): PyTorch CPU's own scalar and vector loops
    # disagree on it (torch.maximum(zeros(n), full((n,), -0.0)) is +0.0 for n = 15, -0.0 for 64)
    zeros = op not in ("maximum", "minimum")
    x = vals(n, n)
    dx = to_tpu(x)
    for s in SCALARS:
        st = torch.tensor(s)
        dst = to_tpu(st)
        if zeros:
            exact(f(dx, s), f(x, s))
            exact(f(s, dx), f(s, x))
        exact(f(dx, dst), f(x, st), zeros)  # a 0-dim tensor
        exact(f(dst, dx), f(st, x), zeros)
        exact(f(dx, dst.expand(n)), f(x, st.expand(n)), zeros)  # an expanded one (every stride 0)


@pytest.mark.parametrize("shape", [(4, 37), (3, 5, 130)])
def test_chains_with_scalars_give_the_cpu_bits(mode, shape):
    x, y, z = (vals(math.prod(shape), k).view(shape) for k in (1, 2, 3))
    dx, dy, dz = (to_tpu(t) for t in (x, y, z))
    # addcmul is x + value * y * z, left to right, one rounding per op (PyTorch CPU's own addcmul
    # contracts a multiply-add in its vector loop, so its bits are not the reference)
    exact(torch.addcmul(dx, dy, dz, value=0.3), x + (0.3 * y) * z)
    exact(torch.addcdiv(dx, dy, dz, value=-2.0), torch.addcdiv(x, y, z, value=-2.0))
    exact(((dx * 0.25 + 3.0) / 7.0 - dy).clamp_min(0.5), ((x * 0.25 + 3.0) / 7.0 - y).clamp_min(0.5))
    exact(torch.maximum(dx * 2.0, torch.tensor(1.5).to(dx.device)) - 1.0,
          torch.maximum(x * 2.0, torch.tensor(1.5)) - 1.0, signed_zeros=False)
    # a scalar broadcast along a view of a larger region, and a row broadcast beside it
    b = vals(shape[-1], 9)
    exact((dx + to_tpu(b)) * 3.0 - 0.5, (x + b) * 3.0 - 0.5)
