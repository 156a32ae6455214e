"""torch.distributed on tpu: the c10d backend ``"tpu"`` (also ``"tpu_dist"``, TorchTPU's name).

``import torch_tpu`` registers it (``torch.distributed.Backend.register_backend(...,
devices=["tpu"])``), so ``dist.init_process_group("tpu")``, ``init_process_group()`` with no backend
on a tpu process, ``"cpu:gloo,tpu:tpu"`` and ``init_device_mesh("tpu", ...)`` pick it. The backend
(csrc/torch/distributed) queues every collective on the device like any op. Its transport: shared
memory when every rank of a group is on this host, else PyTorch's Gloo over TCP on the same store
(``TORCH_TPU_DIST_TRANSPORT`` forces one; ``TORCH_TPU_DIST_HOST_ID`` overrides the host identity,
e.g. to run two "nodes" on one machine).
"""
from __future__ import annotations

import datetime
import socket

import torch

NAMES = ("tpu", "tpu_dist")
_registered = False


def _option(name: str) -> str:
    from . import _C

    return _C.get_option(name)


def host_id() -> str:
    """The identity that groups ranks on one host: option ``dist_host_id``, else the hostname."""
    return _option("dist_host_id") or socket.gethostname()


def _group_name(opts) -> str:
    ranks = list(opts.global_ranks_in_group)
    if not ranks:
        return "default"
    return f"{opts.group_id} (ranks {ranks})" if len(ranks) <= 8 else f"{opts.group_id} ({len(ranks)} ranks)"


def _seconds(timeout) -> float:
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _create_backend(dist_opts, pg_opts=None):
    """The creator c10d calls for each process group (extended API: store, ranks, timeout, ids)."""
    from torch.distributed import PrefixStore

    from . import _C

    store, rank, size = dist_opts.store, dist_opts.group_rank, dist_opts.group_size
    timeout = _seconds(dist_opts.timeout)
    # Which ranks share a host: each publishes its host identity on the group's store.
    store.set(f"tpu_dist/host/{rank}", host_id())
    hosts = [store.get(f"tpu_dist/host/{r}").decode() for r in range(size)]
    transport = _option("dist_transport")
    if transport == "auto":
        transport = "shm" if len(set(hosts)) == 1 else "gloo"
    elif transport == "shm" and len(set(hosts)) != 1:
        raise RuntimeError(f"torch_tpu distributed: TORCH_TPU_DIST_TRANSPORT=shm, but the ranks of this process group "
                           f"are on {len(set(hosts))} hosts ({sorted(set(hosts))})")
    gloo = None
    if transport == "gloo":
        from torch.distributed import ProcessGroupGloo

        gloo = ProcessGroupGloo(PrefixStore("tpu_gloo/", store), rank, size, datetime.timedelta(seconds=timeout))
    dist_mod = _C._dist_define()
    return dist_mod.TpuBackend(store, rank, size, timeout, _group_name(dist_opts), transport, gloo)


def register() -> None:
    """Registers the backend with torch.distributed (once; a no-op without torch.distributed)."""
    global _registered
    if _registered or not torch.distributed.is_available():
        return
    from torch.distributed import Backend

    for name in NAMES:
        if name not in Backend.backend_list:
            Backend.register_backend(name, _create_backend, extended_api=True, devices=["tpu"])
    # register_backend maps a device to the first backend registered for it: "tpu".
    Backend.default_device_backend_map["tpu"] = "tpu"
    from torch.distributed import distributed_c10d

    from . import _compat

    _compat.patch_default_backend(distributed_c10d)
    _compat.patch_set_pg_timeout(distributed_c10d)
    _registered = True
