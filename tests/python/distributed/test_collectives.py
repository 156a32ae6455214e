"""Every collective of the tpu c10d backend against the math (collective_checks.py), on 2 and 4
ranks over shared memory, on 2 ranks over Gloo (the cross-host transport), and in each eager
mode. The shared-memory chunk is set to 64 KiB so that modest tensors take several rounds."""
from __future__ import annotations

import pytest
import torch

import torch_tpu
from collective_checks import (FLOATS, INTS, Checker, all_reduce_checks, async_and_coalesced_checks,
                               data_movement_checks, non_contiguous_checks, p2p_checks, reduce_scatter_checks)
from harness import run_ranks

SMALL_CHUNK = {"TORCH_TPU_DIST_SHM_CHUNK": "65536"}


def _battery(rank, world, runs):
    """runs: (eager mode, whether to check every dtype and multi-round sizes)."""
    results = []
    for mode, full in runs:
        with torch_tpu.eager_mode(mode):
            torch_tpu.metrics.reset()
            c = Checker(rank, world)
            dtypes = FLOATS + INTS + (torch.bool,) if full else (torch.float32, torch.bfloat16, torch.int64)
            # 40000 float32 = 160 KB: three rounds of a 64 KiB chunk.
            all_reduce_checks(c, dtypes, [(), (7,), (3, 5)] + ([(40000,)] if full else []))
            all_reduce_checks(c, (torch.float32,), [(40000,)], case0=500)
            non_contiguous_checks(c)
            data_movement_checks(c, (torch.float32, torch.bfloat16, torch.int64, torch.bool) if full else
                                 (torch.float32,), 20000 if full else 37)
            reduce_scatter_checks(c, (torch.float32, torch.bfloat16, torch.int32) if full else (torch.float32,),
                                  20000 if full else 11)
            async_and_coalesced_checks(c)
            p2p_checks(c)
            torch.tpu.synchronize()
            counters = torch_tpu.metrics.counters()
            c.true(f"{mode}: collectives were counted", counters.get("collectives", 0) > 50)
            if mode == "fused":
                c.true("fused: collectives cut windows", torch_tpu.metrics.window_cuts().get("collective", 0) > 0,
                       repr(torch_tpu.metrics.window_cuts()))
            results.append((mode, c.count, c.failures))
    return results


def _report(results):
    failures = [f for rank in results for (_, _, fs) in rank for f in fs]
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:60])
    assert all(count > 100 for rank in results for (_, count, _) in rank)


def test_two_ranks_shared_memory_every_mode():
    # Every dtype and multi-round sizes in strict mode; the other modes (which change only how the
    # surrounding device ops run) on the smaller set.
    _report(run_ranks(_battery, 2, args=((("strict", True), ("fused", False), ("debug", False)),), env=SMALL_CHUNK,
                      timeout=300))


def test_four_ranks_shared_memory():
    _report(run_ranks(_battery, 4, args=((("strict", False),),), env=SMALL_CHUNK, timeout=300))


def test_two_ranks_gloo_transport():
    _report(run_ranks(_battery, 2, args=((("strict", False),),), env={"TORCH_TPU_DIST_TRANSPORT": "gloo"},
                      timeout=300))


def _registration(rank, world):
    import torch.distributed as dist

    pg = dist.group.WORLD
    backend = pg._get_backend(torch.device("tpu"))
    return {
        "backend_list": "tpu" in dist.Backend.backend_list and "tpu_dist" in dist.Backend.backend_list,
        "default_map": dist.Backend.default_device_backend_map.get("tpu"),
        "config": str(dist.get_backend_config()),
        "transport": backend.transport,
    }


def test_registration_and_default_backend():
    # init_process_group() with no backend on a tpu process picks "tpu".
    out = run_ranks(_default_backend_worker, 2, backend=None)
    for r in out:
        assert r == {"backend_list": True, "default_map": "tpu", "config": "tpu:tpu", "transport": "shm",
                     "mixed": [2.0, 2.0], "ddp_grad": [[1.5, 1.5, 1.5]], "mesh": "tpu"}, r


def _default_backend_worker(rank, world):
    import datetime
    import os
    import tempfile

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "RANK": str(rank), "WORLD_SIZE": str(world)})
    dist.init_process_group(init_method=f"file://{os.environ['TPU_TEST_STORE']}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    out = _registration(rank, world)
    # "cpu:gloo,tpu:tpu": CPU tensors go to Gloo, tpu tensors to the tpu backend, in one group.
    g = dist.new_group(backend="cpu:gloo,tpu:tpu")
    a, b = torch.ones(1), torch.ones(1, device="tpu")
    dist.all_reduce(a, group=g)
    dist.all_reduce(b, group=g)
    out["mixed"] = [a.item(), b.item()]
    # DDP over that group (its default backend is tpu's, as NCCL is for "cpu:gloo,cuda:nccl"): the
    # gradient is the mean of the ranks' inputs, (1 + 2) / 2.
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(torch.nn.Linear(3, 1, bias=False).to("tpu"), process_group=g)
    ddp(torch.full((1, 3), float(rank + 1), device="tpu")).sum().backward()
    out["ddp_grad"] = ddp.module.weight.grad.cpu().tolist()
    mesh = init_device_mesh("tpu", (world,))
    out["mesh"] = mesh.device_type
    dist.destroy_process_group()
    return out
