"""Feeding the device: ``DeviceLoader`` moves a loader's batches to the device ahead of use.

    loader = torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=4)
    for x, y in torch_tpu.data.DeviceLoader(loader, "tpu"):
        loss = model(x).loss(y)     # x, y are already on the device
        ...

A background thread takes batches from the loader and copies them to the device while the
current step runs, keeping up to ``prefetch`` batches ready: the host's batch preparation and
the copies overlap with the device's work instead of adding to each step.
"""
from __future__ import annotations

import collections.abc
import queue
import threading
import time
from typing import Any, Iterable, Iterator

import torch

__all__ = ["DeviceLoader", "to_device"]


def to_device(obj: Any, device: torch.device | str, non_blocking: bool = True) -> Any:
    """`obj` with every tensor in it moved to `device`: tensors, and tuples (named ones too),
    lists and mappings of them, nested; anything else is returned as it is."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(to_device(v, device, non_blocking) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(v, device, non_blocking) for v in obj)
    if isinstance(obj, collections.abc.Mapping):
        moved = {k: to_device(v, device, non_blocking) for k, v in obj.items()}
        try:
            return type(obj)(moved)
        except TypeError:  # a mapping type that cannot be built from a dict
            return moved
    return obj


class _End:
    pass


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


class DeviceLoader:
    """Wraps an iterable of batches (usually a DataLoader); iterating it yields the same batches,
    in the same order, with their tensors already on `device`.

    prefetch: how many batches may be ready on the device ahead of the one in use (each costs
    its device memory). An exception raised by the loader is re-raised by the iteration that
    reaches it; leaving the loop early (break, an exception in the loop body) stops the
    background thread. ``len()`` is the loader's, when it has one.
    """

    def __init__(self, loader: Iterable, device: torch.device | str = "tpu", prefetch: int = 2):
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, got {prefetch}")
        self.loader = loader
        self.device = torch.device(device)
        self.prefetch = prefetch
        self.wait_seconds = 0.0  # time the consumer spent waiting for a batch, over all epochs

    def __len__(self) -> int:
        return len(self.loader)  # TypeError when the loader has no length, as for any iterable

    def __getattr__(self, name: str):
        # dataset, sampler, batch_size, ... of the wrapped DataLoader
        if name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __iter__(self) -> Iterator:
        ready: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        thread = threading.Thread(target=self._produce, args=(ready, stop), name="tpu-device-loader", daemon=True)
        thread.start()
        try:
            while True:
                t0 = time.perf_counter()
                item = ready.get()
                self.wait_seconds += time.perf_counter() - t0
                if isinstance(item, _End):
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield item
        finally:
            # Reached on exhaustion, on an error, and when the consumer stops early (the
            # generator is closed): unblock the producer and wait for it.
            stop.set()
            while thread.is_alive():
                try:
                    ready.get(timeout=0.05)
                except queue.Empty:
                    pass
            thread.join()

    def _produce(self, ready: queue.Queue, stop: threading.Event) -> None:
        def put(item) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    pass
            return False

        try:
            it = iter(self.loader)
            while not stop.is_set():
                try:
                    batch = next(it)
                except StopIteration:
                    put(_End())
                    return
                if not put(to_device(batch, self.device)):
                    return
        except BaseException as e:  # handed to the consumer, which raises it
            put(_Failure(e))
