"""Data-dependent errors PyTorch's CPU kernels raise, raised by the device program's check op (Note
[Check op] in csrc/ir/graph.h): integer division by a device tensor holding a zero, binary
cross-entropy with an input or target outside [0, 1], bernoulli with a probability outside [0, 1].
Each raises PyTorch's CPU message naming the op and the user's line (at the op in debug mode, at
the sync point otherwise); valid data gives CPU's results; the device stays usable."""
from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F

from conftest import check_same


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


def cpu_message(fn, *args) -> str:
    with pytest.raises(RuntimeError) as e:
        fn(*args)
    return str(e.value).split("\n")[0]


def device_still_works():
    a = torch.arange(6.0).to("tpu")
    assert ((a * 2 + 1).cpu() == torch.arange(6.0) * 2 + 1).all()
    torch.tpu.synchronize()  # nothing stale left on the queue


INT_DIV = {
    "floor_divide": lambda a, b: a // b,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "remainder": lambda a, b: a % b,
    "fmod": lambda a, b: torch.fmod(a, b),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("name", sorted(INT_DIV))
def test_integer_division_by_a_zero_in_a_device_tensor(mode, no_fallback, name, dtype):
    fn = INT_DIV[name]
    a, b = torch.tensor([5, 6, 7], dtype=dtype), torch.tensor([2, 0, 3], dtype=dtype)
    expected = cpu_message(fn, a, b)
    assert "ZeroDivisionError" in expected
    line = fn.__code__.co_firstlineno  # the user's line: the lambda's
    with pytest.raises(RuntimeError) as e:
        fn(a.to("tpu"), b.to("tpu")).cpu()
    msg = str(e.value)
    assert "ZeroDivisionError" in msg and f"{__file__}:{line}" in msg, msg
    device_still_works()
    check_same(fn, a, torch.tensor([2, 1, 3], dtype=dtype))  # no zero: CPU's values


@pytest.mark.parametrize("name", sorted(INT_DIV))
def test_float_division_by_a_zero_tensor_is_not_an_error(mode, no_fallback, name):
    check_same(INT_DIV[name], torch.tensor([5.0, -6.0, 0.0]), torch.tensor([0.0, 2.0, 0.0]))


def test_in_place_division_keeps_the_target_on_error(mode, no_fallback):
    """x //= y with a zero: raises, and x keeps its value (the update does not run on garbage)."""
    x = torch.tensor([8, 9, 10], device="tpu")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        x.floor_divide_(torch.tensor([2, 0, 5], device="tpu"))
        x.cpu()
    assert torch.equal(x.cpu(), torch.tensor([8, 9, 10]))
    device_still_works()


def test_only_what_depends_on_the_check_fails(no_fallback):
    """Strict mode: a failed division fails its result only; an unrelated op issued after it runs
    and keeps its value. The thread's next sync point reports the error, once (Note [Task
    errors]); reading the division's result afterwards says it has no value."""
    import torch_tpu

    with torch_tpu.eager_mode("strict"):
        q = torch.tensor([4, 5], device="tpu") // torch.tensor([0, 1], device="tpu")
        other = torch.arange(3, device="tpu") * 2
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            torch.tpu.synchronize()
        assert torch.equal(other.cpu(), torch.tensor([0, 2, 4]))
        with pytest.raises(RuntimeError, match="has no value.*ZeroDivisionError"):
            q.cpu()
    device_still_works()


BCE_BAD = {
    "input_above_1": (torch.tensor([0.5, 1.5, 0.2]), torch.tensor([1.0, 0.0, 1.0])),
    "input_below_0": (torch.tensor([0.5, -0.2, 0.2]), torch.tensor([1.0, 0.0, 1.0])),
    "input_nan": (torch.tensor([0.5, float("nan"), 0.2]), torch.tensor([1.0, 0.0, 1.0])),
    "target_above_1": (torch.tensor([0.5, 0.5, 0.2]), torch.tensor([1.0, 2.0, 1.0])),
}


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("case", sorted(BCE_BAD))
def test_binary_cross_entropy_out_of_range_raises(mode, no_fallback, case, reduction):
    p, t = BCE_BAD[case]
    fn = lambda p, t: F.binary_cross_entropy(p, t, reduction=reduction)  # noqa: E731
    expected = cpu_message(fn, p, t)
    assert "should be between 0 and 1" in expected
    line = fn.__code__.co_firstlineno
    with pytest.raises(RuntimeError) as e:
        fn(p.to("tpu"), t.to("tpu")).cpu()
    msg = str(e.value)
    assert expected in msg and "aten::binary_cross_entropy" in msg and f"{__file__}:{line}" in msg, msg
    device_still_works()


def test_binary_cross_entropy_in_range_matches_cpu(mode, no_fallback):
    p, t = torch.tensor([0.0, 1.0, 0.3, 0.9]), torch.tensor([0.0, 1.0, 0.5, 0.2])
    check_same(lambda p, t: F.binary_cross_entropy(p, t), p, t)


@pytest.mark.parametrize("p", [[0.5, 1.5], [-0.1, 0.5], [float("nan"), 0.5]], ids=["above", "below", "nan"])
def test_bernoulli_probability_out_of_range_raises(mode, no_fallback, p):
    probs = torch.tensor(p)
    expected = cpu_message(torch.bernoulli, probs)
    assert "p_in >= 0 && p_in <= 1" in expected
    line = this_line() + 2
    with pytest.raises(RuntimeError) as e:
        torch.bernoulli(probs.to("tpu")).cpu()
    msg = str(e.value)
    assert "p_in >= 0 && p_in <= 1" in msg and f"{__file__}:{line}" in msg, msg
    device_still_works()


def test_bernoulli_probability_in_range_runs(mode, no_fallback):
    x = torch.bernoulli(torch.tensor([0.0, 1.0, 0.0, 1.0], device="tpu")).cpu()
    assert torch.equal(x, torch.tensor([0.0, 1.0, 0.0, 1.0]))
