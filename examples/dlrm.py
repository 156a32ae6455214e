"""DLRM (a deep learning recommendation model) trained on synthetic click data.

    python examples/dlrm.py --device tpu --mode strict --steps 300
    python examples/dlrm.py --device cpu --steps 300          # the same run on PyTorch CPU

The model is Naumov et al.'s DLRM: dense features go through a bottom MLP; every sparse
(categorical, multi-hot) feature is an EmbeddingBag that sums the embeddings of the categories
in its bag; the pairwise dot products of all these vectors (one batched matmul) and the bottom
MLP's output feed a top MLP that predicts the click logit, trained with BCE-with-logits.

The clicks come from a hidden "true" model with per-category effects and one pairwise
interaction, so a model that learns the embeddings beats the base rate clearly. Batches are
made by a DataLoader (in worker processes with --workers) and, on the tpu device, moved there
ahead of time by torch_tpu.data.DeviceLoader.

Static shapes: a batch's bags hold 1..max_bag categories each, so the number of indices varies
from batch to batch. Each feature's index list is padded to its capacity (batch_size * max_bag)
with index 0 at weight 0 (EmbeddingBag's per_sample_weights; the padding joins the last bag and
adds exactly nothing, forward or backward): every batch has the same shapes, and a training loop
runs the same programs every step instead of compiling one per index count.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Subset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training import (  # noqa: E402  (what the examples share)
    example_parser, load_checkpoint, parse_example_args, print_run, run_steps, save_checkpoint)


@dataclass
class DLRMConfig:
    num_dense: int = 13
    cardinalities: list[int] = field(default_factory=lambda: [1000, 500, 300, 200, 100, 50, 20, 10])
    embedding_dim: int = 16
    bottom_mlp: list[int] = field(default_factory=lambda: [64, 32])  # then embedding_dim
    top_mlp: list[int] = field(default_factory=lambda: [64, 32])     # then 1 (the logit)
    max_bag: int = 3  # each sparse feature holds 1..max_bag categories per sample


def mlp(sizes: list[int], last_activation: bool) -> nn.Sequential:
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, cfg: DLRMConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.embedding_dim
        self.bottom = mlp([cfg.num_dense, *cfg.bottom_mlp, d], last_activation=True)
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(n, d, mode="sum") for n in cfg.cardinalities)
        n_vectors = len(cfg.cardinalities) + 1
        li, lj = torch.tril_indices(n_vectors, n_vectors, offset=-1)  # each unordered pair once
        self.register_buffer("pair_i", li, persistent=False)
        self.register_buffer("pair_j", lj, persistent=False)
        self.top = mlp([d + len(li), *cfg.top_mlp, 1], last_activation=False)
        for emb in self.embeddings:
            nn.init.uniform_(emb.weight, -(emb.num_embeddings ** -0.5), emb.num_embeddings ** -0.5)

    def forward(self, dense, sparse):
        """dense (B, num_dense); sparse: per feature (indices, offsets[, per_sample_weights]) of its
        bags. -> logits (B,)"""
        x = self.bottom(dense)
        vectors = [x] + [emb(*bags) for emb, bags in zip(self.embeddings, sparse)]
        t = torch.stack(vectors, dim=1)                # (B, F + 1, d)
        z = torch.bmm(t, t.transpose(1, 2))            # (B, F + 1, F + 1): all pairwise dot products
        pairs = z[:, self.pair_i, self.pair_j]         # (B, (F + 1) F / 2)
        return self.top(torch.cat([x, pairs], dim=1)).squeeze(1)


# ---- synthetic click data ------------------------------------------------------------------------

class SyntheticClicks(Dataset):
    """Batch i is a pure function of (seed, i): reproducible, and safe in DataLoader workers.

    A sample's click probability is sigmoid(dense . w + sum of its categories' effects + an
    interaction between features 0 and 1 + bias), with effects drawn once from `seed`."""

    def __init__(self, cfg: DLRMConfig, batch_size: int, num_batches: int, seed: int = 0):
        self.cfg, self.batch_size, self.num_batches, self.seed = cfg, batch_size, num_batches, seed
        g = torch.Generator().manual_seed(seed)
        self.w_dense = torch.randn(cfg.num_dense, generator=g) * 0.5
        self.effects = [torch.randn(n, generator=g) * 0.8 for n in cfg.cardinalities]
        self.factors = [torch.randn(cfg.cardinalities[k], 4, generator=g) * 0.7 for k in (0, 1)]
        self.bias = -0.5

    def __len__(self) -> int:
        return self.num_batches

    def __getitem__(self, i: int):
        if not 0 <= i < self.num_batches:
            raise IndexError(i)
        cfg, B = self.cfg, self.batch_size
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i + 1)
        dense = torch.randn(B, cfg.num_dense, generator=g)
        logit = dense @ self.w_dense + self.bias
        sparse, firsts = [], []
        for k, n in enumerate(cfg.cardinalities):
            lengths = torch.randint(1, cfg.max_bag + 1, (B,), generator=g)
            # Zipf-like popularity: small ids are frequent, as in real categorical data.
            idx = (torch.rand(int(lengths.sum()), generator=g) ** 2 * n).long()
            offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
            bag = torch.repeat_interleave(torch.arange(B), lengths)
            logit += torch.zeros(B).index_add_(0, bag, self.effects[k][idx]) / lengths
            firsts.append(idx[offsets])  # the first category of each bag
            pad = B * cfg.max_bag - idx.numel()
            weights = torch.cat([torch.ones(idx.numel()), torch.zeros(pad)])
            sparse.append((torch.cat([idx, torch.zeros(pad, dtype=torch.long)]), offsets, weights))
        # An interaction the model can only get from its pairwise dot products.
        logit += (self.factors[0][firsts[0]] * self.factors[1][firsts[1]]).sum(1)
        labels = torch.bernoulli(torch.sigmoid(logit), generator=g)
        return dense, sparse, labels


def make_loader(cfg: DLRMConfig, batch_size: int, num_batches: int, seed: int, workers: int = 0, start: int = 0):
    # batch_size=None: the dataset already yields whole batches (bags of different lengths do not
    # stack with the default collate). Batch i depends only on (seed, i): a resumed run starts at
    # the checkpoint's step and sees the same batches as an uninterrupted one.
    data = Subset(SyntheticClicks(cfg, batch_size, num_batches, seed), range(start, num_batches))
    return DataLoader(data, batch_size=None, shuffle=False, num_workers=workers, persistent_workers=workers > 0)


def on_device(loader, device: str):
    if device == "cpu":
        return loader
    import torch_tpu.data
    return torch_tpu.data.DeviceLoader(loader, device)


# ---- training ------------------------------------------------------------------------------------

def train(device: str, steps: int, batch_size: int = 128, cfg: DLRMConfig | None = None, lr: float = 1e-2,
          seed: int = 0, workers: int = 0, progress: bool = True, save: str | None = None,
          resume: str | None = None):
    """Trains up to step `steps` (from the checkpoint's step when resuming). Returns (model, losses
    of the steps run here, seconds per step after warm-up)."""
    cfg = cfg or DLRMConfig()
    torch.manual_seed(seed)
    model = DLRM(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    start = load_checkpoint(resume, dataclasses.asdict(cfg), model, opt) if resume else 0
    batches = iter(on_device(make_loader(cfg, batch_size, steps, seed, workers, start), device))

    def step_fn(step):
        dense, sparse, labels = next(batches)
        loss = F.binary_cross_entropy_with_logits(model(dense, sparse), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    losses, sec = run_steps(step_fn, start, steps, f"train {device}", batch_size, "samples", progress,
                            loss_digits=4, warmup=5)
    if save:
        save_checkpoint(save, dataclasses.asdict(cfg), model, opt, max(start, steps))
    return model, losses, sec


@torch.no_grad()
def evaluate(model: DLRM, device: str, batch_size: int = 1024, batches: int = 4, seed: int = 0):
    """Held-out batches (indices past the training ones): log loss, accuracy and the log loss of
    always predicting the base rate."""
    data = SyntheticClicks(model.cfg, batch_size, 10**6, seed)
    loss = acc = base = 0.0
    for i in range(batches):
        dense, sparse, labels = data[10**6 - 1 - i]
        logits = model(dense.to(device), [tuple(t.to(device) for t in bags) for bags in sparse]).cpu()
        loss += F.binary_cross_entropy_with_logits(logits, labels).item() / batches
        acc += ((logits > 0).float() == labels).float().mean().item() / batches
        rate = labels.mean().clamp(1e-6, 1 - 1e-6)
        base += F.binary_cross_entropy(rate.expand_as(labels), labels).item() / batches
    return loss, acc, base


def main() -> None:
    p = example_parser(__doc__, checkpoints=True)
    p.add_argument("--steps", type=int, default=300, help="train up to this step (counted from 0)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    args = parse_example_args(p)
    model, losses, sec = train(args.device, args.steps, args.batch_size, lr=args.lr, workers=args.workers,
                               save=args.save, resume=args.resume)
    k = max(1, len(losses) // 10)
    mean = f"train loss {losses[0]:.4f} -> {sum(losses[-k:]) / k:.4f}" if losses else None
    print_run(f"DLRM: {sum(p.numel() for p in model.parameters()):,} parameters", losses, sec, args.batch_size,
              "samples", args.save, loss_text=mean)
    loss, acc, base = evaluate(model.eval(), args.device)
    print(f"held-out: log loss {loss:.4f} (base rate {base:.4f}), accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
