"""bfloat16 elementwise ops on the host executor: a bfloat16 op runs as converts to float32, the
float32 op and one rounding back, and its contiguous inputs are widened as the op reads them
(Note [Widening reads], csrc/runtime/host/elementwise.cc). The device must give exactly the bits of
computing in float32 and rounding once -- the reference here, built on the CPU from the same
float32 operations in the same order (widening bfloat16 is exact, so any other result is a bug) --
for contiguous inputs (read in place), strided and broadcast ones (widened into storage), lengths
that end in a partial vector, NaN and infinities, in every eager mode."""
import math

import pytest
import torch

from conftest import to_cpu, to_tpu

BF = torch.bfloat16


def vals(shape, seed, special=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 3
    if special:
        flat = x.view(-1)
        flat[::97] = math.nan
        flat[5::89] = math.inf
        flat[7::83] = -math.inf
        flat[11::79] = 0.0
    return x.to(BF)


def exact(actual, expected):
    actual = to_cpu(actual)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    # bit for bit (NaN where NaN)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


BINARY = {
    "add": (torch.add, lambda a, b: a + b),
    "sub": (torch.sub, lambda a, b: a - b),
    "mul": (torch.mul, lambda a, b: a * b),
    "div": (torch.div, lambda a, b: a / b),
    "maximum": (torch.maximum, torch.maximum),
    "minimum": (torch.minimum, torch.minimum),
}

# (shape of a, shape of b): contiguous over many tiles with a partial last vector, short rows
# (row tiles), a broadcast row, a scalar
SHAPES = [((37, 1029), (37, 1029)), ((300, 24), (300, 24)), ((64, 96), (96,)), ((5, 333), ())]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "x".join(map(str, s[0])) + "_" + "x".join(map(str, s[1])))
def test_binary_is_float32_rounded_once(mode, name, shapes):
    op, ref = BINARY[name]
    a, b = vals(shapes[0], 1), vals(shapes[1], 2, special=len(shapes[1]) > 0)
    expected = ref(a.float(), b.float()).to(BF)
    exact(op(to_tpu(a), to_tpu(b)), expected)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_strided_and_repeated_operands(mode, name):
    op, ref = BINARY[name]
    a = vals((129, 65), 3)
    t = to_tpu(a)
    exact(op(t, t), ref(a.float(), a.float()).to(BF))                  # one input read twice
    exact(op(t.t(), t.t()[:, :1]), ref(a.float().t(), a.float().t()[:, :1]).to(BF))  # strided
    exact(op(t[:, 1:], t[:, :-1]), ref(a.float()[:, 1:], a.float()[:, :-1]).to(BF))  # offset rows


def test_addcmul_addcdiv_and_chains(mode):
    x, y, z = vals((513, 257), 4), vals((513, 257), 5), vals((513, 257), 6)
    xf, yf, zf = x.float(), y.float(), z.float()
    X, Y, Z = to_tpu(x), to_tpu(y), to_tpu(z)
    # ATen's order: self + (value * t1) * t2 (and / t2), in float32, rounded once
    exact(torch.addcmul(X, Y, Z, value=0.5), (xf + (0.5 * yf) * zf).to(BF))
    exact(torch.addcdiv(X, Y, Z, value=-2.0), (xf + (-2.0 * yf) / zf).to(BF))
    # a chain of bfloat16 ops: each rounds (fused mode records them in one window)
    r = (X * Y + Z).relu() - X
    exact(r, ((((xf * yf).to(BF).float() + zf).to(BF).float().relu()).to(BF).float() - xf).to(BF))


def test_mixed_bfloat16_and_float32_promote_exactly(mode):
    a, b = vals((200, 130), 7), torch.randn(200, 130, generator=torch.Generator().manual_seed(8))
    for op, ref in BINARY.values():
        out = op(to_tpu(a), to_tpu(b))  # promotes to float32: the bfloat16 side widened as read
        exact(out, ref(a.float(), b))
        out = op(to_tpu(b), to_tpu(a))
        exact(out, ref(b, a.float()))
