"""DTensor on a tpu DeviceMesh, tensor parallelism (parallelize_module) and distributed
checkpointing (torch.distributed.checkpoint) on 2 tpu ranks, against the same computation in one
process on PyTorch's CPU.

Tolerances: redistributions move data (exact); the tensor-parallel MLP's row-wise layer sums its
two halves' partial products in another order than one matmul does, so outputs and gradients
differ from CPU by float32 rounding only (~1e-7 relative here; rtol 1e-5 asserted: a missing
all-reduce or a wrong shard is off by O(1)). A checkpoint round trip is exact.
"""
from __future__ import annotations

import torch

from harness import run_ranks

RTOL, ATOL = 1e-5, 1e-6
MODES = ("strict", "fused")  # each rank runs both: starting ranks costs more than the checks


def _full(seed=0):
    return torch.randn(4, 6, generator=torch.Generator().manual_seed(seed))


def _in_modes(rank, world, name, *args):
    """The worker `name` of this module in each of MODES: {mode: its result}."""
    import torch_tpu

    out = {}
    for mode in MODES:
        with torch_tpu.eager_mode(mode):
            torch_tpu.metrics.reset()
            out[mode] = globals()[name](rank, world, *args), torch_tpu.metrics.fallback_ops()
    return out


def _dtensor(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("tpu", (world,))
    full = _full().to("tpu")
    out = {}
    d = distribute_tensor(full, mesh, [Shard(0)])
    out["local_shard0"] = d.to_local().cpu()
    out["shard0_to_replicate"] = d.redistribute(mesh, [Replicate()]).to_local().cpu()  # all-gather
    out["shard0_to_shard1"] = d.redistribute(mesh, [Shard(1)]).to_local().cpu()  # all-to-all
    # Partial: each rank holds a summand (rank + 1) * full; Replicate is their all-reduce.
    p = torch.distributed.tensor.DTensor.from_local(full * (rank + 1), mesh, [Partial()])
    out["partial_to_replicate"] = p.redistribute(mesh, [Replicate()]).to_local().cpu()
    out["partial_to_shard0"] = p.redistribute(mesh, [Shard(0)]).to_local().cpu()  # reduce-scatter
    # Ops on DTensors run on the local shards (tpu) and communicate as the placements require.
    e = (d * 2 + 1).sum()  # a partial sum over the sharded dim, reduced when read
    out["sum"] = e.full_tensor().cpu()
    out["device"] = str(d.to_local().device)
    return out


def test_dtensor_redistribute_on_a_tpu_mesh():
    full = _full()
    res = run_ranks(_in_modes, world=2, args=("_dtensor",), timeout=180)
    for rank, mode in ((rank, mode) for rank in range(2) for mode in MODES):
        r, fallbacks = res[rank][mode]
        assert not fallbacks, (mode, fallbacks)  # every op of it ran on the device
        assert r["device"] == "tpu:0"
        torch.testing.assert_close(r["local_shard0"], full.chunk(2, 0)[rank], rtol=0, atol=0)
        torch.testing.assert_close(r["shard0_to_replicate"], full, rtol=0, atol=0)
        torch.testing.assert_close(r["shard0_to_shard1"], full.chunk(2, 1)[rank], rtol=0, atol=0)
        torch.testing.assert_close(r["partial_to_replicate"], full * 3, rtol=0, atol=0)
        torch.testing.assert_close(r["partial_to_shard0"], (full * 3).chunk(2, 0)[rank], rtol=0, atol=0)
        torch.testing.assert_close(r["sum"], (full * 2 + 1).sum(), rtol=RTOL, atol=ATOL)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.norm = torch.nn.LayerNorm(8)
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(self.norm(x))))


def _inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(2, 6, 8, generator=g), torch.randn(2, 6, 8, generator=g)


def _reference():
    m = MLP()
    x, target = _inputs()
    loss = torch.nn.functional.mse_loss(m(x), target)
    loss.backward()
    return loss.detach(), {k: p.grad for k, p in m.named_parameters()}


def _tensor_parallel(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    mesh = init_device_mesh("tpu", (world,))
    m = MLP().to("tpu")
    # The norm runs sequence-parallel (its input and output sharded on the sequence dim); up is
    # column-wise (all-gathers the sequence shards, shards its output features), down row-wise
    # (a partial sum over the features, reduced into a replicated output).
    parallelize_module(m, mesh, {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(),
    })
    x, target = (t.to("tpu") for t in _inputs())
    x_local = x.chunk(world, dim=1)[rank]  # each rank holds its part of the sequence
    out = m(x_local)
    loss = torch.nn.functional.mse_loss(out, target)
    loss.backward()
    grads = {k: p.grad.full_tensor().cpu() for k, p in m.named_parameters()}
    placements = {k: str(p.placements) for k, p in m.named_parameters()}
    return loss.detach().cpu(), grads, placements


def test_tensor_parallel_mlp_matches_one_process():
    loss_ref, grads_ref = _reference()
    res = run_ranks(_in_modes, world=2, args=("_tensor_parallel",), timeout=180)
    for (loss, grads, placements), fallbacks in (r[mode] for r in res for mode in MODES):
        assert not fallbacks, fallbacks
        assert placements["up.weight"] == "(Shard(dim=0),)" and placements["down.weight"] == "(Shard(dim=1),)"
        assert placements["norm.weight"] == "(Replicate(),)"
        torch.testing.assert_close(loss, loss_ref, rtol=RTOL, atol=ATOL)
        for k, g in grads_ref.items():
            torch.testing.assert_close(grads[k], g, rtol=RTOL, atol=ATOL, msg=lambda m, k=k: f"{k}: {m}")


def _checkpoint(rank, world, path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("tpu", (world,))
    saved = MLP().to("tpu")
    fully_shard(saved, mesh=mesh)
    with torch.no_grad():
        for p in saved.parameters():
            p.mul_(3).add_(rank)  # a state no fresh model has (the shards differ by rank)
    dcp.save(get_model_state_dict(saved), checkpoint_id=path)
    torch.distributed.barrier()
    loaded = MLP().to("tpu")
    fully_shard(loaded, mesh=mesh)
    sd = get_model_state_dict(loaded)
    dcp.load(sd, checkpoint_id=path)
    set_model_state_dict(loaded, sd)
    return ({k: v.full_tensor().cpu() for k, v in get_model_state_dict(saved).items()},
            {k: v.full_tensor().cpu() for k, v in get_model_state_dict(loaded).items()},
            str(next(loaded.parameters()).to_local().device))


def test_distributed_checkpoint_of_a_sharded_model_round_trips(tmp_path):
    res = run_ranks(_checkpoint, world=2, args=(str(tmp_path / "ckpt"),), timeout=180)
    fresh = MLP().state_dict()
    for saved, loaded, device in res:
        assert device == "tpu:0"
        assert saved.keys() == loaded.keys() == fresh.keys()
        for k in saved:
            torch.testing.assert_close(loaded[k], saved[k], rtol=0, atol=0)
            assert not torch.equal(saved[k], fresh[k])  # the checkpoint, not a fresh init
