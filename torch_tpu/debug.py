"""Looking inside fused eager mode.

``dump_window()`` returns the StableHLO text of the device's pending window (the ops recorded
since the last cut, whose results are the values still alive); ``capture_windows()`` collects the
text of every program compiled while it is active (windows and single ops alike)::

    with torch_tpu.eager_mode("fused"):
        y = model(x)
        print(torch_tpu.debug.dump_window())   # what will run when y is read
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List, Tuple

from . import _C


def dump_window(device: int = -1) -> str:
    """The pending window of ``device`` (default: the current one) as StableHLO text ("" when empty)."""
    return _C._dump_window(device)


def pending_ops(device: int = -1) -> int:
    """How many ops the device's open window has recorded."""
    return _C._window_ops(device)


class CapturedPrograms(list):
    """(name, StableHLO text) of each program compiled inside ``capture_windows()``."""

    def windows(self) -> List[str]:
        return [text for name, text in self if name == "fused window"]


@contextlib.contextmanager
def capture_windows() -> Iterator[CapturedPrograms]:
    """Collects every program compiled inside the block (cached programs are not compiled again,
    so clear the cache first to see them all: ``torch_tpu.compile_cache.clear()``)."""
    out = CapturedPrograms()
    _C._set_program_log(True)
    _C._take_program_log()
    try:
        yield out
    finally:
        _C._cut_windows()
        out.extend(_C._take_program_log())
        _C._set_program_log(False)


def programs() -> List[Tuple[str, str]]:
    """Takes the program log (see capture_windows)."""
    return _C._take_program_log()
