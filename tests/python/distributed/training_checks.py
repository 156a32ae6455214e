"""Data-parallel training of the example GPT (examples/char_gpt.py) on tpu ranks, and the same
training in one process on PyTorch's CPU, for test_training_parallel.py.

Every step takes a global batch of GLOBAL rows in MICRO micro-batches; each rank trains on its
1/world share of every micro-batch. The losses are means over rows, so the mean of the ranks'
losses is the global batch's loss, and the gradient averaged over the ranks (DDP's and FSDP2's
default) is the single process's gradient: the runs follow the same trajectory, up to float32
rounding (summation order in the reductions, the device's kernels vs the CPU's).
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples"))
import char_gpt  # noqa: E402

STEPS, GLOBAL, MICRO, BLOCK, VOCAB = 10, 8, 2, 16, 50
LR = 3e-3


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = char_gpt.GPTConfig(vocab_size=VOCAB, block_size=BLOCK, n_layer=2, n_head=2, n_embd=32, dropout=0.0)
    return char_gpt.GPT(cfg)


def batches():
    """STEPS x MICRO micro-batches (x, y) of GLOBAL rows each, on the CPU."""
    g = torch.Generator().manual_seed(5)
    out = []
    for _ in range(STEPS):
        micro = []
        for _ in range(MICRO):
            x = torch.randint(0, VOCAB, (GLOBAL, BLOCK), generator=g)
            micro.append((x, torch.roll(x, -1, dims=1)))
        out.append(micro)
    return out


def optimizer(params):
    return torch.optim.AdamW(params, lr=LR, weight_decay=0.01)


def reference_losses(data):
    """One process on the CPU: per step, the mean of its micro-batches' losses; and the first
    step's gradients (AdamW does not see a gradient's scale: these do)."""
    m = model()
    opt = optimizer(m.parameters())
    losses, grads = [], None
    for micro in data:
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for x, y in micro:
            _, loss = m(x, y)
            (loss / MICRO).backward()
            total += loss.item() / MICRO
        if grads is None:
            grads = {k: p.grad.clone() for k, p in m.named_parameters()}
        opt.step()
        losses.append(total)
    return losses, grads


def shard(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    n = x.shape[0] // world
    return x[rank * n:(rank + 1) * n]


def train_ranks(wrapped, opt, data, rank, world, full_grads, no_sync=None):
    """Trains `wrapped` on this rank's shares; returns the global loss of each step (the mean over
    ranks of the local losses, all-reduced on the device) and the first step's gradients as
    `full_grads()` gives them (name -> CPU tensor). `no_sync`: a context manager that skips
    gradient synchronization, used for every micro-batch but the last (DDP's no_sync)."""
    import contextlib

    import torch.distributed as dist

    losses, grads = [], None
    for micro in data:
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device="tpu")
        for i, (x, y) in enumerate(micro):
            ctx = no_sync() if no_sync is not None and i + 1 < len(micro) else contextlib.nullcontext()
            with ctx:
                _, loss = wrapped(shard(x, rank, world).to("tpu"), shard(y, rank, world).to("tpu"))
                (loss / MICRO).backward()
            total = total + loss.detach() / MICRO
        if grads is None:
            grads = full_grads()
        opt.step()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        losses.append(total.item())
    return losses, grads
