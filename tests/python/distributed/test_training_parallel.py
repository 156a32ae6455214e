"""Training of the example GPT on tpu ranks -- data parallel (DDP, FSDP2), tensor parallel
(char_gpt.parallelize) and FSDP2 + TP -- against the same training in one process on PyTorch's
CPU (training_checks.py): 10 AdamW steps, 2 micro-batches each.

Tolerance: the runs differ only by float32 rounding (the ranks' gradients are averaged in a
different order than one backward pass sums them; the device's kernels round like the CPU's to
1-2 ulp), which AdamW carries forward step by step; the losses agree to ~1e-6 relative here, and
rtol=1e-4 is the bound asserted (a wrong gradient -- one rank's only, a stale or missing
bucket -- changes the losses by ~1e-2 from the second step on). AdamW is blind to a gradient's
scale (summed instead of averaged), so the first step's gradients are compared too, at the same
tolerance.
"""
from __future__ import annotations

import pytest
import torch

import training_checks as tc
from harness import run_ranks

RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def reference():
    data = tc.batches()
    return (data, *tc.reference_losses(data))


def _ddp(rank, world, data, modes):
    import torch_tpu
    from torch.nn.parallel import DistributedDataParallel as DDP

    out = {}
    for mode in modes:  # one spawn for every mode: starting ranks costs more than training here
        with torch_tpu.eager_mode(mode):
            torch_tpu.metrics.reset()
            # Small buckets: the gradients reduce in several all-reduces, as they are produced.
            ddp = DDP(tc.model().to("tpu"), bucket_cap_mb=0.02, gradient_as_bucket_view=True)
            opt = tc.optimizer(ddp.parameters())
            losses, grads = tc.train_ranks(ddp, opt, data, rank, world, no_sync=ddp.no_sync, full_grads=lambda: {
                k: p.grad.cpu() for k, p in ddp.module.named_parameters()})
            torch.tpu.synchronize()
            weights = {k: v.detach().cpu() for k, v in ddp.module.state_dict().items()}
            out[mode] = losses, grads, weights, torch_tpu.metrics.counters().get("collectives", 0)
    return out


# 2 ranks in both modes; 4 ranks (each a quarter of every micro-batch) in strict mode.
@pytest.mark.parametrize("world,modes", [(2, ("strict", "fused")), (4, ("strict",))], ids=["2ranks", "4ranks"])
def test_ddp_matches_single_process(reference, world, modes):
    data, expected, expected_grads = reference
    out = run_ranks(_ddp, world, args=(data, modes), timeout=300 + 120 * (world - 2))
    for mode in modes:
        for rank in range(world):
            losses, grads, _, collectives = out[rank][mode]
            check_run(f"{mode} rank {rank}", losses, grads, expected, expected_grads)
            assert collectives > 3 * tc.STEPS, collectives  # several buckets per step
        # The replicas stay identical: every rank applied the same averaged gradients.
        for rank in range(1, world):
            for k, v in out[0][mode][2].items():
                assert torch.equal(v, out[rank][mode][2][k]), (mode, rank, k)


def check_run(who, losses, grads, expected, expected_grads):
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), rtol=RTOL, atol=ATOL,
                               msg=lambda m: f"{who} losses: {m}")
    assert grads.keys() == expected_grads.keys()
    for k, g in grads.items():
        torch.testing.assert_close(g, expected_grads[k], rtol=RTOL, atol=ATOL, msg=lambda m: f"{who} grad {k}: {m}")


FSDP_RUNS = (("strict", False), ("fused", False), ("strict", True))  # (mode, bf16 mixed precision)


def _fsdp(rank, world, data):
    import torch_tpu
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    out = {}
    mesh = init_device_mesh("tpu", (world,))
    for mode, mixed in FSDP_RUNS:
        with torch_tpu.eager_mode(mode):
            torch_tpu.metrics.reset()
            m = tc.model().to("tpu")
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else None
            kw = {"mesh": mesh, **({"mp_policy": mp} if mp else {})}
            for block in m.blocks:
                fully_shard(block, reshard_after_forward=True, **kw)  # all-gathered again for backward
            fully_shard(m, **kw)
            opt = tc.optimizer(m.parameters())
            losses, grads = tc.train_ranks(m, opt, data, rank, world, full_grads=lambda: {
                k: p.grad.full_tensor().cpu() for k, p in m.named_parameters()})
            torch.tpu.synchronize()
            shards = {k: (type(p).__name__, tuple(p.to_local().shape)) for k, p in m.named_parameters()}
            out[mode, mixed] = losses, grads, shards, torch_tpu.metrics.counters().get("collectives", 0)
    return out


def test_fsdp2_matches_single_process(reference):
    """float32 (strict and fused modes) at the tolerance above; bf16 mixed precision (bf16
    parameters in forward/backward, float32 gradient reduction and master weights): the losses
    follow the float32 run to bf16 accuracy (~3 significant digits; 2e-2 allows the rounding 10
    steps accumulate), and the gradients point the same way."""
    data, expected, expected_grads = reference
    out = run_ranks(_fsdp, 2, args=(data,), timeout=300)
    for mode, mixed in FSDP_RUNS:
        for rank in range(2):
            losses, grads, shards, collectives = out[rank][mode, mixed]
            # The parameters are sharded: each rank holds half the rows of each.
            assert shards["head.weight"] == ("DTensor", (tc.VOCAB // 2, 32)), shards["head.weight"]
            # per step: an all-gather per block in forward and again in backward, a reduce-scatter
            assert collectives > 5 * tc.STEPS, collectives
            if not mixed:
                check_run(f"{mode} rank {rank}", losses, grads, expected, expected_grads)
                continue
            torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), rtol=2e-2, atol=0)
            for k, g in grads.items():
                assert g.dtype == torch.float32, (k, g.dtype)
                cos = torch.nn.functional.cosine_similarity(g.flatten(), expected_grads[k].flatten(), dim=0)
                assert cos > 0.99, (k, cos)


def _tp(rank, world, data, dp, modes):
    """Tensor parallelism (char_gpt.parallelize) over the mesh's tp dim; with dp > 1, FSDP2 over
    its dp dim too (each dp group trains on its share of every micro-batch)."""
    import torch_tpu
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("tpu", (dp, world // dp), mesh_dim_names=("dp", "tp"))
    out = {}
    for mode in modes:
        with torch_tpu.eager_mode(mode):
            torch_tpu.metrics.reset()
            m = tc.char_gpt.parallelize(tc.model().to("tpu"), mesh["tp"])
            if dp > 1:
                for block in m.blocks:
                    fully_shard(block, mesh=mesh["dp"], shard_placement_fn=tc.char_gpt.fsdp_placement)
                fully_shard(m, mesh=mesh["dp"])
            # Per parameter: the parameters are a mix of DTensors and plain tensors.
            opt = torch.optim.AdamW(m.parameters(), lr=tc.LR, weight_decay=0.01, foreach=False)
            losses, grads = tc.train_ranks(m, opt, data, mesh["dp"].get_local_rank(), dp, full_grads=lambda: {
                k: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).cpu()
                for k, p in m.named_parameters()})
            placements = {k: str(getattr(p, "placements", "plain")) for k, p in m.named_parameters()}
            out[mode] = losses, grads, placements, torch_tpu.metrics.fallback_ops()
    return out


def test_tensor_parallel_matches_single_process(reference):
    """2 ranks, strict and fused: every block's attention heads and MLP features split in two."""
    data, expected, expected_grads = reference
    out = run_ranks(_tp, 2, args=(data, 1, ("strict", "fused")), timeout=300)
    for rank in range(2):
        for mode, (losses, grads, placements, fallbacks) in out[rank].items():
            assert placements["blocks.0.attn.qkv.weight"] == "(_StridedShard(dim=0, sf=3),)", placements
            assert placements["blocks.0.attn.proj.weight"] == "(Shard(dim=1),)", placements
            assert placements["blocks.0.mlp.0.weight"] == "(Shard(dim=0),)", placements
            assert placements["head.weight"] == "plain", placements
            assert not fallbacks, fallbacks
            check_run(f"{mode} rank {rank}", losses, grads, expected, expected_grads)


def test_fsdp_and_tensor_parallel_on_a_2x2_mesh_match_single_process(reference):
    """4 ranks: FSDP2 over dp (2) of the tensor-parallel model over tp (2). full_tensor() of every
    gradient is the single process's gradient, so the 2-D placements are exact."""
    data, expected, expected_grads = reference
    out = run_ranks(_tp, 4, args=(data, 2, ("strict",)), timeout=420)
    for rank in range(4):
        losses, grads, placements, fallbacks = out[rank]["strict"]
        assert placements["blocks.0.attn.qkv.weight"] == "(Shard(dim=1), _StridedShard(dim=0, sf=3))", placements
        assert placements["blocks.0.mlp.2.weight"] == "(Shard(dim=0), Shard(dim=1))", placements
        assert placements["tok_emb.weight"] == "(Shard(dim=0),)", placements  # FSDP only
        assert not fallbacks, fallbacks
        check_run(f"rank {rank}", losses, grads, expected, expected_grads)
