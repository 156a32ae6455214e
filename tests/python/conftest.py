"""Shared test helpers: run the same function on CPU and on the tpu device and compare.

Tolerances: float32 results of the host executor differ from PyTorch's CPU kernels only by
summation order and vectorized math (1-2 ulp), so float32 comparisons use rtol=1.3e-6/atol=1e-5
(torch.testing defaults) unless a test states a reason for more. bfloat16 uses its defaults
(rtol=1.6e-2, atol=1e-5).
"""
from __future__ import annotations

import contextlib
import os

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import pytest
import torch

import torch_tpu


@contextlib.contextmanager
def restored_option(name):
    """Yields a setter for the torch_tpu option `name`; its value is restored afterwards."""
    previous = torch_tpu.config.get(name)
    try:
        yield lambda value: torch_tpu.config.set(name, value)
    finally:
        torch_tpu.config.set(name, previous)


_MODES = ("strict", "debug", "fused")


def _test_modes():
    """The eager modes the `mode` fixture runs: all three, or those named in TORCH_TPU_TEST_MODES
    (comma-separated, e.g. "strict" for CI's pass on the pjrt backend)."""
    text = os.environ.get("TORCH_TPU_TEST_MODES", "").strip()
    if not text:
        return list(_MODES)
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in _MODES]
    if unknown or not modes:
        raise pytest.UsageError(
            f"TORCH_TPU_TEST_MODES={text!r}: unknown mode(s) {unknown}; choose from {list(_MODES)}")
    return modes


@pytest.fixture(params=_test_modes())
def mode(request):
    """Runs a test in each eager mode (fused: the test's ops are deferred into windows, cut when the
    test reads a result); TORCH_TPU_TEST_MODES limits the modes.

    Test tensors are small, and a small program submitted to an idle queue runs on the calling
    thread (option inline_work). So that the suite also exercises the queue worker -- programs
    running asynchronously on another thread, errors crossing threads -- strict mode runs here
    with inline execution off; debug mode keeps the default. tests/python/test_queue.py checks
    the two paths against each other.
    """
    with restored_option("inline_work") as set_inline_work:
        if request.param == "strict":
            set_inline_work(0)
        with torch_tpu.eager_mode(request.param):
            yield request.param


@pytest.fixture
def no_fallback():
    """Fails the test if any op ran through the CPU fallback."""
    torch_tpu.metrics.reset()
    yield
    fb = torch_tpu.metrics.fallback_ops()
    assert not fb, f"ops fell back to the CPU: {fb}"


def to_tpu(x):
    if isinstance(x, torch.Tensor):
        return x.to("tpu")
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_tpu(v) for k, v in x.items()}
    return x


def to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    return x


def check_same(fn, *args, rtol=None, atol=None, check_dtype=True, **kwargs):
    """fn(*args) on CPU vs fn(*args moved to tpu): values, dtypes and shapes must match."""
    expected = fn(*args, **kwargs)
    actual = fn(*to_tpu(args), **to_tpu(kwargs))
    _assert_tree_close(to_cpu(actual), expected, rtol, atol, check_dtype)
    return actual


def _assert_tree_close(actual, expected, rtol, atol, check_dtype):
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual)}"
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, check_dtype=check_dtype,
                                   equal_nan=True)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_tree_close(a, e, rtol, atol, check_dtype)
    else:
        assert actual == expected, f"{actual!r} != {expected!r}"


def autocast_bf16_losses(model, x, y, steps=3, lr=3e-3):
    """Trains a (logits, loss) = model(x, y) language model for `steps` AdamW steps under
    torch.autocast("tpu") and returns the losses; the logits must come out in bfloat16."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    x, y = x.to("tpu"), y.to("tpu")
    losses = []
    for _ in range(steps):
        with torch.autocast("tpu"):
            logits, loss = model(x, y)
        assert logits.dtype == torch.bfloat16
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
