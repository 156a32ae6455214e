"""What the tpu compile backend has done in this process: graphs, captures, recompiles with their
reasons, fallbacks, and the cache-only mode (torch_tpu.compile.cache_only)."""
from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass
from typing import Dict, List, Optional

_lock = threading.Lock()
_names = {k: itertools.count(1) for k in ("forward", "backward", "inference", "dynamo")}
_graphs: "weakref.WeakSet" = weakref.WeakSet()
_cache_only = 0


@dataclass(frozen=True)
class Recompile:
    """One compile that was not the first of its graph, and why it happened."""
    graph: str    # "forward graph 3", or "dynamo frame 'forward' (model.py:12)"
    reason: str   # what differed from the compiles before it
    level: str    # "dynamo" (its guards failed: a new FX graph) or "capture" (same graph, new program)


_recompiles: List[Recompile] = []
_counts: Dict[str, int] = {"dynamo_graphs": 0, "captures": 0, "recompiles": 0, "fallbacks": 0,
                           "padded_graphs": 0, "unpadded_bounded_graphs": 0}
_fallbacks: Dict[str, str] = {}
_unpadded: Dict[str, str] = {}


class CacheOnlyError(RuntimeError):
    """A compile was needed inside torch_tpu.compile.cache_only()."""


def next_name(kind: str) -> str:
    with _lock:
        return f"{kind} graph {next(_names[kind])}"


def register(graph) -> None:
    with _lock:
        _graphs.add(graph)


def cache_only_active() -> bool:
    return _cache_only > 0


def enter_cache_only() -> None:
    global _cache_only
    with _lock:
        _cache_only += 1


def exit_cache_only() -> None:
    global _cache_only
    with _lock:
        _cache_only -= 1


def before_capture(graph, reason: Optional[str]) -> None:
    if _cache_only:
        what = f"recompiled ({reason})" if reason else "captured and compiled for the first time"
        raise CacheOnlyError(f"torch_tpu.compile.cache_only(): {graph.name} would be {what}")


def after_capture(graph, program, reason: Optional[str]) -> None:
    with _lock:
        _counts["captures"] += 1
        if reason:
            _counts["recompiles"] += 1
            _recompiles.append(Recompile(graph.name, reason, "capture"))


def note_dynamo_graph(name: str, reason: Optional[str]) -> None:
    """Dynamo handed the backend a new FX graph; `reason` is why, when it is a recompile."""
    if _cache_only:
        what = f"a recompile ({reason})" if reason else "compiled for the first time"
        raise CacheOnlyError(f"torch_tpu.compile.cache_only(): Dynamo asks for {name}, {what}")
    with _lock:
        _counts["dynamo_graphs"] += 1
        if reason:
            _counts["recompiles"] += 1
            _recompiles.append(Recompile(name, reason, "dynamo"))


def note_fallback(graph, why: str) -> None:
    with _lock:
        _counts["fallbacks"] += 1
        _fallbacks[graph.name] = why


def note_padded(graph) -> None:
    with _lock:
        _counts["padded_graphs"] += 1


def note_unpadded(graph, why: str) -> None:
    """A graph with bounded sizes that compiles per size instead (Note [Bounded dims])."""
    with _lock:
        _counts["unpadded_bounded_graphs"] += 1
        _unpadded[graph.name] = why


def unpadded() -> Dict[str, str]:
    with _lock:
        return dict(_unpadded)


def recompiles() -> List[Recompile]:
    with _lock:
        return list(_recompiles)


def counts() -> Dict[str, int]:
    with _lock:
        return dict(_counts)


def fallbacks() -> Dict[str, str]:
    with _lock:
        return dict(_fallbacks)


def graphs() -> list:
    with _lock:
        return sorted(_graphs, key=lambda g: g.name)


def reset() -> None:
    with _lock:
        _recompiles.clear()
        _fallbacks.clear()
        _unpadded.clear()
        for k in _counts:
            _counts[k] = 0
