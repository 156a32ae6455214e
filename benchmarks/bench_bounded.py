"""Bounded dynamic sizes under torch.compile(backend="tpu") (README "torch.compile", Note [Bounded
dims] in torch_tpu/compile/_bounded.py): a GPT train step (forward + backward) at several sequence
lengths, compiled per size (dynamic=False) and compiled once for a bound
(mark_dynamic(idx, 1, min=2, max=BOUND)), with PyTorch CPU eager beside them, same thread count,
one process.

For each length it prints the first call (which compiles, for a per-size graph) and the steady step
(best of --steps). Per-size compiles a program for every new length; the bounded graph compiled
its two programs (forward, backward) at the first length and runs every later one at the bound.

    python benchmarks/bench_bounded.py --threads 2
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch._dynamo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--bound", type=int, default=64)
    p.add_argument("--lengths", default="64,48,32,16", help="comma-separated sequence lengths (<= --bound)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    import torch_tpu
    from char_gpt import GPT, GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=4, n_embd=128, n_head=4, dropout=0.0, block_size=args.bound + 1)
    cpu = GPT(cfg)
    dev = GPT(cfg).to("tpu")
    dev.load_state_dict(cpu.state_dict())
    lengths = [int(x) for x in args.lengths.split(",")]

    def loss_of(m, idx, tgt):
        return m(idx, tgt)[1]

    def batch(T, device, bound=None):
        g = torch.Generator().manual_seed(T)
        idx = torch.randint(0, cfg.vocab_size, (args.batch, T), generator=g).to(device)
        tgt = torch.randint(0, cfg.vocab_size, (args.batch, T), generator=g).to(device)
        if bound:
            torch._dynamo.mark_dynamic(idx, 1, min=2, max=bound)
            torch._dynamo.mark_dynamic(tgt, 1, min=2, max=bound)
        return idx, tgt

    def step(fn, model, idx, tgt) -> float:
        t0 = time.perf_counter()
        loss = fn(model, idx, tgt)
        loss.backward()
        loss.item()
        if idx.device.type == "tpu":
            torch.tpu.synchronize()
        return time.perf_counter() - t0

    def measure(fn, model, device, bound=None):
        rows = {}
        for T in lengths:
            idx, tgt = batch(T, device, bound)
            first = step(fn, model, idx, tgt)
            best = min(step(fn, model, idx, tgt) for _ in range(args.steps))
            rows[T] = (first, best)
        return rows

    results = {"cpu eager": measure(loss_of, cpu, "cpu")}
    torch._dynamo.reset()
    results["tpu per size"] = measure(torch.compile(loss_of, backend="tpu", dynamic=False), dev, "tpu")
    per_size = torch_tpu.compile.stats()["captures"]
    torch._dynamo.reset()
    torch_tpu.compile.reset_stats()
    results["tpu bounded"] = measure(torch.compile(loss_of, backend="tpu"), dev, "tpu", args.bound)
    bounded = torch_tpu.compile.stats()

    print(f"GPT 4 layers d=128, batch {args.batch}, train step (forward + backward), {args.threads} threads; "
          f"bound {args.bound}; ms (first call / best of {args.steps})")
    head = f"{'length':>6} | " + " | ".join(f"{k:>21}" for k in results) + " | bounded / per size"
    print(head)
    print("-" * len(head))
    for T in lengths:
        cells = [f"{results[k][T][0] * 1e3:9.1f} / {results[k][T][1] * 1e3:9.1f}" for k in results]
        ratio = results["tpu bounded"][T][1] / results["tpu per size"][T][1]
        print(f"{T:>6} | " + " | ".join(f"{c:>21}" for c in cells) + f" | {ratio:.2f}x")
    print(f"programs captured: per size {per_size}, bounded {bounded['captures']} "
          f"(padded graphs: {bounded['padded_graphs']})")


if __name__ == "__main__":
    main()
