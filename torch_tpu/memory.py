"""``torch.tpu.memory``: the device allocator's state, in the conventions of ``torch.cuda.memory``.

Besides the statistics (``memory_allocated``, ``memory_stats``, ...), it records the allocation
history and snapshots the allocator in the format of PyTorch's memory visualizer::

    torch.tpu.memory._record_memory_history()      # from now on, every alloc/free with its stack
    ...                                            # run the code to look at
    torch.tpu.memory._dump_snapshot("snap.pickle")
    # python -m torch.cuda._memory_viz trace_plot snap.pickle -o snap.html   (or drag the
    # pickle onto https://pytorch.org/memory_viz)

What it shows for a tpu device (Note [Memory history] in csrc/torch/memory_history.cc): each live
buffer is one segment of one block at its device address (``tensor.data_ptr()`` is inside it),
each block the allocator keeps cached is an inactive segment; in fused mode memory is taken when a
value first needs it, so an allocation appears when the window that writes it runs.
"""
from __future__ import annotations

import pickle
import sys
from typing import Any, Optional, Union

import torch

from . import _C

_DeviceLike = Union[int, str, torch.device, None]

__all__ = [
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "memory_summary", "memory_snapshot", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "mem_get_info", "empty_cache",
    "set_per_process_memory_fraction", "get_per_process_memory_fraction", "OutOfMemoryError",
]

OutOfMemoryError = torch.OutOfMemoryError


def _index(d: _DeviceLike = None) -> int:
    from ._tpu_module import _index as index

    return index(d)


def memory_stats(device: _DeviceLike = None) -> dict:
    return dict(_C.memory_stats(_index(device)))


def memory_allocated(device: _DeviceLike = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _C.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    _C.reset_accumulated_memory_stats(_index(device))


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of device memory."""
    return tuple(_C.mem_get_info(_index(device)))


def empty_cache() -> None:
    _C.empty_cache()


def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    """Caps this process's device memory at ``fraction`` of the device's capacity; an allocation
    past it raises ``torch.tpu.OutOfMemoryError`` (as ``torch.cuda`` does)."""
    if not isinstance(fraction, (int, float)):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    i = _index(device)
    capacity = _C.memory_stats(i)["capacity"]
    _C._set_memory_limit(i, capacity if fraction == 1 else max(1, int(capacity * fraction)))


def get_per_process_memory_fraction(device: _DeviceLike = None) -> float:
    s = _C.memory_stats(_index(device))
    return 1.0 if s["limit"] == 0 else min(1.0, s["limit"] / s["capacity"])


# ---- history and snapshots ---------------------------------------------------------------------
def _record_memory_history(enabled: Union[str, bool, None] = "all", context: Optional[str] = "all",
                           stacks: str = "all", max_entries: int = sys.maxsize,
                           device: _DeviceLike = None) -> None:
    """Starts (or with ``enabled=None`` stops) recording the allocator's history, as
    ``torch.cuda.memory._record_memory_history``: ``enabled="all"`` keeps a trace of every
    alloc/free and the stack of each live allocation, ``"state"`` only the latter; ``context``
    says which events get a stack (``None``, ``"state"``/``"alloc"``: allocations, ``"all"``:
    frees too); at most ``max_entries`` trace entries per device are kept. Stacks are Python
    stacks (``stacks="all"`` records no C++ frames on this device). Applies to every tpu device.
    """
    if isinstance(enabled, bool):  # the legacy form
        enabled = "all" if enabled else None
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', got {stacks!r}")
    if device is not None:
        _index(device)  # validates it
    _C._memory_record_history(enabled or "none", context or "none", int(min(max_entries, 2**62)))


def _snapshot(device: _DeviceLike = None) -> dict[str, Any]:
    """The allocator's state and recorded history: ``{"segments": [...], "device_traces":
    [[...] per device]}`` in ``torch.cuda.memory._snapshot``'s format."""
    return _C._memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Writes ``_snapshot()`` to ``filename`` (a pickle ``torch.cuda._memory_viz`` and
    https://pytorch.org/memory_viz read)."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot() -> list:
    """The allocator's segments (``_snapshot()["segments"]``), as ``torch.cuda.memory_snapshot``."""
    return _snapshot()["segments"]


def _fmt_bytes(n: int) -> str:
    for unit in ("B  ", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:6d} {unit}" if unit == "B  " else f"{n:6.1f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """A readable table of the allocator's statistics, as ``torch.cuda.memory_summary``."""
    i = _index(device)
    s = memory_stats(i)
    segs = memory_snapshot()
    cached = sum(1 for g in segs if g["device"] == i and g["blocks"][0]["state"] == "inactive")
    live = sum(1 for g in segs if g["device"] == i and g["blocks"][0]["state"] != "inactive")
    width = 75
    rule = "|" + "=" * (width - 2) + "|"
    line = "|" + "-" * (width - 2) + "|"

    def row(name, cur, peak, alloc, freed, fmt):
        cells = [fmt(v) if v is not None else "" for v in (cur, peak, alloc, freed)]
        return f"| {name:<22}|" + "|".join(f" {c:>10} " for c in cells) + "|"

    out = [rule, f"| {'PyTorch tpu memory summary, device ID ' + str(i):<{width - 3}}|", line,
           f"| {'capacity ' + _fmt_bytes(s['capacity']).strip():<{width - 3}}|"]
    if s["limit"]:
        out.append(f"| {'process limit ' + _fmt_bytes(s['limit']).strip() + ' (set_per_process_memory_fraction)':<{width - 3}}|")
    out += [f"| {'num_ooms: ' + str(s['num_ooms']):<{width - 3}}|", rule,
            f"| {'Metric':<22}|" + "|".join(f" {h:>10} " for h in ("Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed")) + "|",
            line,
            row("Allocated memory", s["allocated_bytes.all.current"], s["allocated_bytes.all.peak"],
                s["allocated_bytes.all.allocated"], s["allocated_bytes.all.freed"], _fmt_bytes),
            row("Reserved memory", s["reserved_bytes.all.current"], s["reserved_bytes.all.peak"], None, None, _fmt_bytes),
            line,
            row("Allocations", s["allocation.all.current"], None, s["allocation.all.allocated"],
                s["allocation.all.freed"], str)]
    if not abbreviated:
        out += [row("Live buffers", live, None, None, None, str),
                row("Cached blocks", cached, None, None, None, str)]
    out.append(rule)
    return "\n".join(out) + "\n"
