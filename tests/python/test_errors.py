"""User mistakes become Python exceptions with PyTorch's messages at the user's line, in both eager
modes, and the device stays usable afterwards: shape mismatches, mixed devices, integer division by
zero, out of memory, data-dependent device errors and debug mode's NaN checks."""
from __future__ import annotations

import contextlib
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_tpu
from conftest import check_same

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


def raised_at(excinfo) -> int:
    """Line of this file where the exception surfaced (the innermost frame in this file)."""
    tb, line = excinfo.tb, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == __file__:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def device_still_works():
    a = torch.arange(6.0).to("tpu")
    assert ((a * 2 + 1).cpu() == torch.arange(6.0) * 2 + 1).all()
    torch.tpu.synchronize()  # no stale error left on the queue


def cpu_error(fn, *args):
    with pytest.raises(Exception) as e:
        fn(*args)
    return e


# ---- shapes, devices, dtypes ------------------------------------------------------------------
def test_shape_mismatch(mode):
    x, y = torch.ones(2, 3), torch.ones(4)
    expected = cpu_error(lambda: x + y)
    dx, dy = x.to("tpu"), y.to("tpu")
    with pytest.raises(RuntimeError) as e:
        line = this_line() + 1
        dx + dy
    assert str(e.value) == str(expected.value)
    assert "must match the size of tensor b (4) at non-singleton dimension 1" in str(e.value)
    assert raised_at(e) == line
    device_still_works()


def test_shape_mismatch_inplace_broadcast(mode):
    expected = cpu_error(lambda: torch.ones(3).add_(torch.ones(2, 3)))
    with pytest.raises(RuntimeError) as e:
        torch.ones(3, device="tpu").add_(torch.ones(2, 3, device="tpu"))
    assert type(e.value) is type(expected.value)
    assert "doesn't match the broadcast shape" in str(e.value)
    device_still_works()


@pytest.mark.parametrize("order", ["tpu_first", "cpu_first"])
def test_mixed_devices(mode, order):
    t, c = torch.ones(2, 3, device="tpu"), torch.ones(2, 3)
    a, b = (t, c) if order == "tpu_first" else (c, t)
    with pytest.raises(RuntimeError, match="same device") as e:
        a + b
    msg = str(e.value)
    assert "tpu" in msg and "cpu" in msg
    with pytest.raises(RuntimeError, match="same device"):
        torch.mul(t, c, out=torch.empty(2, 3, device="tpu"))
    device_still_works()


def test_cpu_scalar_tensor_mixes_like_cpu(mode, no_fallback):
    for s in (torch.tensor(2.5), torch.tensor(3), torch.tensor(-2, dtype=torch.int8)):
        check_same(lambda a: (a + s, s * a, a - s, a / s, torch.where(a > 0, s, a)), torch.randn(2, 3))
        check_same(lambda a: (a * s, a // s, s - a), torch.arange(6).reshape(2, 3))
    check_same(lambda a: (a + torch.tensor(True), a * torch.tensor(False)), torch.randn(3))
    check_same(lambda a: a.clone().mul_(torch.tensor(-1.5)), torch.randn(4))


@pytest.mark.parametrize("dst,src", [((4,), (3,)), ((3,), (2, 3)), ((2, 3), (3, 2))])
def test_copy_shape_mismatch(mode, dst, src):
    for src_dev in ("cpu", "tpu"):
        expected = cpu_error(lambda: torch.zeros(dst).copy_(torch.ones(src)))
        with pytest.raises(RuntimeError) as e:
            torch.zeros(dst, device="tpu").copy_(torch.ones(src, device=src_dev))
        assert str(e.value) == str(expected.value)
    device_still_works()


def test_unsupported_dtype():
    # complex64/complex128 are stored (test_complex.py); complex32 and float8 are not
    with pytest.raises(NotImplementedError, match="ComplexHalf is not supported on the tpu device"):
        torch.ones(2).to(torch.complex32).to("tpu")
    with pytest.raises(NotImplementedError, match="Float8_e4m3fn is not supported on the tpu device"):
        torch.ones(2).to(torch.float8_e4m3fn).to("tpu")
    device_still_works()


def test_promoted_result_cant_cast_to_out(mode):
    expected = cpu_error(lambda: torch.ones(2, dtype=torch.long).add_(1.5))
    with pytest.raises(RuntimeError) as e:
        torch.ones(2, dtype=torch.long, device="tpu").add_(1.5)
    assert str(e.value) == str(expected.value)


# ---- integer division by zero ------------------------------------------------------------------
INT_DIV_BY_ZERO = {
    "floor_divide": lambda a: a // 0,
    "div_floor": lambda a: torch.div(a, 0, rounding_mode="floor"),
    "div_trunc": lambda a: torch.div(a, 0, rounding_mode="trunc"),
    "remainder": lambda a: a % 0,
    "remainder_": lambda a: a.remainder_(0),
    "fmod": lambda a: torch.fmod(a, 0),
    "cpu_tensor_divisor": lambda a: a // torch.tensor(0),
}


@pytest.mark.parametrize("name", sorted(INT_DIV_BY_ZERO))
def test_integer_division_by_zero_scalar(mode, name):
    fn = INT_DIV_BY_ZERO[name]
    expected = cpu_error(fn, torch.tensor([5, -6]))
    with pytest.raises(type(expected.value), match=str(expected.value)):
        fn(torch.tensor([5, -6], device="tpu"))
    device_still_works()


@pytest.mark.parametrize("name", ["floor_divide", "div_floor", "div_trunc", "remainder", "fmod"])
def test_float_division_by_int_zero_is_not_an_error(mode, name):
    # The promoted type is float: inf/nan as on CPU, not ZeroDivisionError.
    check_same(INT_DIV_BY_ZERO[name], torch.tensor([5.0, -6.0, 0.0]))


# A zero inside a device divisor tensor: tests/python/test_check_op.py.


# ---- out of memory -------------------------------------------------------------------------------
def test_out_of_memory(mode):
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    capacity = torch.tpu.get_device_properties().total_memory
    keep = torch.ones(MiB, device="tpu")  # 4 MiB in use
    torch.tpu.synchronize()  # (fused mode gives it memory when its window runs)
    huge = capacity + 64 * MiB
    with pytest.raises(torch.OutOfMemoryError) as e:
        torch.empty(huge, dtype=torch.uint8, device="tpu")
    msg = str(e.value)
    assert isinstance(e.value, RuntimeError)
    assert "tpu:0 out of memory" in msg
    assert f"tried to allocate {huge / MiB:.2f} MiB" in msg
    in_use = float(msg.split("MiB; ")[1].split(" MiB in use")[0])
    assert in_use >= 4.0
    assert f"of {capacity / MiB:.2f} MiB device capacity" in msg
    assert torch.tpu.memory_stats()["num_ooms"] >= 1
    del keep
    torch.tpu.synchronize()  # queued work holds its buffers until it has run
    assert torch.tpu.memory_allocated() == before
    device_still_works()


def test_out_of_memory_from_an_op(mode):
    capacity = torch.tpu.get_device_properties().total_memory
    n = capacity // 4 // 2 + MiB  # two of these cannot fit
    x = torch.empty(n, device="tpu")
    y = None
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        y = x + 1
        # Fused mode gives a value memory when its window runs (here: at the sync point, or at
        # the op where the op alone reaches the window's work limit), and only if it is still
        # alive; strict and debug mode at the op.
        torch.tpu.synchronize()
    # Where the window kept the op, its result no longer needs memory once it is dropped.
    del x, y
    device_still_works()


# ---- data-dependent device errors --------------------------------------------------------------
def _index_select_out_of_range():
    x = torch.tensor([1.0, 2.0], device="tpu")
    idx = torch.tensor([5], device="tpu")
    torch_tpu.metrics.reset()
    line = this_line() + 1
    return x.index_select(0, idx), line


def test_device_error_strict_raises_at_sync(no_fallback):
    with torch_tpu.eager_mode("strict"):
        y, line = _index_select_out_of_range()  # queued: the op itself returns
        with pytest.raises(IndexError) as e:
            y.cpu()  # the sync point
        msg = str(e.value)
        assert "aten::index_select" in msg
        assert f"{__file__}:{line}" in msg, msg
        device_still_works()


def test_user_line_found_in_a_script_under_a_torch_directory(tmp_path):
    # Frames are PyTorch's by where torch really lives, not because their path contains /torch/.
    script = tmp_path / "work" / "torch" / "train.py"
    script.parent.mkdir(parents=True)
    script.write_text(textwrap.dedent("""
        import torch, torch_tpu
        x = torch.tensor([1.0, 2.0], device="tpu")
        y = x.index_select(0, torch.tensor([5], device="tpu"))
        try:
            y.cpu()
        except IndexError as e:
            print(e)
    """))
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{script}:4" in r.stdout, r.stdout


def test_user_line_skips_standard_library_frames(no_fallback):
    # The op is issued by contextlib's code (an ExitStack callback): the user's line is the `with`.
    x = torch.tensor([1.0, 2.0], device="tpu")
    out = []
    with torch_tpu.eager_mode("strict"):
        line = this_line() + 1
        with contextlib.ExitStack() as stack:
            stack.callback(lambda: None)
            stack.callback(torch.index_select, x, 0, torch.tensor([7], device="tpu"), out=torch.empty(1, device="tpu"))
            out.append(stack)
        with pytest.raises(IndexError) as e:
            torch.tpu.synchronize()
    msg = str(e.value)
    assert "contextlib.py" not in msg, msg
    assert f"{__file__}:{line}" in msg, msg
    device_still_works()


def test_device_error_debug_raises_at_op(no_fallback):
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(IndexError) as e:
            _index_select_out_of_range()
        assert "aten::index_select" in str(e.value)
        device_still_works()


def test_device_error_raised_once_only(no_fallback):
    with torch_tpu.eager_mode("strict"):
        _index_select_out_of_range()
        with pytest.raises(IndexError):
            torch.tpu.synchronize()
        torch.tpu.synchronize()  # reported once, then the queue is clean
        device_still_works()


# ---- debug mode: NaN/Inf checks ----------------------------------------------------------------
@pytest.fixture
def check_nan():
    torch_tpu.set_check_nan(True)
    try:
        yield
    finally:
        torch_tpu.set_check_nan(False)


def test_check_nan_debug_raises_naming_op(check_nan):
    with torch_tpu.eager_mode("debug"):
        x = torch.tensor([0.0, 1.0], device="tpu")
        with pytest.raises(RuntimeError, match=r"aten::div produced NaN or Inf") as e:
            line = this_line() + 1
            x / 0.0
        assert raised_at(e) == line
        with pytest.raises(RuntimeError, match=r"aten::mul produced NaN or Inf"):
            torch.tensor([3e38], device="tpu") * 10.0
        assert torch.equal((x + 1).cpu(), torch.tensor([1.0, 2.0]))  # finite: no error
        assert torch.equal((torch.tensor([1, 2], device="tpu") // 1).cpu(), torch.tensor([1, 2]))
        device_still_works()


def test_check_nan_off_or_strict_does_not_raise(check_nan):
    with torch_tpu.eager_mode("strict"):  # NaN checks are a debug-mode feature
        assert torch.isnan((torch.tensor([0.0], device="tpu") / 0.0).cpu()).all()
    torch_tpu.set_check_nan(False)
    with torch_tpu.eager_mode("debug"):
        assert torch.isnan((torch.tensor([0.0], device="tpu") / 0.0).cpu()).all()
