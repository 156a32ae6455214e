"""The example Llama (examples/llama.py: RMSNorm, RoPE, grouped-query attention, SwiGLU) trained
for 10 AdamW steps data parallel (DDP, FSDP2) and with tensor parallelism on 2 tpu ranks, and with
FSDP2 + tensor parallelism on a 2x2 mesh of 4 ranks, against the same training in one process on
PyTorch's CPU.

The tensor-parallel plan is the usual one for this architecture: q/k/v and the SwiGLU's w1/w3
column-wise (each rank holds half the heads and half the hidden features), wo and w2 row-wise (a
partial sum, all-reduced); each rank's attention then runs on its heads, so its head counts are
halved after parallelize_module. Embedding, norms and the output layer stay replicated. AdamW runs
per parameter (foreach=False: the parameters are a mix of DTensors and plain tensors).

Tolerance: the runs differ only by float32 rounding (the row-wise layers sum their halves'
products in another order, the data-parallel gradients are averaged across ranks), which AdamW
carries forward; rtol 1e-4 is asserted on the losses and on the first step's gradients (a missing
all-reduce, a wrong shard or head count changes them by 1e-2 or more from the first step).
"""
from __future__ import annotations

import dataclasses
import os
import sys

import pytest
import torch

from harness import run_ranks

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples"))
import llama  # noqa: E402

STEPS, BATCH, SEQ, VOCAB = 10, 4, 16, 50
RTOL, ATOL = 1e-4, 1e-5


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = dataclasses.replace(llama.CONFIGS["llama"], vocab_size=VOCAB, max_seq_len=SEQ, dim=32, n_layers=2,
                              n_heads=4, n_kv_heads=2, hidden_dim=64)
    return llama.Llama(cfg)


def batches():
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(STEPS):
        x = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        out.append((x, torch.roll(x, -1, dims=1)))
    return out


def optimizer(params):
    return torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01, foreach=False)


@pytest.fixture(scope="module")
def reference():
    data = batches()
    m = model()
    opt = optimizer(m.parameters())
    losses, grads = [], None
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        _, loss = m(x, y)
        loss.backward()
        if grads is None:
            grads = {k: p.grad.clone() for k, p in m.named_parameters()}
        opt.step()
        losses.append(loss.item())
    return data, losses, grads


def _tensor_parallel(m, tp_mesh):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    tp = tp_mesh.size()
    for layer in m.layers:
        parallelize_module(layer, tp_mesh, {
            "attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(),
            "ffn.w1": ColwiseParallel(), "ffn.w3": ColwiseParallel(), "ffn.w2": RowwiseParallel(),
        })
        layer.attn.n_heads //= tp  # this rank's heads
        layer.attn.n_kv_heads //= tp


def _full_grads(m):
    return {k: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).cpu()
            for k, p in m.named_parameters()}


def _train(rank, world, data, dp, mode):
    import torch.distributed as dist
    import torch_tpu
    from torch.distributed.device_mesh import init_device_mesh

    with torch_tpu.eager_mode(mode):
        torch_tpu.metrics.reset()
        mesh = init_device_mesh("tpu", (dp, world // dp), mesh_dim_names=("dp", "tp"))
        m = model().to("tpu")
        _tensor_parallel(m, mesh["tp"])
        if dp > 1:
            from torch.distributed.fsdp import fully_shard

            for layer in m.layers:
                fully_shard(layer, mesh=mesh["dp"])
            fully_shard(m, mesh=mesh["dp"])
        opt = optimizer(m.parameters())
        dp_rank = mesh["dp"].get_local_rank()
        losses, grads = [], None
        for x, y in data:
            n = x.shape[0] // dp  # the data-parallel share; the tp ranks of a dp group see the same rows
            x, y = x[dp_rank * n:(dp_rank + 1) * n].to("tpu"), y[dp_rank * n:(dp_rank + 1) * n].to("tpu")
            opt.zero_grad(set_to_none=True)
            _, loss = m(x, y)
            loss.backward()
            if grads is None:
                grads = _full_grads(m)
            opt.step()
            loss = loss.detach()
            if dp > 1:
                dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
            losses.append(loss.item())
        placements = {k: str(getattr(p, "placements", "plain")) for k, p in m.named_parameters()}
        return losses, grads, placements, torch_tpu.metrics.fallback_ops()


def _check(who, losses, grads, expected, expected_grads):
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), rtol=RTOL, atol=ATOL,
                               msg=lambda m: f"{who} losses: {m}")
    for k, g in expected_grads.items():
        torch.testing.assert_close(grads[k], g, rtol=RTOL, atol=ATOL, msg=lambda m, k=k: f"{who} grad {k}: {m}")


def _tp_worker(rank, world, data):
    return {mode: _train(rank, world, data, 1, mode) for mode in ("strict", "fused")}


def test_tensor_parallel_llama_matches_one_process(reference):
    data, expected, expected_grads = reference
    out = run_ranks(_tp_worker, 2, args=(data,), timeout=300)
    for rank in range(2):
        for mode, (losses, grads, placements, fallbacks) in out[rank].items():
            assert placements["layers.0.attn.wq.weight"] == "(Shard(dim=0),)", placements
            assert placements["layers.0.ffn.w2.weight"] == "(Shard(dim=1),)", placements
            assert not fallbacks, fallbacks
            _check(f"{mode} rank {rank}", losses, grads, expected, expected_grads)


def _fsdp_tp_worker(rank, world, data):
    return _train(rank, world, data, 2, "strict")


def test_fsdp_and_tensor_parallel_llama_on_a_2x2_mesh_matches_one_process(reference):
    data, expected, expected_grads = reference
    out = run_ranks(_fsdp_tp_worker, 4, args=(data,), timeout=420)
    for rank in range(4):
        losses, grads, placements, fallbacks = out[rank]
        # FSDP shards on the dp dim of the mesh, TP on the tp dim: a 2-D placement per parameter
        # (FSDP's shard of a TP shard is strided in the full tensor: _StridedShard).
        assert placements["layers.0.attn.wq.weight"] == "(_StridedShard(dim=0, sf=2), Shard(dim=0))", placements
        assert placements["tok_emb.weight"] == "(Shard(dim=0),)", placements  # FSDP only
        assert not fallbacks, fallbacks
        _check(f"rank {rank}", losses, grads, expected, expected_grads)


def _data_parallel_worker(rank, world, data):
    """DDP and FSDP2 (every layer, then the root) over all ranks; each trains on its rows."""
    import torch.distributed as dist
    import torch_tpu
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    out = {}
    for kind in ("ddp", "fsdp2"):
        torch_tpu.metrics.reset()
        m = model().to("tpu")
        if kind == "ddp":
            wrapped = DDP(m, bucket_cap_mb=0.01)
        else:
            for layer in m.layers:
                fully_shard(layer)
            wrapped = fully_shard(m)
        opt = optimizer(wrapped.parameters())
        losses, grads = [], None
        for x, y in data:
            n = x.shape[0] // world
            opt.zero_grad(set_to_none=True)
            _, loss = wrapped(x[rank * n:(rank + 1) * n].to("tpu"), y[rank * n:(rank + 1) * n].to("tpu"))
            loss.backward()
            if grads is None:
                grads = _full_grads(m)
            opt.step()
            loss = loss.detach()
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
            losses.append(loss.item())
        out[kind] = losses, grads, torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.counters().get("collectives", 0)
    return out


def test_ddp_and_fsdp2_llama_match_one_process(reference):
    data, expected, expected_grads = reference
    out = run_ranks(_data_parallel_worker, 2, args=(data,), timeout=300)
    for rank in range(2):
        for kind, (losses, grads, fallbacks, collectives) in out[rank].items():
            assert not fallbacks, fallbacks
            assert collectives > 2 * STEPS, (kind, collectives)  # the gradients are reduced every step
            _check(f"{kind} rank {rank}", losses, grads, expected, expected_grads)
