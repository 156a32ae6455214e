"""``torch.tpu``: the device module, in the conventions of ``torch.cuda``.

Registered with ``torch._register_device_module("tpu", ...)`` and re-exported as ``torch_tpu.*``.
"""
from __future__ import annotations

import contextlib
from typing import Any, Optional, Union

import torch

from . import _C

_DeviceLike = Union[int, str, torch.device, None]

__all__ = [
    "is_available", "is_initialized", "device_count", "current_device", "set_device", "device",
    "synchronize", "get_device_name", "get_device_properties", "get_device_capability",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all", "default_generators",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_accumulated_memory_stats", "memory_stats", "mem_get_info",
    "empty_cache", "memory_summary", "memory_snapshot", "set_per_process_memory_fraction",
    "get_per_process_memory_fraction", "OutOfMemoryError", "memory", "Stream", "Event", "current_stream", "default_stream", "stream",
    "get_amp_supported_dtype", "is_bf16_supported", "DeviceProperties",
]


def _index(d: _DeviceLike = None) -> int:
    if d is None:
        return _C.current_device()
    if isinstance(d, int):
        return d
    if isinstance(d, str):
        d = torch.device(d)
    if isinstance(d, torch.device):
        if d.type != "tpu":
            raise ValueError(f"expected a tpu device, got {d}")
        return _C.current_device() if d.index is None else d.index
    raise TypeError(f"expected a tpu device, index or string, got {type(d).__name__}")


def is_available() -> bool:
    return _C.device_count() > 0


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    """True in a process forked after torch_tpu initialised the device (at import), where device
    use raises; torch.manual_seed skips the tpu generators there."""
    return _C._is_in_bad_fork()


def _lazy_init() -> None:
    if _C._is_in_bad_fork():
        raise RuntimeError(
            "cannot re-initialize the tpu device in a forked subprocess; to use the tpu device "
            "with multiprocessing, use the 'spawn' start method")


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(d: _DeviceLike) -> None:
    _C.set_device(_index(d))


def device(i: _DeviceLike = 0) -> torch.device:
    """The ``torch.device`` of tpu ``i`` (``torch_tpu.device()`` is ``tpu:0``)."""
    return torch.device("tpu", _index(i))


def synchronize(d: _DeviceLike = None) -> None:
    """Waits for every queued op on the device; raises a pending device error, if any."""
    _C.synchronize(_index(d))


class DeviceProperties:
    def __init__(self, d: dict):
        self.name: str = d["name"]
        self.chip: str = d["chip"]
        self.total_memory: int = d["total_memory"]
        self.hbm_bytes: int = d["hbm_bytes"]
        self.index: int = d["index"]
        self.backend: str = d["backend"]

    def __repr__(self) -> str:
        return (f"_TpuDeviceProperties(name='{self.name}', chip='{self.chip}', "
                f"total_memory={self.total_memory // (1 << 20)}MB, backend='{self.backend}')")


def get_device_properties(d: _DeviceLike = None) -> DeviceProperties:
    return DeviceProperties(_C.get_device_properties(_index(d)))


def get_device_name(d: _DeviceLike = None) -> str:
    return get_device_properties(d).name


def get_device_capability(d: _DeviceLike = None) -> dict:
    return {"chip": get_device_properties(d).chip}


# ---- random numbers ---------------------------------------------------------------------------
class _Generators(tuple):
    pass


def _default_generator(i: int) -> torch.Generator:
    return _C._default_generator(i)


def _generators() -> tuple:
    return tuple(_default_generator(i) for i in range(device_count()))


def __getattr__(name: str) -> Any:
    if name == "default_generators":
        return _generators()
    raise AttributeError(name)


def manual_seed(seed: int) -> None:
    _default_generator(current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in _generators():
        g.manual_seed(int(seed))


def seed() -> None:
    _default_generator(current_device()).seed()


def seed_all() -> None:
    s = _default_generator(current_device()).seed()
    for g in _generators():
        g.manual_seed(s)


def initial_seed() -> int:
    return _default_generator(current_device()).initial_seed()


def get_rng_state(d: _DeviceLike = "tpu") -> torch.Tensor:
    return _default_generator(_index(d)).get_state()


def set_rng_state(state: torch.Tensor, d: _DeviceLike = "tpu") -> None:
    _default_generator(_index(d)).set_state(state)


def get_rng_state_all() -> list:
    return [g.get_state() for g in _generators()]


def set_rng_state_all(states) -> None:
    for g, s in zip(_generators(), states):
        g.set_state(s)


# ---- memory (torch.tpu.memory) ----------------------------------------------------------------
from . import memory  # noqa: E402
from .memory import (  # noqa: E402,F401
    OutOfMemoryError, empty_cache, get_per_process_memory_fraction, max_memory_allocated,
    max_memory_reserved, mem_get_info, memory_allocated, memory_reserved, memory_snapshot,
    memory_stats, memory_summary, reset_accumulated_memory_stats, reset_peak_memory_stats,
    set_per_process_memory_fraction,
)


# ---- streams and events -----------------------------------------------------------------------
def Stream(device: _DeviceLike = None, priority: int = 0) -> torch.Stream:
    """A tpu stream (a ``torch.Stream``). All streams of a device feed its one in-order queue,
    so work is ordered across them as well as within them."""
    return torch.Stream(device=torch.device("tpu", _index(device)), priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
    """A marker on the device queue (a ``torch.Event``): ``record``, ``wait``, ``query``,
    ``synchronize`` and ``elapsed_time`` (milliseconds between two recorded events)."""
    return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(d: _DeviceLike = None) -> torch.Stream:
    return Stream(d)


def default_stream(d: _DeviceLike = None) -> torch.Stream:
    return Stream(d)


@contextlib.contextmanager
def stream(s: Optional[torch.Stream]):
    # One queue per device: entering a stream only selects its device.
    if s is None:
        yield
        return
    prev = _C.current_device()
    _C.set_device(s.device_index)
    try:
        yield
    finally:
        _C.set_device(prev)


# ---- autocast ---------------------------------------------------------------------------------
def get_amp_supported_dtype() -> list:
    return [torch.bfloat16, torch.float16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True
