"""cat/stack, constant_pad_nd, flip, roll, repeat, tril/triu and the device factories (arange,
linspace, eye, full/zeros/ones): CPU vs tpu in both eager modes."""
import re

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from conftest import check_same, to_tpu

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def grad_of(fn, x, g):
    """x.grad after fn(x).backward(g): backward without a sum(), so only our ops run."""
    x = x.clone().requires_grad_()
    fn(x).backward(g)
    return x.grad


# ---- cat / stack -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(mode, no_fallback, dtype, dim):
    a, b = make((2, 3, 4), dtype), make((2, 3, 4), dtype, seed=1)
    c = make((2, 3, 4), dtype, seed=2).narrow(dim, 0, 2)
    check_same(lambda a, b, c: torch.cat([a, b, c], dim), a, b, c)


def test_cat_forms(mode, no_fallback):
    a, b = make((3, 4)), make((4, 3), seed=1)
    check_same(lambda a, b: torch.cat([a, b.t()]), a, b)  # non-contiguous input
    check_same(lambda a, b: torch.cat([a, b.t()], out=torch.empty(0, device=a.device)), a, b)
    check_same(lambda a: torch.cat([a]), a)
    # mixed dtypes promote; legacy 1-D empty tensors and other empty tensors are skipped
    check_same(lambda a, i, e: torch.cat([a, i, e]), a, make((2, 4), torch.int64), torch.tensor([]))
    check_same(lambda a, h: torch.cat([h, a, h]), a, make((3, 4), torch.bfloat16).narrow(0, 0, 0))
    check_same(lambda a: torch.cat([a[:0], a[:0]]), a)
    check_same(lambda a, b: torch.stack([a, b.t(), a], dim=1), a, b)
    check_same(lambda a, b: torch.hstack([a, b.t()]), a, b)


def test_cat_grad(mode, no_fallback):
    a, b = make((2, 3)), make((4, 3), seed=1)
    g = make((6, 3), seed=2)

    def fn(a, b, g):
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        torch.cat([a, b]).backward(g)
        return a.grad, b.grad

    check_same(fn, a, b, g)


def test_cat_errors():
    a = make((2, 3)).to("tpu")
    for fn in [lambda a: torch.cat([a, a.t()]), lambda a: torch.cat([a, a], dim=2)]:
        with pytest.raises((RuntimeError, IndexError)) as cpu_err:
            fn(a.cpu())
        with pytest.raises(type(cpu_err.value), match=re.escape(str(cpu_err.value).split("\n")[0][:40])):
            fn(a)


# ---- constant_pad_nd ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pad", [(1, 2), (0, 1, 2, 0), (1, 1, 1, 1, 1, 1), (-1, 2), (-1, -1, 1, -2)])
def test_constant_pad(mode, no_fallback, dtype, pad):
    x = make((3, 4, 5), dtype)
    value = True if dtype == torch.bool else 3
    check_same(lambda x: torch.constant_pad_nd(x, pad, value), x)


def test_pad_forms(mode, no_fallback):
    x = make((2, 3, 4))
    check_same(lambda x: F.pad(x, (1, 2), value=-1.5), x)
    check_same(lambda x: F.pad(x.transpose(0, 2), (2, 0, 1, 1)), x)  # non-contiguous
    check_same(lambda x: F.pad(x, (0, 0, 1, 1, 0, 0)), make((2, 0, 4)))  # empty input: only padding
    check_same(lambda x, g: grad_of(lambda x: F.pad(x, (1, 2, -1, 0)), x, g), x, make((2, 2, 7), seed=3))


def test_pad_errors():
    x = make((2, 3)).to("tpu")
    with pytest.raises(RuntimeError, match="Length of pad must be even"):
        torch.constant_pad_nd(x, (1,))
    with pytest.raises(RuntimeError, match="Length of pad should be no more than twice"):
        torch.constant_pad_nd(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError, match="resulted in a negative output size"):
        torch.constant_pad_nd(x, (-2, -2))


# ---- flip / roll / repeat ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [(0,), (1,), (-1,), (0, 2), (0, 1, 2)])
def test_flip(mode, no_fallback, dtype, dims):
    x = make((3, 4, 5), dtype)
    check_same(lambda x: torch.flip(x, dims), x)
    check_same(lambda x: x.transpose(0, 2).flip(dims), x)


def test_flip_forms(mode, no_fallback):
    x = make((4, 3))
    check_same(lambda x: torch.fliplr(x), x)
    check_same(lambda x: torch.flipud(x), x)
    check_same(lambda x, g: grad_of(lambda x: x.flip(0, 1), x, g), x, make((4, 3), seed=1))
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        to_tpu(x).flip(0, 0)


def test_flip_size_one_dims_and_layouts(mode, no_fallback):
    # A 1x1 kernel's spatial dims (the convolution input gradient's flip): nothing to reverse, and
    # the result is still a new tensor; channels_last inputs keep their layout.
    w = make((6, 5, 1, 1))
    check_same(lambda w: torch.flip(w, (2, 3)), w)
    check_same(lambda w: torch.flip(w, (0, 3)), w)
    t = to_tpu(w)
    f = torch.flip(t, (2, 3))
    f.add_(1)
    assert torch.equal(t.cpu(), w)
    x = make((2, 3, 4, 5))
    check_same(lambda x: torch.flip(x.contiguous(memory_format=torch.channels_last), (1, 3)), x)
    assert torch.flip(to_tpu(x).contiguous(memory_format=torch.channels_last), (2, 3)).is_contiguous(
        memory_format=torch.channels_last)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shifts,dims", [(1, 0), (-2, 1), (7, -1), ((1, -3), (0, 2)), (3, None), (-14, None)])
def test_roll(mode, no_fallback, dtype, shifts, dims):
    x = make((3, 4, 5), dtype)
    check_same(lambda x: torch.roll(x, shifts, dims), x)
    check_same(lambda x: x.transpose(0, 1).roll(shifts, dims), x)


def test_roll_shift_is_runtime(mode, no_fallback):
    x = to_tpu(make((6, 5)))
    torch.roll(x, 1, 0).cpu()  # compiled (in fused mode a program runs only for a value that is read)
    torch_tpu.metrics.reset()
    for s in (2, 3, -1):
        torch.testing.assert_close(torch.roll(x, s, 0).cpu(), torch.roll(x.cpu(), s, 0))
    assert torch_tpu.metrics.counters().get("compiles", 0) == 0  # a new shift reuses the program


def test_roll_grad_and_errors(mode, no_fallback):
    x = make((4, 3))
    check_same(lambda x, g: grad_of(lambda x: x.roll((1, 2), (0, 1)), x, g), x, make((4, 3), seed=1))
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        to_tpu(x).roll((1, 2), (0,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("repeats", [(2, 1), (1, 3), (2, 2, 2), (3, 1, 1, 2), (0, 2)])
def test_repeat(mode, no_fallback, dtype, repeats):
    x = make((2, 3), dtype)
    check_same(lambda x: x.repeat(*repeats), x)
    check_same(lambda x: x.t().repeat(*repeats), x)


def test_repeat_and_stack_grad(mode, no_fallback):
    x = make((2, 3))
    check_same(lambda x, g: grad_of(lambda x: x.repeat(2, 1, 2), x, g), x, make((2, 2, 6), seed=1))
    check_same(lambda x, g: grad_of(lambda x: torch.stack([x, x * 2], 1), x, g), x, make((2, 2, 3), seed=2))


def test_repeat_errors():
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be smaller"):
        to_tpu(make((2, 3))).repeat(2)


# ---- tril / triu -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [0, 1, -2, 7])
@pytest.mark.parametrize("op", ["tril", "triu"])
def test_triangle(mode, no_fallback, dtype, k, op):
    x = make((2, 4, 5), dtype)
    check_same(lambda x: getattr(torch, op)(x, k), x)
    check_same(lambda x: getattr(x.clone(), op + "_")(k), x)
    check_same(lambda x: getattr(torch, op)(x.transpose(1, 2), k, out=torch.empty(0, dtype=x.dtype, device=x.device)), x)


def test_triangle_grad_and_errors(mode, no_fallback):
    x = make((4, 4))
    check_same(lambda x, g: grad_of(lambda x: x.tril(-1), x, g), x, make((4, 4), seed=1))
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        to_tpu(make((3,))).tril()


# ---- factories ---------------------------------------------------------------------------------
@pytest.mark.parametrize("args,dtype", [
    ((5,), None), ((2, 9), None), ((10, 0, -3), None), ((0, 1, 0.1), None), ((-1.5, 2.5, 0.25), None),
    ((0, 1, 0.1), torch.float64), ((1, 10, 2), torch.int32), ((0, 5, 0.5), torch.bfloat16), ((3.7,), torch.int64),
])
def test_arange(mode, no_fallback, args, dtype):
    expected = torch.arange(*args, dtype=dtype)
    actual = torch.arange(*args, dtype=dtype, device="tpu")
    assert actual.device.type == "tpu"
    torch.testing.assert_close(actual.cpu(), expected)


def test_arange_out_and_errors(mode, no_fallback):
    out = torch.empty(0, device="tpu")
    torch.arange(1, 4, out=out)
    torch.testing.assert_close(out.cpu(), torch.arange(1.0, 4.0))
    out = torch.zeros(4, 2, device="tpu")[:, 0]  # non-contiguous out of the right size
    torch.arange(4, out=out)
    torch.testing.assert_close(out.cpu(), torch.arange(4.0))
    with pytest.warns(UserWarning, match="does not match the computed number of elements"):
        torch.arange(5, out=torch.empty(3, device="tpu"))
    for args, msg in [((0, 10, 0), "step must be nonzero"), ((0, 10, -1), "inconsistent with step sign"),
                      ((0, float("inf")), "unsupported range")]:
        with pytest.raises(RuntimeError, match=msg):
            torch.arange(*args, device="tpu")


@pytest.mark.parametrize("args,dtype", [
    ((0, 1, 5), None), ((-3, 7, 11), None), ((2, -2, 9), torch.float64), ((0, 10, 4), torch.int64),
    ((1, 0, 1), None), ((0, 1, 0), None), ((0, 1, 6), torch.bfloat16),
])
def test_linspace(mode, no_fallback, args, dtype):
    torch.testing.assert_close(torch.linspace(*args, dtype=dtype, device="tpu").cpu(), torch.linspace(*args, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_eye(mode, no_fallback, dtype):
    torch.testing.assert_close(torch.eye(4, dtype=dtype, device="tpu").cpu(), torch.eye(4, dtype=dtype))
    torch.testing.assert_close(torch.eye(2, 5, dtype=dtype, device="tpu").cpu(), torch.eye(2, 5, dtype=dtype))
    out = torch.empty(0, dtype=dtype, device="tpu")
    torch.eye(3, 2, out=out)
    torch.testing.assert_close(out.cpu(), torch.eye(3, 2, dtype=dtype))
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        torch.eye(-1, device="tpu")


def test_composite_factories_are_native(mode, no_fallback):
    for fn in [lambda d: torch.full((2, 3), 2.5, device=d), lambda d: torch.zeros(3, dtype=torch.int32, device=d),
               lambda d: torch.ones(2, 2, dtype=torch.bfloat16, device=d), lambda d: torch.scalar_tensor(4, device=d),
               lambda d: torch.full((2,), True, device=d), lambda d: torch.arange(6, device=d).view(2, 3).to(torch.float64)]:
        torch.testing.assert_close(fn("tpu").cpu(), fn("cpu"))


def test_empty_views_whose_strides_reach_past_their_storage(mode, no_fallback):
    """A view of no elements may have an offset and strides that reach past its (empty) storage,
    as OpInfo's noncontiguous samples of [0, 3, 3] do (storage 0 bytes, offset 1, strides
    (18, 6, 2)): reading it reads nothing and writing it writes nothing, on every backend (on
    pjrt, whose programs read views out of the flat storage, it failed while building the IR)."""
    base = torch.empty(0, 3, 6)
    x = torch.as_strided(base, (0, 3, 3), (18, 6, 2), 1)
    xt = torch.as_strided(base.to("tpu"), (0, 3, 3), (18, 6, 2), 1)
    got = F.pad(xt, (1, 1, 1, 1, 1, 1), value=1.0)
    assert torch.equal(got.cpu(), F.pad(x, (1, 1, 1, 1, 1, 1), value=1.0))
    assert torch.equal((xt + 1).cpu(), x + 1)
    xt.fill_(2.0)
    assert xt.shape == (0, 3, 3) and xt.cpu().numel() == 0
