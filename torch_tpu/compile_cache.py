"""The compile cache: every program the device runs is compiled once and kept.

Two tiers: in-process (bounded: option ``cache_size``) and a persistent directory
(``TORCH_TPU_CACHE_DIR`` / option ``cache_dir``) that processes and hosts share, so a second run
of a script reaches its first step without compiling again. Entries are written atomically and
checked when read (format and compiler versions, backend version, the program itself, a
checksum): a damaged or foreign entry is ignored, recompiled and replaced.

    stats()             requests, hits per tier, misses, compiles and their time, the entries
    recompiles()        the latest compiles with the reason each was needed
    cache_only()        a context manager in which a miss is an error (a loop that compiles nothing)
    clear(disk=False)   empties the in-process tier (and the directory, with disk=True)
    dump_misses(dir)    writes the StableHLO text of every program that misses into ``dir``
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List, Optional, Tuple

from . import _C, config


def stats() -> dict:
    c = dict(_C.counters())
    get = lambda k: c.get(k, 0)  # noqa: E731
    hits, disk_hits, misses = get("compile_cache_hits"), get("compile_cache_disk_hits"), get("compile_cache_misses")
    return {
        "requests": hits + misses,
        "hits": hits,
        "disk_hits": disk_hits,
        "misses": misses - disk_hits,  # compiled (or refused in cache-only mode)
        "compiles": get("compiles"),
        "compile_time_s": get("compile_time_ns") / 1e9,
        "evictions": get("compile_cache_evictions"),
        "disk_writes": get("compile_cache_disk_writes"),
        "disk_rejected": get("compile_cache_disk_rejected"),
        "disk_evictions": get("compile_cache_disk_evictions"),
        "reasons": {k[len("compile_reasons/"):]: v for k, v in c.items() if k.startswith("compile_reasons/") and v},
        "size": _C.compile_cache_size(),
        "disk": dict(_C._cache_disk()),
        "entries": [dict(e) for e in _C._cache_entries()],
    }


def recompiles(include_new: bool = True) -> List[Tuple[str, str, str]]:
    """(program, reason, what differs) of the latest compiles, oldest first. Reasons: new,
    input_shape, input_dtype, result_type, attribute, options, evicted."""
    out = [tuple(r) for r in _C._cache_compiles()]
    return out if include_new else [r for r in out if r[1] != "new"]


def clear(disk: bool = False) -> None:
    _C.clear_compile_cache()
    if disk:
        _C._cache_clear_disk()


def set_cache_dir(path: Optional[str]) -> None:
    config.set("cache_dir", path or "")


@contextlib.contextmanager
def _option(name: str, value) -> Iterator[None]:
    previous = config.get(name)
    config.set(name, value)
    try:
        yield
    finally:
        config.set(name, previous)


def cache_only() -> contextlib.AbstractContextManager:
    """Inside: a compile-cache miss raises an error naming the program and why it missed."""
    return _option("cache_only", True)


def dump_misses(directory: str) -> contextlib.AbstractContextManager:
    """Inside: the StableHLO text of every program that misses the cache is written to `directory`."""
    return _option("cache_dump_dir", directory)
