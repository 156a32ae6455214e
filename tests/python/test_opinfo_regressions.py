"""Bugs the OpInfo walk (tests/python/opinfo) found in native lowerings, each against CPU."""
import pytest
import torch

from conftest import check_same, to_tpu


def check_same_error(fn, *args):
    """fn raises on CPU; on the device it raises the same exception type and message."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(type(cpu.value)) as dev:
        fn(*to_tpu(args))
    assert str(dev.value).splitlines()[0] == str(cpu.value).splitlines()[0]


BOOLS = (torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False]))


# add(bool, bool, alpha=False) is self || (alpha && other): it was self || other.
@pytest.mark.parametrize("alpha", [False, True, 0, 2])
def test_add_bool_alpha(mode, no_fallback, alpha):
    check_same(lambda a, b: torch.add(a, b, alpha=alpha), *BOOLS)
    check_same(lambda a, b: a.clone().add_(b, alpha=alpha), *BOOLS)
    check_same(lambda a, b: torch.add(a, b, alpha=alpha, out=torch.empty_like(a)), *BOOLS)


# ATen's alpha_check: a bool alpha needs a bool result, an integral result an integral alpha
# (2.5 was silently truncated).
@pytest.mark.parametrize("fn", [
    lambda a, b: torch.add(a.long(), b.long(), alpha=True),
    lambda a, b: torch.add(a.long(), b.long(), alpha=2.5),
    lambda a, b: torch.sub(a.float(), b.float(), alpha=True),
    lambda a, b: torch.rsub(a.long(), b.long(), alpha=0.5),
    lambda a, b: a.long().add_(b.long(), alpha=1.5),
])
def test_add_sub_alpha_check(fn):
    check_same_error(fn, *BOOLS)


def test_add_alpha_still_allowed(mode, no_fallback):
    a, b = (t.long() for t in BOOLS)
    check_same(lambda x, y: torch.add(x, y, alpha=3), a, b)
    check_same(lambda x, y: torch.add(x.float(), y, alpha=2.5), a, b)
    check_same(lambda x, y: torch.sub(x, y.float(), alpha=-2), a, b)


# logit of an integer/bool tensor computes (and clamps to eps) in float: eps was cast to int64
# (0) and bool was refused.
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
@pytest.mark.parametrize("eps", [None, 0.2])
def test_logit_integer_and_bool(mode, no_fallback, dtype, eps):
    x = torch.tensor([[0, 1, 2], [-1, 3, 0]]).clamp(min=0 if dtype in (torch.uint8, torch.bool) else -1)
    check_same(lambda t: torch.logit(t, eps), x.to(dtype))


# native_dropout_backward(grad, mask, scale): grad * mask * scale promotes an integer/bool grad
# to the default float dtype (it kept int64/bool).
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float32, torch.bfloat16])
def test_native_dropout_backward_dtype(mode, no_fallback, dtype):
    g = torch.arange(12).reshape(3, 4).to(dtype)
    m = torch.arange(12).reshape(3, 4) % 3 != 0
    check_same(lambda a, b: torch.ops.aten.native_dropout_backward(a, b, 2.0), g, m)
    check_same(lambda a, b: torch.ops.aten.native_dropout_backward(a, b, 0.0), g, m)


# ATen refuses an out= that writes one element twice or overlaps an input (index_select wrote
# through the expanded out; bernoulli too); roll along dim 0 of a 0-dim tensor raises.
def test_index_select_out_overlap():
    x = torch.arange(18.0).reshape(3, 6)
    idx = torch.tensor([0, 2])
    check_same_error(lambda s, i: torch.index_select(s, 1, i, out=torch.empty(6, device=s.device).expand(3, 2)),
                     x, idx)
    check_same_error(lambda s, i: torch.index_select(s, 0, i[:1], out=s[:1]), x, idx)


def test_index_select_out_still_works(mode, no_fallback):
    x = torch.arange(18.0).reshape(3, 6)
    idx = torch.tensor([0, 2])
    check_same(lambda s, i: torch.index_select(s, 1, i, out=torch.empty(3, 2, device=s.device)), x, idx)


@pytest.mark.parametrize("fn", [
    lambda p: torch.bernoulli(p, out=torch.empty(1, device=p.device).expand(6)),
    lambda p: torch.empty(1, device=p.device).expand(6).bernoulli_(0.5),
    lambda p: torch.empty(1, device=p.device).expand(6).bernoulli_(p),
])
def test_bernoulli_internal_overlap(fn):
    check_same_error(fn, torch.full((6,), 0.5))


def test_roll_0dim(mode, no_fallback):
    check_same_error(lambda t: torch.roll(t, 0, 0), torch.tensor(3.0))
    check_same(lambda t: torch.roll(t, 1), torch.tensor(3.0))
    check_same(lambda t: torch.roll(t, 1, 0), torch.zeros(0))


# arange's size and checks are ATen's: a fractional step that truncates to 0 for an int64
# result is a ValueError (it was a RuntimeError), the bounds are checked in double.
@pytest.mark.parametrize("fn", [
    lambda d: torch.arange(0, 64, 0.5, dtype=torch.int64, device=d),
    lambda d: torch.arange(0, 64, 0.5, out=torch.empty(0, dtype=torch.int64, device=d)),
    lambda d: torch.arange(0, 10, 0, device=d),
    lambda d: torch.arange(0, float("inf"), 1, device=d),
    lambda d: torch.arange(10, 0, 1, device=d),
])
def test_arange_errors(fn):
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value), match=str(cpu.value).splitlines()[0]):
        fn("tpu")


@pytest.mark.parametrize("args", [(0, 10, 3), (0.5, 10.25, 0.5), (10, -3, -2.5), (-1, 1, 0.1), (0, 2**40, 2**37)])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.bfloat16])
def test_arange_sizes(mode, no_fallback, args, dtype):
    if dtype == torch.bfloat16 and args[1] > 1000:
        pytest.skip("bfloat16 cannot hold 2**40 exactly")
    try:
        expected = torch.arange(*args, dtype=dtype)
    except ValueError as e:  # a fractional step truncated to 0 for int64
        with pytest.raises(ValueError, match=str(e)):
            torch.arange(*args, dtype=dtype, device="tpu")
        return
    actual = torch.arange(*args, dtype=dtype, device="tpu").cpu()
    torch.testing.assert_close(actual, expected)


# group_norm: ATen's decomposition (what ran before the native lowering) rounded every step to
# bfloat16, several ulps off CPU; native_group_norm with 0 groups divided by zero (SIGFPE).
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape, groups", [((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((2, 8), 4), ((1, 6, 3), 2)])
def test_group_norm(mode, no_fallback, dtype, shape, groups):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype)
    w = torch.randn(shape[1], generator=g).to(dtype)
    b = torch.randn(shape[1], generator=g).to(dtype)
    check_same(lambda t, w_, b_: torch.nn.functional.group_norm(t, groups, w_, b_, eps=1e-5), x, w, b)
    check_same(lambda t: torch.nn.functional.group_norm(t, groups), x)
    c = shape[1]
    check_same(lambda t, w_, b_: torch.native_group_norm(t, w_, b_, shape[0], c, x.numel() // (shape[0] * c),
                                                          groups, 0.5), x, w, b)


def test_group_norm_mixed_dtype_and_strided(mode, no_fallback):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 6, 5, generator=g).to(torch.bfloat16)
    w, b = torch.randn(6, generator=g), torch.randn(6, generator=g)  # float32 parameters
    check_same(lambda t, w_, b_: torch.native_group_norm(t, w_, b_, 4, 6, 5, 3, 1e-5), x, w, b)
    xt = torch.randn(5, 6, 4, generator=g).transpose(0, 2)
    check_same(lambda t: torch.nn.functional.group_norm(t, 2), xt)


def test_group_norm_backward(mode, no_fallback):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 6, 4, generator=g)
    w, b = torch.randn(6, generator=g), torch.randn(6, generator=g)
    gy = torch.randn(3, 6, 4, generator=g)

    def grads(x, w, b, gy):
        x, w, b = (t.clone().requires_grad_() for t in (x, w, b))
        torch.nn.functional.group_norm(x, 3, w, b).backward(gy)
        return x.grad, w.grad, b.grad

    check_same(grads, x, w, b, gy)


def test_group_norm_errors():
    x = torch.randn(2, 6, 3)
    check_same_error(lambda t: torch.nn.functional.group_norm(t, 4), x)
    check_same_error(lambda t, w: torch.nn.functional.group_norm(t, 3, w), x, torch.ones(5))
    check_same_error(lambda t: torch.native_group_norm(t, None, None, 2, 6, 3, 0, 1e-5), x)


def test_group_norm_empty(mode, no_fallback):
    check_same(lambda t: torch.native_group_norm(t, None, None, 2, 4, 0, 2, 1e-5), torch.randn(2, 4, 0))
    check_same(lambda t: torch.native_group_norm(t, None, None, 0, 4, 3, 2, 1e-5), torch.randn(0, 4, 3))


# An index out of range found while running: gather/scatter raise RuntimeError as on CPU (they
# raised IndexError); advanced indexing and index_select along dim 0 keep IndexError. Strict mode
# raises at the next sync.
@pytest.mark.parametrize("fn", [
    lambda x, i: torch.gather(x, 1, i),
    lambda x, i: torch.scatter(x, 1, i, 1.0),
    lambda x, i: torch.scatter_add(x, 1, i, x),
    lambda x, i: torch.scatter_reduce(x, 1, i, x, "amax"),
    lambda x, i: x[i],
    lambda x, i: torch.index_select(x.T, 0, i[0]),
])
def test_index_out_of_range_exception_type(mode, fn):
    x = torch.arange(6.0).reshape(2, 3)
    i = torch.tensor([[0, 7, 1], [2, 1, 0]])
    with pytest.raises(Exception) as cpu:
        fn(x, i)
    with pytest.raises(type(cpu.value)):
        fn(*to_tpu((x, i))).cpu()
