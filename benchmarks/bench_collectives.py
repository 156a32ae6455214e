"""Collective bandwidth: torch_tpu's c10d backend on tpu tensors vs Gloo on CPU tensors, side by
side in one run (one process group "cpu:gloo,tpu:tpu": CPU tensors go to Gloo, tpu tensors to
the tpu backend), on N ranks of this host (spawned processes).

    python benchmarks/bench_collectives.py [--world 2] [--min 4K] [--max 64M] [--transport shm|gloo]

For each size S (bytes, float32, 4 KiB .. 64 MiB in steps of 4x):
  all_reduce(SUM) of an S-byte tensor on every rank, and all_gather_into_tensor to an S-byte
  output (S / N bytes from each rank), as nccl-tests sizes them.
Time: the median over repeats of (issue `iters` collectives, then wait for the last: for tpu,
torch.tpu.synchronize(); Gloo's are synchronous), per collective, the slowest rank's. Reported:
algorithm bandwidth S / time, and bus bandwidth (all-reduce x 2(N-1)/N, all-gather x (N-1)/N),
which is comparable across N. The tpu figures include what a device collective does on the host
executor: the device-to-host and host-to-device copies around the exchange (device memory is
opaque; Note [Collectives on the device queue]).
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import tempfile
import time

import torch
import torch.multiprocessing as mp


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def fmt_size(n: int) -> str:
    for unit, v in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= v:
            return f"{n // v} {unit}"
    return f"{n} B"


def measure(fn, sync, iters: int, repeats: int) -> float:
    import torch.distributed as dist

    fn()  # warm up (and, on tpu, compile what the collective's copies need)
    sync()
    samples = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / iters)
    t = torch.tensor([statistics.median(samples)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # on Gloo (a CPU tensor): the slowest rank
    return t.item()


def worker(rank, world, init_file, sizes, transport, results):
    os.environ["TORCH_TPU_DIST_TRANSPORT"] = transport
    import torch.distributed as dist

    import torch_tpu  # noqa: F401

    dist.init_process_group("cpu:gloo,tpu:tpu", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    rows = []
    for size in sizes:
        n = size // 4
        iters = max(3, min(200, (64 << 20) // size))
        repeats = 5 if size < (16 << 20) else 3
        for device in ("tpu", "cpu"):
            sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
            x = torch.ones(n, device=device)
            t_ar = measure(lambda: dist.all_reduce(x), sync, iters, repeats)
            inp = torch.ones(n // world, device=device)
            out = torch.empty(n // world * world, device=device)
            t_ag = measure(lambda: dist.all_gather_into_tensor(out, inp), sync, iters, repeats)
            if device == "tpu":  # the results are right, too
                torch.testing.assert_close(out.cpu(), torch.ones(out.numel()))
            rows.append((size, device, t_ar, t_ag))
    if rank == 0:
        results.put(rows)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--min", default="4K")
    p.add_argument("--max", default="64M")
    p.add_argument("--transport", default="shm", choices=["shm", "gloo"], help="the tpu backend's transport")
    args = p.parse_args()
    sizes = []
    s = parse_size(args.min)
    while s <= parse_size(args.max):
        sizes.append(s)
        s *= 4
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "store")
        procs = [ctx.Process(target=worker, args=(r, args.world, init, sizes, args.transport, results))
                 for r in range(args.world)]
        for pr in procs:
            pr.start()
        rows = results.get(timeout=3600)
        for pr in procs:
            pr.join()
    w = args.world
    print(f"{w} ranks on one host; tpu backend transport: {args.transport}; float32; "
          f"bus GB/s (algorithm GB/s), slowest rank")
    print(f"{'size':>8} | {'all_reduce tpu':>20} {'gloo (cpu)':>20} {'x':>5} | "
          f"{'all_gather tpu':>20} {'gloo (cpu)':>20} {'x':>5}")
    by = {(size, dev): (ar, ag) for size, dev, ar, ag in rows}
    for size in sizes:
        tar, tag = by[size, "tpu"]
        gar, gag = by[size, "cpu"]

        def bw(t, factor):
            alg = size / t / 1e9
            return f"{alg * factor:7.2f} ({alg:6.2f})"

        print(f"{fmt_size(size):>8} | {bw(tar, 2 * (w - 1) / w):>20} {bw(gar, 2 * (w - 1) / w):>20} "
              f"{gar / tar:5.1f} | {bw(tag, (w - 1) / w):>20} {bw(gag, (w - 1) / w):>20} {gag / tag:5.1f}")


if __name__ == "__main__":
    main()
