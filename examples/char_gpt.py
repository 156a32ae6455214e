"""A character-level GPT (minGPT-style): train on a text file, then sample from it.

    python examples/char_gpt.py --device tpu --mode strict --steps 200
    python examples/char_gpt.py --device cpu --steps 200          # the same run on PyTorch CPU
    python examples/char_gpt.py --steps 100 --save gpt.pt && python examples/char_gpt.py --steps 200 --resume gpt.pt

The model is plain PyTorch: the same code runs on any device.
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training import (  # noqa: E402  (what the examples share)
    example_parser, load_checkpoint, parse_example_args, print_run, run_steps, save_checkpoint)

DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"  # present on every Debian system
SHIPPED_TEXT = os.path.join(os.path.dirname(__file__), "data", "tiny.txt")


@dataclass
class GPTConfig:
    vocab_size: int = 96
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.1


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, cfg.block_size, cfg.block_size), persistent=False)

    def forward(self, x):
        B, T, _ = x.shape
        # The widths come from qkv's output, not from x: under tensor parallelism (parallelize())
        # a rank's qkv yields its own heads' q, k and v, and self.n_head counts those heads.
        q, k, v = self.qkv(x).chunk(3, dim=2)
        hd = q.size(-1) // self.n_head
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, -1)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd), nn.Dropout(cfg.dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0, greedy: bool = False,
                 generator: torch.Generator | None = None):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.cfg.block_size:])
            logits = logits[:, -1, :] / temperature
            if greedy:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                # Sampling happens on the host: one small distribution per step.
                probs = F.softmax(logits.float(), dim=-1).cpu()
                nxt = torch.multinomial(probs, 1, generator=generator).to(idx.device)
            idx = torch.cat([idx, nxt], dim=1)
        return idx


def parallelize(model: GPT, tp_mesh) -> GPT:
    """Tensor parallelism over `tp_mesh` (a 1-D DeviceMesh), the Megatron plan: each block's
    qkv and first MLP layer column-wise (a rank computes its heads and its hidden features),
    proj and the second MLP layer row-wise (a partial sum, all-reduced). Embeddings, norms and
    the head stay replicated. qkv holds q, k and v side by side, so a plain column split would
    give rank 0 all of q and half of k: it is split per part instead (_fused_colwise)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    tp = tp_mesh.size()
    if model.cfg.n_head % tp:
        raise ValueError(f"{model.cfg.n_head} heads do not split over {tp} tensor-parallel ranks")
    for block in model.blocks:
        parallelize_module(block, tp_mesh, {
            "attn.qkv": _fused_colwise(3), "attn.proj": RowwiseParallel(),
            "mlp.0": ColwiseParallel(), "mlp.2": RowwiseParallel(),
        })
        block.attn.n_head //= tp  # this rank's heads
    return model


def fsdp_placement(param):
    """shard_placement_fn for fully_shard() of a parallelize()d GPT: FSDP2 shards the fused qkv
    weight along dim 1, because its tensor-parallel split of dim 0 is per part (a _StridedShard)
    and a second split of that dim has no exact placement. Every other parameter: FSDP's default."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.placement_types import _StridedShard

    strided = any(isinstance(p, _StridedShard) for p in getattr(param, "placements", ()))
    return Shard(1) if strided else None


def _fused_colwise(parts: int):
    from torch.distributed.tensor import Replicate, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel
    from torch.distributed.tensor.placement_types import _StridedShard

    class FusedColwise(ColwiseParallel):
        """ColwiseParallel for a Linear whose output is `parts` projections side by side: every
        part is split across the ranks (a _StridedShard of the rows), so a rank's local output is
        its share of each part, side by side, and full_tensor() is the unsplit weight."""

        def __init__(self, parts: int):
            super().__init__()
            self.parts = parts

        def _partition_linear_fn(self, name, module, device_mesh):
            # The bias stays replicated (each rank adds its slices; its gradient is all-gathered):
            # a 1-D strided shard could not be sharded again by FSDP2 with exact placements.
            for pname, p in module.named_parameters():
                placement = [_StridedShard(0, split_factor=self.parts) if p.dim() == 2 else Replicate()]
                module.register_parameter(pname, nn.Parameter(
                    distribute_tensor(p, device_mesh, placement, src_data_rank=self.src_data_rank),
                    requires_grad=p.requires_grad))

        @staticmethod
        def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
            # The output is split per part along its last dim, as the weight's rows are: the local
            # tensor is what the next (per-head) computation needs. No redistribution.
            return outputs.to_local() if use_local_output else outputs

    return FusedColwise(parts)


class CharData:
    def __init__(self, path: str | None = None):
        for candidate in (path, DEFAULT_TEXT, SHIPPED_TEXT):
            if candidate and os.path.exists(candidate):
                self.path = candidate
                break
        else:
            raise FileNotFoundError(f"no training text found (tried {path}, {DEFAULT_TEXT}, {SHIPPED_TEXT})")
        with open(self.path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def batch(self, batch_size: int, block_size: int, generator: torch.Generator):
        ix = torch.randint(len(self.data) - block_size - 1, (batch_size,), generator=generator)
        x = torch.stack([self.data[i:i + block_size] for i in ix])
        y = torch.stack([self.data[i + 1:i + block_size + 1] for i in ix])
        return x, y

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)


def train(device: str, steps: int, batch_size: int = 16, seed: int = 0, cfg: GPTConfig | None = None,
          data: CharData | None = None, progress: bool = True, lr: float = 3e-3, save: str | None = None,
          resume: str | None = None):
    """Trains from a fixed seed up to step `steps` (from the checkpoint's step when resuming);
    returns (model, losses of the steps run here, seconds per step after warm-up)."""
    data = data or CharData()
    cfg = cfg or GPTConfig(vocab_size=data.vocab_size)
    torch.manual_seed(seed)
    model = GPT(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    start = load_checkpoint(resume, dataclasses.asdict(cfg), model, opt, gen) if resume else 0

    def step_fn(step):
        x, y = data.batch(batch_size, cfg.block_size, gen)
        _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    losses, sec = run_steps(step_fn, start, steps, f"train on {device}", batch_size * cfg.block_size, "tok",
                            progress, warmup=5)
    if save:
        save_checkpoint(save, dataclasses.asdict(cfg), model, opt, max(start, steps), gen)
    return model, losses, sec


def main() -> None:
    p = example_parser(__doc__, checkpoints=True)
    p.add_argument("--steps", type=int, default=200, help="train up to this step (counted from 0)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--text", default=None, help=f"training text (default {DEFAULT_TEXT})")
    p.add_argument("--sample", type=int, default=200, help="characters to sample after training")
    args = parse_example_args(p)
    data = CharData(args.text)
    model, losses, sec = train(args.device, args.steps, args.batch_size, data=data, save=args.save,
                               resume=args.resume)
    print_run(f"GPT: {sum(p.numel() for p in model.parameters()):,} parameters", losses, sec,
              args.batch_size * model.cfg.block_size, "tokens", args.save)
    start = torch.tensor([[data.stoi.get("\n", 0)]], device=args.device)
    out = model.eval().generate(start, args.sample, generator=torch.Generator().manual_seed(0))
    print(data.decode(out[0].tolist()))


if __name__ == "__main__":
    main()
