"""Eager execution modes.

* ``strict`` (default): each op is lowered, compiled (cached) and queued; the call returns at once
  and the device runs ops in order. Errors that depend on data (an index out of range) are raised
  at the next sync point (``.item()``, ``.cpu()``, ``print``, ``torch.tpu.synchronize()``), naming
  the op and the source line that issued it.
* ``debug``: each op runs synchronously and raises at the line that caused it; with
  ``TORCH_TPU_CHECK_NAN=1`` (or ``set_check_nan(True)``) the first op producing NaN/Inf raises.
* ``fused``: ops are deferred into a window per device that compiles as one program and runs when
  a value is needed: a host read (``.item()``, ``.cpu()``, ``print``; of any value of the device,
  as strict mode's read waits for everything queued before it), a
  ``synchronize()``, a CPU-fallback op, the window's size limit (option ``window_ops``) or a
  mode change -- and at the start and the end of every ``optimizer.step()`` (Note [Step windows]).
  Shape/dtype/device mistakes still raise at the user's line; a data-dependent error raises at
  the next sync point naming the op and its line.

Note [Step windows]: a training loop that reads nothing on the host each step (it logs every
N steps) would otherwise record windows that run past step boundaries and are cut only at the size
limit, at a different point of the step each time: each such window is a new program, compiled
again and again. An optimizer step post-hook (registered for every optimizer when torch_tpu is
imported) cuts the windows when step() returns, so each training step has the same windows, with
the same fingerprints, every step. A pre-hook cuts them when step() is called as well: the
forward and backward then run as one program while Python records the optimizer's update (a third
of a step's recording time for AdamW over GPT's parameters or SGD over ResNet-18's: 1.1-1.3 ms of
3.4-4.0), which runs as a second program. The forward's activations still live and die inside the
first program (Note [Rematerialization] keeps working: the small GPT's fused peak stays 2.60 MB),
as they would not if the cut fell between forward and backward (Note [Backward windows]). Both
hooks do nothing outside fused mode or while Dynamo traces (torch.compile'd optimizer steps stay
one graph).
"""
from __future__ import annotations

import contextlib

import torch

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


def _step_cut(reason: str):
    """An optimizer step hook that cuts the windows with `reason` (Note [Step windows])."""
    def hook(optimizer, args, kwargs) -> None:
        if torch.compiler.is_compiling() or _C.get_option("eager_mode") != "fused":
            return
        _C._cut_windows(reason)
    return hook


_step_hooks = None


def register_step_hook() -> None:
    """Registers the optimizer step hooks of Note [Step windows] (once)."""
    global _step_hooks
    if _step_hooks is None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        _step_hooks = (register_optimizer_step_pre_hook(_step_cut("optimizer_begin")),
                       register_optimizer_step_post_hook(_step_cut("optimizer_step")))


def set_check_nan(enabled: bool) -> None:
    _C.set_option("check_nan", "1" if enabled else "0")
