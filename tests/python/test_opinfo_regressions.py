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
