"""Soak: a long training loop over many input shapes, watching the process's memory.

    python benchmarks/bench_soak.py [--steps 20000] [--shapes 1000] [--mode strict] [--reports 10]

An MLP (64 -> 256 -> 64, SGD) trains on batches whose row count cycles through `--shapes`
different values (a permuted order, so every shape recurs every `--shapes` steps). Each shape is
a new set of programs: with 1,000 shapes the loop needs far more programs than the in-process
compile cache keeps (option cache_size), so it evicts and recompiles all the time -- the case
where leaks in the compile cache, the executables, the allocator or the queue would show. The
table prints, at evenly spaced steps: resident memory (VmRSS), the device's reserved and
allocated memory (now, and the peak since the previous row: a loop that syncs rarely must not
keep its queued tasks' dead tensors), compiles so far and the cache's size; the last line compares resident memory at
the end with the first report after warm-up (flat: the growth is a few MiB at most).
"""
from __future__ import annotations

import argparse
import time

import torch

import torch_tpu


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--shapes", type=int, default=1000)
    p.add_argument("--mode", default="strict", choices=["strict", "fused", "debug"])
    p.add_argument("--reports", type=int, default=10, help="rows of the table")
    args = p.parse_args()

    torch_tpu.set_eager_mode(args.mode)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    every = max(1, args.steps // args.reports)
    print(f"soak: {args.steps:,} steps, {args.shapes:,} shapes, {args.mode} mode, "
          f"compile cache {torch_tpu.config.get('cache_size')} programs")
    print(f"{'step':>7} {'RSS MiB':>9} {'reserved MiB':>13} {'allocated MiB':>14} {'peak alloc MiB':>15} "
          f"{'compiles':>9} {'cached':>7} {'s':>7}")
    rows = []
    t0 = time.perf_counter()
    for step in range(args.steps):
        n = 16 + (step * 7919) % args.shapes * 4
        x = torch.randn(n, 64, device="tpu")
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % every == 0 or step == args.steps - 1:
            loss.item()
            torch.tpu.synchronize()
            c = torch_tpu.metrics.counters()
            row = (step, rss_mib(), torch.tpu.memory_reserved() / 2**20, torch.tpu.memory_allocated() / 2**20,
                   c.get("compiles", 0), torch_tpu._C.compile_cache_size(), time.perf_counter() - t0,
                   torch.tpu.max_memory_allocated() / 2**20)
            torch.tpu.reset_peak_memory_stats()
            rows.append(row)
            print(f"{row[0]:>7} {row[1]:>9.0f} {row[2]:>13.1f} {row[3]:>14.2f} {row[7]:>15.2f} {row[4]:>9,} "
                  f"{row[5]:>7,} {row[6]:>7.0f}", flush=True)
    torch.tpu.empty_cache()
    print(f"after empty_cache(): reserved {torch.tpu.memory_reserved() / 2**20:.1f} MiB, RSS {rss_mib():.0f} MiB")
    if len(rows) >= 3:
        first = rows[1]  # after the first interval: imports, first compiles and pools are warm
        print(f"RSS from step {first[0]} to step {rows[-1][0]}: {first[1]:.0f} -> {rows[-1][1]:.0f} MiB "
              f"({rows[-1][1] - first[1]:+.0f} MiB over {rows[-1][0] - first[0]:,} steps)")


if __name__ == "__main__":
    main()
