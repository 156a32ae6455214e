"""torch.compile on the tpu device.

``torch.compile(model, backend="tpu")`` (and plain ``torch.compile(model)`` on tpu tensors) hands
each graph Dynamo captures to AOTAutograd, whose functionalized ATen graphs -- forward and
backward, or one inference graph -- are each captured as one program by the deferred engine on
their first call (the same lowerings as eager: Note [Capture] in csrc/torch/deferred/capture.h)
and replayed on later calls: one launch, no re-tracing, no per-op work. Code outside the graphs
(graph breaks) runs as ordinary eager ops.

    with torch_tpu.compile.cache_only():     # any compile in here is an error naming it
        for _ in range(20):
            step()
    torch_tpu.compile.recompiles()            # every recompile, with its reason

Bounded dynamic sizes: ``torch._dynamo.mark_dynamic(t, dim, min=, max=)`` makes each graph one
program for the whole range, run padded at the bound with the real sizes as data (Note [Bounded
dims] in _bounded.py); ``unpadded()`` lists the graphs that could not, and why.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, List

from . import _state
from ._backend import tpu_backend
from ._state import CacheOnlyError, Recompile

__all__ = ["tpu_backend", "cache_only", "recompiles", "stats", "fallbacks", "unpadded", "graphs", "reset_stats",
           "CacheOnlyError", "Recompile"]


@contextlib.contextmanager
def cache_only() -> Iterator[None]:
    """Inside the block nothing may compile: a new Dynamo graph, a Dynamo recompile, a new capture
    of a compiled graph, or (checked when the block ends) any program the device compiles (a fused
    window or an eager op missing from the compile cache) raises CacheOnlyError naming it."""
    from .. import _C

    import torch._dynamo

    log_was_on = False
    _C._set_program_log(True)
    _C._take_program_log()
    before = _C.counters().get("compiles", 0)
    _state.enter_cache_only()
    try:
        with torch._dynamo.config.patch(error_on_recompile=True):
            try:
                yield
            except torch._dynamo.exc.RecompileError as e:
                raise CacheOnlyError(f"torch_tpu.compile.cache_only(): Dynamo would recompile: {e}") from e
    finally:
        _state.exit_cache_only()
        compiled = _C._take_program_log()
        _C._set_program_log(log_was_on)
    after = _C.counters().get("compiles", 0)
    if after != before:
        names = sorted({name for name, _ in compiled})
        raise CacheOnlyError(f"torch_tpu.compile.cache_only(): {after - before} program(s) compiled inside the block: "
                             f"{', '.join(names) or 'unnamed'}")


def recompiles() -> List[Recompile]:
    """Every recompile so far (what a compile that was not its graph's first was for)."""
    return _state.recompiles()


def stats() -> Dict[str, int]:
    """Dynamo graphs compiled, captures, recompiles and graphs that fell back to eager."""
    return _state.counts()


def fallbacks() -> Dict[str, str]:
    """Graphs that run as eager ops, and why."""
    return _state.fallbacks()


def unpadded() -> Dict[str, str]:
    """Graphs with bounded dynamic sizes (mark_dynamic(t, dim, min=, max=)) that cannot run padded
    at their bound and so compile once per size, and why (Note [Bounded dims])."""
    return _state.unpadded()


def graphs() -> list:
    """The live compiled graphs (``g.name``, ``g.kind``, ``g.text()`` for the StableHLO program)."""
    return _state.graphs()


def reset_stats() -> None:
    _state.reset()
