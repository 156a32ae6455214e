"""Eager execution modes.

* ``strict`` (default): each op is lowered, compiled (cached) and queued; the call returns at once
  and the device runs ops in order. Errors that depend on data (an index out of range) are raised
  at the next sync point (``.item()``, ``.cpu()``, ``print``, ``torch.tpu.synchronize()``), naming
  the op and the source line that issued it.
* ``debug``: each op runs synchronously and raises at the line that caused it; with
  ``TORCH_TPU_CHECK_NAN=1`` (or ``set_check_nan(True)``) the first op producing NaN/Inf raises.
* ``fused``: ops are deferred into a window per device that compiles as one program and runs when
  a value is needed: a host read of pending data (``.item()``, ``.cpu()``, ``print``), a
  ``synchronize()``, a CPU-fallback op, the window's size limit (option ``window_ops``) or a
  mode change. Shape/dtype/device mistakes still raise at the user's line; a data-dependent error
  raises at the next sync point naming the op and its line.
"""
from __future__ import annotations

import contextlib

from . import _C
from . import config

_MODES = config.choices("eager_mode")  # the option registry's list (csrc/base/options.def)


def set_eager_mode(mode: str) -> None:
    """Switches mode after the queued work has run; a pending device error from that work is
    raised, but the new mode is in force either way."""
    if mode not in _MODES:
        raise ValueError(f"unknown eager mode {mode!r}; expected one of {_MODES}")
    try:
        _C._cut_windows("mode_change")  # what fused mode recorded runs now, under its own mode
        _C.synchronize(-1)
    finally:
        _C.set_option("eager_mode", mode)


def get_eager_mode() -> str:
    return _C.get_option("eager_mode")


@contextlib.contextmanager
def eager_mode(mode: str):
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def set_check_nan(enabled: bool) -> None:
    _C.set_option("check_nan", "1" if enabled else "0")
