"""Kernel families on the tpu device (host executor) vs PyTorch CPU, side by side in one run.

    python benchmarks/bench_kernels.py [--threads 2] [--quick] [--only softmax,matmul]

Each case is one op (or a fixed chain, or forward + backward) at a size taken from the example
models (examples/*.py at their default sizes: char_gpt, llama, resnet, dlrm, ddpm) or a large size
(>= 8 MiB of input). Device time: a loop of the op ending in torch.tpu.synchronize() (the queue runs
asynchronously), divided by the loop's length; nothing is subtracted, so the eager per-op cost
(lowering, cache lookup, queueing) is included, as it is in PyTorch's own time. Each side runs in
its own process, pinned to the same --threads CPUs, and the two take turns loop by loop (so a load
from other processes hits both alike; the table shows medians), with a pause of --settle-ms between
turns: a thread pool that just finished a loop keeps spinning for a while (PyTorch's OpenMP threads
for milliseconds), and in one process, or without the pause, that spinning would take CPU time from
the other side's next loop. Each timed loop follows an untimed third of a loop of the same op: on
this VM, single-threaded code that starts after a pause of 10 ms or more runs up to 2x slower for
its first few milliseconds (PyTorch and the host executor alike), and a loop timed from a cold
start would time that ramp rather than the op. (With 2 threads the host executor also stays slow
for longer after such a pause; that is the runtime's, and it shows in the tpu column. It was up to
2x for tens of milliseconds while the scheduler kept its two threads on one core, Note [Unstacking
the pool]; since, a batch of 15 gelus over (4096, 1024) after a 50 ms pause takes 1.47-1.54 ms
each, against PyTorch's 1.21-1.23 and 0.78-0.81 back to back; and a helper that was blocked when a
kernel started was queued behind the thread that woke it until Note [Steering a sleeping helper]:
a loop of 9 layer norms over (4096, 1024) after each 20 ms pause took 1.7-1.8 ms a kernel, now
0.9-1.2.) PyTorch and the host executor run
with the same thread count
(torch.set_num_threads and TORCH_TPU_NUM_THREADS).

bandwidth: the machine's copy bandwidth, measured as a 256 MiB torch.Tensor.copy_ on the CPU
((bytes read + bytes written) / time). For memory-bound cases `bw%` is the device's achieved
(bytes read + bytes written) / time as a fraction of it; bytes are the op's compulsory traffic
(inputs read once, outputs written once). ratio = CPU time / tpu time (above 1: the device is
faster). The tpu figures are host-executor measurements: its programs run on this machine's CPU.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional


def _threads_from_argv() -> int:
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 2


# The executor's pool is sized when torch_tpu loads (autoloaded by `import torch`).
os.environ["TORCH_TPU_NUM_THREADS"] = str(_threads_from_argv())

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_tpu  # noqa: E402

MiB = 1 << 20


@dataclass
class Case:
    family: str
    name: str
    build: Callable[[str], Callable[[], object]]  # device -> a closure running the op once
    nbytes: int = 0  # compulsory traffic when memory-bound, else 0


def _sync(device: str) -> None:
    if device == "tpu":
        torch.tpu.synchronize()


def _rand(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


def _on(device, *ts):
    return [t.to(device) for t in ts]


def nb(*shapes_dtypes) -> int:
    total = 0
    for shape, dt in shapes_dtypes:
        n = 1
        for s in shape:
            n *= s
        total += n * torch.empty((), dtype=dt).element_size()
    return total


# ---- cases --------------------------------------------------------------------------------------

def softmax_case(shape, log=False, dtype=torch.float32, label=""):
    fn = F.log_softmax if log else F.softmax

    def build(dev):
        (x,) = _on(dev, _rand(shape, dtype))
        return lambda: fn(x, dim=-1)
    fam = "log_softmax" if log else "softmax"
    return Case(fam, f"{label} {tuple(shape)} {str(dtype)[6:]}", build, nb((shape, dtype), (shape, dtype)))


def layer_norm_case(shape, label=""):
    def build(dev):
        x, w, b = _on(dev, _rand(shape), _rand(shape[-1:], seed=1), _rand(shape[-1:], seed=2))
        return lambda: F.layer_norm(x, shape[-1:], w, b)
    return Case("layer_norm", f"{label} {tuple(shape)}", build, nb((shape, torch.float32), (shape, torch.float32)))


def rms_norm_case(shape, label=""):
    def build(dev):
        x, w = _on(dev, _rand(shape), _rand(shape[-1:], seed=1))
        return lambda: F.rms_norm(x, shape[-1:], w, 1e-5)
    return Case("rms_norm", f"{label} {tuple(shape)}", build, nb((shape, torch.float32), (shape, torch.float32)))


def cross_entropy_case(shape, label=""):
    def build(dev):
        logits = _rand(shape).to(dev).requires_grad_(True)
        y = torch.randint(0, shape[-1], shape[:1], generator=torch.Generator().manual_seed(3)).to(dev)

        def run():
            loss = F.cross_entropy(logits, y)
            return torch.autograd.grad(loss, logits)
        return run
    # forward reads the logits; backward reads them (or the saved log-probs) and writes the grad
    return Case("cross_entropy", f"{label} {tuple(shape)} fwd+bwd", build,
                nb((shape, torch.float32), (shape, torch.float32), (shape, torch.float32)))


def reduce_case(op, shape, dim, label=""):
    def build(dev):
        (x,) = _on(dev, _rand(shape))
        if op == "sum":
            return lambda: x.sum(dim)
        if op == "mean":
            return lambda: x.mean(dim)
        if op == "var":
            return lambda: x.var(dim)
        return lambda: x.argmax(dim)
    where = "last" if dim in (-1, len(shape) - 1) else f"dim {dim}"
    return Case(op, f"{label} {tuple(shape)} {where}", build, nb((shape, torch.float32)))


def elementwise_case(kind, shape, dtype=torch.float32, label=""):
    def build(dev):
        x, y, z = _on(dev, _rand(shape, dtype), _rand(shape, dtype, 1), _rand(shape, dtype, 2))
        if kind == "gelu":
            return lambda: F.gelu(x)
        if kind == "addcmul":
            return lambda: torch.addcmul(x, y, z, value=0.5)
        return lambda: (x * y + z).relu()  # three ops: three programs in strict mode
    nio = {"gelu": 2, "addcmul": 4, "mul_add_relu": 8}[kind]  # tensors read + written (each op)
    return Case("elementwise", f"{label} {kind} {tuple(shape)} {str(dtype)[6:]}", build,
                nio * nb((shape, dtype)))


def gather_case(kind, vocab, dim, n, label=""):
    def build(dev):
        w = _rand((vocab, dim)).to(dev)
        idx = torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(4)).to(dev)
        if kind == "index_select":
            return lambda: w.index_select(0, idx)
        if kind == "gather":
            src = _rand((n, vocab)).to(dev)
            gi = torch.randint(0, vocab, (n, dim), generator=torch.Generator().manual_seed(5)).to(dev)
            return lambda: torch.gather(src, 1, gi)
        g = _rand((n, dim)).to(dev)
        return lambda: torch.ops.aten.embedding_dense_backward(g, idx, vocab, -1, False)
    if kind == "embedding_backward":
        traffic = nb(((n, dim), torch.float32), ((vocab, dim), torch.float32), ((n,), torch.int64))
    else:
        traffic = nb(((n, dim), torch.float32), ((n, dim), torch.float32), ((n, dim if kind == "gather" else 1), torch.int64))
    return Case(kind if kind != "embedding_backward" else "embedding_bwd", f"{label} V={vocab} D={dim} n={n}",
                build, traffic)


def conv_case(n, c, h, k, cout, backward, channels_last, label=""):
    def build(dev):
        x = _rand((n, c, h, h)).to(dev)
        w = (_rand((cout, c, k, k), seed=1) * 0.1).to(dev)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
            w = w.contiguous(memory_format=torch.channels_last)
        if not backward:
            return lambda: F.conv2d(x, w, padding=k // 2)
        x.requires_grad_(True)
        w.requires_grad_(True)
        go = _rand((n, cout, h, h), seed=2).to(dev)
        if channels_last:
            go = go.contiguous(memory_format=torch.channels_last)

        def run():
            y = F.conv2d(x, w, padding=k // 2)
            return torch.autograd.grad(y, (x, w), go)
        return run
    fmt = "nhwc" if channels_last else "nchw"
    return Case("conv2d " + ("fwd+bwd" if backward else "fwd"), f"{label} {n}x{c}x{h}x{h} k{k}->{cout} {fmt}", build)


def matmul_case(m, k, n, dtype, label=""):
    def build(dev):
        a, b = _on(dev, _rand((m, k), dtype), _rand((k, n), dtype, 1))
        return lambda: a @ b
    return Case("matmul " + str(dtype)[6:], f"{label} {m}x{k}x{n}", build)


def cases() -> list[Case]:
    # char_gpt: B=16, T=64, C=128, 4 heads, vocab 96 (logits 1024x96); llama: dim 128, hidden 352;
    # resnet: 16 images, width 16..128 at 32..4 px; ddpm: 16 images, 16 px; dlrm: 128 samples.
    L = []
    L += [softmax_case((16 * 4 * 64, 64), label="gpt attn"), softmax_case((2048, 2048), label="large"),
          softmax_case((2048, 2048), dtype=torch.bfloat16, label="large")]
    L += [log_softmax for log_softmax in (softmax_case((1024, 96), True, label="gpt logits"),
                                          softmax_case((2048, 2048), True, label="large"))]
    L += [layer_norm_case((1024, 128), "gpt"), layer_norm_case((4096, 1024), "large")]
    L += [rms_norm_case((1024, 128), "llama"), rms_norm_case((4096, 1024), "large")]
    L += [cross_entropy_case((1024, 96), "gpt"), cross_entropy_case((2048, 2048), "large")]
    for op in ("sum", "mean", "var", "argmax"):
        L += [reduce_case(op, (1024, 128), -1, "gpt"), reduce_case(op, (16, 64, 128), 1, "gpt"),
              reduce_case(op, (1024, 512), 0, "gpt bias grad"),
              reduce_case(op, (2048, 2048), -1, "large"), reduce_case(op, (64, 256, 256), 1, "large"),
              reduce_case(op, (2048, 2048), 0, "large")]
    L += [elementwise_case("gelu", (1024, 512), label="gpt mlp"),
          elementwise_case("gelu", (4096, 1024), label="large"),
          elementwise_case("gelu", (4096, 1024), torch.bfloat16, label="large"),
          elementwise_case("addcmul", (4096, 1024), label="large"),
          elementwise_case("addcmul", (4096, 1024), torch.bfloat16, label="large"),
          elementwise_case("mul_add_relu", (1024, 512), label="gpt"),
          elementwise_case("mul_add_relu", (4096, 1024), label="large")]
    L += [gather_case("index_select", 96, 128, 1024, "gpt emb"), gather_case("index_select", 65536, 128, 16384, "large"),
          gather_case("gather", 96, 128, 1024, "gpt"), gather_case("gather", 2048, 1024, 2048, "large"),
          gather_case("embedding_backward", 96, 128, 1024, "gpt"),
          gather_case("embedding_backward", 65536, 64, 32768, "large")]
    for bwd in (False, True):
        for cl in (False, True):
            L += [conv_case(16, 64, 8, 3, 64, bwd, cl, "resnet"), conv_case(16, 32, 16, 3, 32, bwd, cl, "ddpm")]
    L += [matmul_case(1024, 128, 384, torch.float32, "gpt qkv"), matmul_case(1024, 1024, 1024, torch.float32, "large"),
          matmul_case(1024, 128, 352, torch.bfloat16, "llama mlp"), matmul_case(1024, 1024, 1024, torch.bfloat16, "large"),
          matmul_case(1024, 128, 384, torch.float64, "gpt qkv"), matmul_case(512, 512, 512, torch.float64, "large"),
          matmul_case(128, 128, 128, torch.int64, "small"), matmul_case(512, 512, 512, torch.int64, "large")]
    return L


# ---- timing -------------------------------------------------------------------------------------

def time_loop(fn, device, iters) -> float:
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / iters


def copy_bandwidth(reps: int) -> float:
    src = torch.empty(256 * MiB // 4).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return 2 * src.numel() * 4 / statistics.median(times)


def fmt_t(s: float) -> str:
    if s >= 1e-1:
        return f"{s * 1e3:8.0f}ms"
    if s >= 1e-3:
        return f"{s * 1e3:8.2f}ms"
    return f"{s * 1e6:8.1f}us"


def pin(threads: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if threads > len(cpus):
        sys.exit(f"--threads {threads}: only {len(cpus)} CPUs are available to this process")
    os.sched_setaffinity(0, cpus[:threads])


def worker(device: str, threads: int, conn) -> None:
    """One side (cpu or tpu) in its own process: builds a case on request, then runs timed loops
    of it, one per request."""
    pin(threads)
    torch.set_num_threads(threads)
    torch_tpu._C._set_num_threads(threads)
    all_cases = cases()
    fn = None
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kind, arg = msg
        if kind == "case":
            fn = None
            before = dict(torch_tpu.metrics.fallback_ops())
            fn = all_cases[arg].build(device)
            for _ in range(2):  # warm-up: compiles, caches, first-touch
                fn()
            _sync(device)
            # The loop length comes from a ~10 ms loop: two calls right after the pause ran slow
            # (see above), and a 1 ms op sized its loops at 7 calls rather than ~30 ms of them.
            t = time_loop(fn, device, 2)
            t = time_loop(fn, device, max(2, min(2000, int(0.01 / max(t, 1e-7)))))
            after = torch_tpu.metrics.fallback_ops()
            conn.send((t, sorted(k for k, v in after.items() if v != before.get(k, 0))))
        else:  # "loop": a third of it untimed first (after the pause the CPU runs slow; see above)
            time_loop(fn, device, max(1, arg // 3))
            conn.send(time_loop(fn, device, arg))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="3 repetitions per side instead of 11")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--target-ms", type=float, default=30.0, help="length of one timed loop")
    p.add_argument("--settle-ms", type=float, default=20.0, help="pause between one side's loop and the other's")
    p.add_argument("--only", default=None, help="comma-separated families (substring match)")
    args = p.parse_args()
    reps = args.reps or (3 if args.quick else 11)
    torch.set_num_threads(args.threads)
    bw = copy_bandwidth(9)  # before the workers start
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    conns, procs = {}, {}
    for d in ("cpu", "tpu"):
        conns[d], child = ctx.Pipe()
        procs[d] = ctx.Process(target=worker, args=(d, args.threads, child), daemon=True)
        procs[d].start()
    print(f"torch {torch.__version__}, {args.threads} thread(s) for PyTorch CPU and for the host executor "
          f"(torch {torch.get_num_threads()}, tpu {torch_tpu._C._get_num_threads()}); median of {reps} loops of "
          f"~{args.target_ms:.0f} ms per side")
    print(f"copy bandwidth (256 MiB torch copy_, read+write): {bw / 1e9:.1f} GB/s")
    print("tpu figures are host-executor measurements (its programs run on this CPU)\n")
    hdr = f"{'family':<16} {'case':<36} {'CPU':>10} {'tpu':>10} {'ratio':>6} {'min-r':>6} {'bw%':>5}  notes"
    print(hdr)
    print("-" * len(hdr))
    only = args.only.split(",") if args.only else None
    worst: dict[str, float] = {}
    settle = args.settle_ms * 1e-3

    def ask(d, msg):
        conns[d].send(msg)
        answer = conns[d].recv()
        time.sleep(settle)
        return answer

    for index, c in enumerate(cases()):
        if only and not any(o in c.family for o in only):
            continue
        iters, fb = {}, []
        for d in ("cpu", "tpu"):
            t, fallbacks = ask(d, ("case", index))
            iters[d] = max(1, min(2000, int(args.target_ms * 1e-3 / max(t, 1e-7))))
            fb += fallbacks
        it = min(iters.values())  # same loop length on both sides
        samples = {"cpu": [], "tpu": []}
        for _ in range(reps):
            for d in ("cpu", "tpu"):
                samples[d].append(ask(d, ("loop", it)))
        tc, tt = statistics.median(samples["cpu"]), statistics.median(samples["tpu"])
        ratio = tc / tt
        ratio_min = min(samples["cpu"]) / min(samples["tpu"])  # less sensitive to outside load
        bwp = f"{100 * c.nbytes / tt / bw:4.0f}%" if c.nbytes else "    -"
        note = ("fallback: " + ",".join(sorted(set(fb)))) if fb else ""
        print(f"{c.family:<16} {c.name.strip():<36} {fmt_t(tc)} {fmt_t(tt)} {ratio:5.2f}x {ratio_min:5.2f}x {bwp}  {note}", flush=True)
        worst[c.family] = min(worst.get(c.family, 1e9), ratio)
    for d in ("cpu", "tpu"):
        conns[d].send(None)
        procs[d].join()
    print("\nratio = CPU time / tpu time of the medians (above 1: the device is faster); min-r: the same of the"
          " fastest loops; bw% = achieved traffic (median) / copy bandwidth")
    print("worst ratio per family: " + ", ".join(f"{k} {v:.2f}x" for k, v in worst.items()))


if __name__ == "__main__":
    main()
