"""One compiled graph: the functionalized ATen FX graph AOTAutograd hands the tpu backend (a
forward, a backward or an inference graph), captured as one program on the first call and replayed
on every later call (Note [Capture] in csrc/torch/deferred/capture.h).

A call whose arguments differ from every capture's (a size, a stride, a dtype, a Python value the
program depends on) captures again: that is a recompile, counted with its reason
(torch_tpu.compile.recompiles()). A graph that cannot be one program (it reads a device value on
the host, uses an op that runs on the CPU fallback, ...) runs as eager ops in fused mode from then
on, with one warning naming the reason (or an error with options={"fallback": "error"}).
"""
from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Any, Callable, List, Optional

import torch

from .. import _C, _compat
from . import _bounded, _state


def _device_of(args) -> int:
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "tpu":
            return a.device.index or 0
    return _C.current_device()


@contextlib.contextmanager
def _fused_ops():
    """Runs the block's ops in fused eager mode without the sync set_eager_mode() makes: what the
    block records is cut (run) at its end, as a mode change would."""
    previous = _C.get_option("eager_mode")
    if previous == "fused":
        yield
        return
    _C._cut_windows("mode_change")
    _C.set_option("eager_mode", "fused")
    try:
        yield
    finally:
        _C.set_option("eager_mode", previous)
        _C._cut_windows("mode_change")


class CompiledGraph:
    """A boxed callable (AOTAutograd passes the arguments as one list)."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str, name: str, fallback: str = "warn",
                 saved_from: Optional[int] = None):
        # An instance attribute: Dynamo's disable() wrapper of the backward copies __dict__.
        self._boxed_call = True
        self.gm = gm
        self.kind = kind          # "forward", "backward" or "inference"
        self.name = name          # "forward graph 3"
        self.fallback = fallback  # "warn" or "error"
        self.saved_from = saved_from  # a forward's first output saved for its backward
        self.programs: List[Any] = []   # _C._CapturedGraph, most recently used first
        self.eager_reason: Optional[str] = None
        self._lock = threading.Lock()
        # Note [Bounded dims] (_bounded.py): a graph whose sizes all have upper bounds runs padded.
        self.bounded: Optional[_bounded.Plan] = None
        self._plan_bounded()

    def _plan_bounded(self) -> None:
        try:
            self.bounded = _bounded.Plan(self.gm, self.name, self.saved_from)
            _state.note_padded(self)
        except _bounded.NotBounded:
            pass  # static sizes, or sizes without an upper bound: a program per size
        except _bounded.Unsupported as e:
            self._unpadded(str(e), stacklevel=5)

    def _unpadded(self, why: str, stacklevel: int) -> None:
        self.bounded = None
        _state.note_unpadded(self, why)
        warnings.warn(f"torch_tpu: {self.name} has bounded dynamic sizes but cannot run padded at the bound ({why}); "
                      f"it compiles once per size instead", stacklevel=stacklevel)

    def __call__(self, args: list):
        if self.eager_reason is None and self.bounded is not None:
            prepared = self.bounded.prepare(args)
            if prepared is not None:
                padded, values = prepared
                try:
                    outs = self._replay_or_capture(padded, self.bounded.run)
                except _state.CacheOnlyError:
                    raise
                except Exception as e:  # the padded capture failed: the sizes' own programs instead
                    self._unpadded(f"its padded capture failed: {type(e).__name__}: {e}", stacklevel=3)
                    outs = None
                if outs is not None:
                    return self.bounded.finish(outs, values)
        if self.eager_reason is None:
            out = self._replay_or_capture(args, self.gm)
            if out is not None:
                return out
        return self._run_eager(args)

    def _replay_or_capture(self, args: list, run: Callable):
        programs = self.programs
        for i, p in enumerate(programs):
            out = p.replay(args)
            if out is not None:
                if i:
                    programs.insert(0, programs.pop(i))
                return out
        with self._lock:
            return self._capture(args, run)

    # ---- capture ------------------------------------------------------------------------------
    def _capture(self, args: list, run: Callable):
        """The outputs of a new capture of `run` over `args`; None when the graph cannot be one
        program (it runs eagerly from then on)."""
        reason = None
        if self.programs:
            reason = self.programs[0].mismatch(args) or "no capture matches"
        _state.before_capture(self, reason)
        scope = _C._CaptureScope(_device_of(args))
        try:
            with torch.no_grad():
                outs = run(*args)
        except Exception:
            why = scope.break_reason()
            scope.discard()
            if why:
                return self._give_up(why)
            raise
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        try:
            program = scope.finish(list(args), outs, self.name)
        except RuntimeError:
            why = scope.break_reason()
            if why:
                return self._give_up(why)
            raise
        del outs
        self.programs.insert(0, program)
        _state.after_capture(self, program, reason)
        out = program.replay(args)
        if out is None:  # the capture's own arguments always match it
            raise RuntimeError(f"torch_tpu internal error: {self.name} does not match its own capture: "
                               f"{program.mismatch(args)}")
        return out

    def _give_up(self, why: str) -> None:
        message = (f"torch_tpu: {self.name} cannot be captured as one program: {why}. It runs as eager ops in "
                   f"fused mode instead (one window per call).")
        if self.fallback == "error":
            raise RuntimeError(message + " (options={'fallback': 'error'} makes this an error)")
        self.eager_reason = why
        _state.note_fallback(self, why)
        warnings.warn(message, stacklevel=4)
        return None

    def _run_eager(self, args: list):
        with _fused_ops(), torch.no_grad():
            outs = self.gm(*args)
        return list(outs) if isinstance(outs, (list, tuple)) else [outs]

    # ---- introspection ------------------------------------------------------------------------
    def text(self) -> str:
        """The StableHLO text of the most recently used capture ("" before the first call)."""
        return self.programs[0].text() if self.programs else ""


def make_compiler(kind: str, fallback: str) -> Callable:
    """An AOTAutograd compiler (fw_compiler, bw_compiler or inference_compiler)."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        saved_from = _compat.aot_forward_returns() if kind == "forward" else None
        graph = CompiledGraph(gm, kind, _state.next_name(kind), fallback, saved_from)
        _state.register(graph)
        return graph

    compile_graph.__name__ = f"tpu_{kind}_compiler"
    return compile_graph
