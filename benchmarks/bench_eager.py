"""Eager-mode benchmark: the tpu host executor vs PyTorch's own CPU execution, side by side.

Measures, in one run and with the same thread count for both:
  1. per-op overhead on tiny tensors (strict eager vs PyTorch CPU eager), and
  2. MLP training-step time (forward + backward + AdamW) on the device (strict and debug modes)
     vs PyTorch CPU eager (and, with --inductor, torch.compile's Inductor on the CPU).
All tpu numbers are host-executor measurements (the programs run on this machine's CPU).
`--pjrt` adds the same figures on the pjrt backend (XLA's CPU plugin unless TORCH_TPU_PJRT_PLUGIN
names another), measured in a peer process (benchmarks/_peer.py): its tiny-op loops alternate
with the CPU's and the host's; its MLP rows run after the host's, as each MLP row runs after the
one before.

    python benchmarks/bench_eager.py [--threads 2] [--quick] [--inductor] [--pjrt]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import torch_tpu


def sync(device: str) -> None:
    if device.startswith("tpu"):
        torch.tpu.synchronize()


def time_loop(fn, device: str, iters: int, repeats: int = 5) -> float:
    """Median seconds per iteration over `repeats` timed loops (after a warm-up loop)."""
    for _ in range(max(10, iters // 10)):
        fn()
    sync(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync(device)
        samples.append((time.perf_counter() - start) / iters)
    return statistics.median(samples)


TINY_OPS = {
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "gt": lambda x, y: x > y,
    "where": lambda x, y: torch.where(x > 0, x, y),
    "add_ (in-place)": lambda x, y: x.add_(y),
    "relu": lambda x, y: torch.relu(x),
    "sum": lambda x, y: x.sum(),
    "mm (4x4)": None,
}


def _queue_worker_cpu_ns() -> int | None:
    """CPU time used so far by the device queue's worker threads (Linux /proc), or None."""
    total, found = 0, False
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                if not f.read().startswith("tpu-queue"):
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
                found = True
    except OSError:
        return None
    return total if found else None


def _time_tiny(call, device: str, iters: int) -> tuple[float, float, float | None]:
    """One timed loop: (wall s/op, calling thread's CPU s/op, queue worker's CPU s/op)."""
    w0 = _queue_worker_cpu_ns()
    c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
    for _ in range(iters):
        call()
    sync(device)
    t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
    w1 = _queue_worker_cpu_ns()
    worker = (w1 - w0) / iters / 1e9 if device == "tpu" and w0 is not None and w1 is not None else None
    return (t1 - t0) / iters / 1e9, (c1 - c0) / iters / 1e9, worker


def tiny_call(name: str, device: str):
    """The op `name` of TINY_OPS on fresh tiny tensors of `device`, warmed up."""
    fn = TINY_OPS[name]
    if fn is None:
        a = torch.randn(4, 4, device=device)
        b = torch.randn(4, 4, device=device)
        call = lambda a=a, b=b: torch.mm(a, b)  # noqa: E731
    else:
        x = torch.randn(16, device=device)
        y = torch.rand(16, device=device) + 0.5
        call = lambda fn=fn, x=x, y=y: fn(x, y)  # noqa: E731
    for _ in range(100):
        call()
    sync(device)
    return call


# The pjrt peer's side (benchmarks/_peer.py).
_PEER_CALLS: dict = {}


def remote_time_tiny(name: str, iters: int) -> list:
    if name not in _PEER_CALLS:
        _PEER_CALLS[name] = tiny_call(name, "tpu")
    return list(_time_tiny(_PEER_CALLS[name], "tpu", iters))


def remote_time_mlp(mode: str, iters: int, batch: int) -> float:
    with torch_tpu.eager_mode(mode):
        return time_loop(make_step("tpu", batch), "tpu", iters, repeats=3)


def bench_tiny_ops(iters: int, repeats: int = 7, peer=None) -> list[tuple[str, dict]]:
    """Per-op cost on tiny tensors. CPU and tpu (and pjrt) loops alternate, so load from other
    processes hits them alike; each figure is the median over `repeats` loops."""
    rows = []
    for name in TINY_OPS:
        calls = {device: tiny_call(name, device) for device in ("cpu", "tpu")}
        samples = {"cpu": [], "tpu": [], "pjrt": []}
        for _ in range(repeats):
            for device in ("cpu", "tpu"):
                samples[device].append(_time_tiny(calls[device], device, iters))
            if peer is not None:
                samples["pjrt"].append(peer.call("bench_eager", "remote_time_tiny", name, iters))
        med = lambda xs: statistics.median(xs) if xs and None not in xs else None  # noqa: E731
        rows.append((name, {
            "cpu_wall": med([s[0] for s in samples["cpu"]]), "cpu_thread": med([s[1] for s in samples["cpu"]]),
            "tpu_wall": med([s[0] for s in samples["tpu"]]), "tpu_thread": med([s[1] for s in samples["tpu"]]),
            "tpu_worker": med([s[2] for s in samples["tpu"]]), "pjrt_wall": med([s[0] for s in samples["pjrt"]]),
        }))
    return rows


class MLP(torch.nn.Module):
    def __init__(self, d_in=784, hidden=512, d_out=10):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(d_in, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, d_out))

    def forward(self, x):
        return self.net(x)


def make_step(device: str, batch: int, compiled: bool = False):
    torch.manual_seed(0)
    model = MLP().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 784).to(device)
    y = torch.randint(0, 10, (batch,)).to(device)
    fwd = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def bench_mlp(iters: int, batch: int, inductor: bool, peer=None) -> list[tuple[str, float]]:
    rows = [("PyTorch CPU eager", time_loop(make_step("cpu", batch), "cpu", iters, repeats=3))]
    if inductor:
        rows.append(("PyTorch CPU torch.compile (Inductor)",
                     time_loop(make_step("cpu", batch, compiled=True), "cpu", iters, repeats=3)))
    for mode in ("strict", "fused", "debug"):
        with torch_tpu.eager_mode(mode):
            rows.append((f"tpu {mode} eager (host executor)",
                         time_loop(make_step("tpu", batch), "tpu", iters, repeats=3)))
    if peer is not None:
        for mode in ("strict", "fused"):
            rows.append((f"tpu {mode} eager (pjrt)", peer.call("bench_eager", "remote_time_mlp", mode, iters, batch)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--quick", action="store_true", help="fewer iterations (for CI smoke runs)")
    parser.add_argument("--inductor", action="store_true", help="also time torch.compile (Inductor) on the CPU")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--pjrt", action="store_true", help="also measure the pjrt backend (a peer process)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch_tpu._C._set_num_threads(args.threads)
    op_iters = 2000 if args.quick else 20000
    step_iters = 5 if args.quick else 30

    print(f"torch {torch.__version__}, {args.threads} thread(s) for PyTorch CPU and for the host executor")
    print(f"device: {torch.tpu.get_device_name()} — tpu figures are host-executor measurements")
    peer = None
    if args.pjrt:
        from _peer import Peer

        peer = Peer("pjrt", args.threads)
        print("pjrt: " + peer.call("torch_tpu", "get_device_name") + " — in a peer process")
    print()

    print("Per-op time on tiny tensors (16 floats; 4x4 for mm), microseconds per op")
    print("  wall: elapsed time per op in a loop of the op (then one sync); thread: CPU time of the")
    print("  calling Python thread; worker: CPU time of the device queue's worker thread (the host")
    print(f"  executor runs programs of <= {torch_tpu.config.get('inline_work')} elements on the calling "
          "thread when the queue is idle)")
    pj_head = f" {'pjrt wall':>10} {'ratio':>7}" if peer else ""
    print(f"{'op':<18} {'CPU wall':>9} {'tpu wall':>9} {'ratio':>7} {'CPU thread':>11} {'tpu thread':>11} "
          f"{'tpu worker':>11}" + pj_head)
    ratios, pj_ratios = [], []
    for name, r in bench_tiny_ops(op_iters, peer=peer):
        ratio = r["tpu_wall"] / r["cpu_wall"]
        ratios.append(ratio)
        worker = f"{r['tpu_worker'] * 1e6:>11.2f}" if r["tpu_worker"] is not None else f"{'n/a':>11}"
        pj = ""
        if peer:
            pj_ratios.append(r["pjrt_wall"] / r["cpu_wall"])
            pj = f" {r['pjrt_wall'] * 1e6:>10.2f} {pj_ratios[-1]:>6.2f}x"
        print(f"{name:<18} {r['cpu_wall'] * 1e6:>9.2f} {r['tpu_wall'] * 1e6:>9.2f} {ratio:>6.2f}x "
              f"{r['cpu_thread'] * 1e6:>11.2f} {r['tpu_thread'] * 1e6:>11.2f} {worker}"
              + pj)
    print(f"{'geometric mean':<18} {'':>9} {'':>9} {statistics.geometric_mean(ratios):>6.2f}x  "
          "(target: within 2x of PyTorch CPU eager)"
          + (f"; pjrt {statistics.geometric_mean(pj_ratios):.2f}x" if peer else ""))
    print("  ratio = device time / CPU time per op (below 1: the device's per-op cost is lower)\n")

    print(f"MLP training step (784-512-512-10, batch {args.batch}, AdamW), milliseconds per step")
    rows = bench_mlp(step_iters, args.batch, args.inductor, peer)
    if peer:
        peer.close()
    base = rows[0][1]
    print(f"{'configuration':<40} {'ms/step':>9} {'vs CPU eager':>13}")
    for name, t in rows:
        print(f"{name:<40} {t * 1e3:>9.2f} {t / base:>12.2f}x")
    fb = torch_tpu.metrics.fallback_ops()
    print(f"\nCPU fallback ops during the run: {fb if fb else 'none'}")


if __name__ == "__main__":
    main()
