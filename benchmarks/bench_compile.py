"""One training step (forward, backward, optimizer) five ways, side by side:

    python benchmarks/bench_compile.py [--model gpt|llama|resnet18] [--threads 1] [--steps 10]
    python benchmarks/bench_compile.py --model gpt --d 256 --ctx 128
    python benchmarks/bench_compile.py --all --threads 1   # the acceptance set, one summary table

  tpu compiled   torch.compile(step/update, backend="tpu") on the device (host executor)
  tpu fused      the same eager code on the device in fused eager mode
  CPU eager      the same eager code on PyTorch CPU
  CPU Inductor   torch.compile(step/update) with Inductor on PyTorch CPU
  JAX jit        the same model and optimizer written in JAX (benchmarks/_jax_models.py), the whole
                 step one jax.jit (XLA CPU)

Models (--all runs the first four rows of this list):
  gpt       examples/char_gpt.py's GPT: 4 layers, 4 heads, vocabulary 96, dropout 0; --d 128
            --ctx 64 --batch 8 by default (--all adds d=256 ctx=128); AdamW(lr=3e-3, wd=0.01)
  llama     examples/llama.py's default config (bench_models.py's: dim 128, 4 layers, 8 query
            heads sharing 2 key/value heads, SwiGLU 352, RoPE), vocabulary 96, 16 x 64 tokens;
            AdamW(lr=3e-3, wd=0.01)
  resnet18  examples/resnet.py's ResNet-18 at width 16 (bench_models.py's), 16 synthetic 32x32
            images, training mode (batch norm on the batch's statistics, running statistics
            updated); SGD(lr=0.01, momentum 0.9, wd=5e-4) as resnet.sgd
The five compute the same function: JAX starts from the PyTorch model's weights, and the first
steps' losses are printed for each. The optimizers are foreach (capturable on the device, which
torch.compile of the AdamW update needs). Same thread count everywhere: each variant runs in its
own process (so no variant's idle thread pool competes with the running one), pinned to --threads
CPUs before torch or JAX starts (XLA sizes its pool from them), with --threads threads for PyTorch
and the host executor. The variants take turns, one timed step each per round, so a load from
other processes falls on all of them alike; each figure is the median step time after warm-up
(the warm-up steps include every compile), ending in a sync point (the loss read on the host).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import statistics
import sys
import time
from typing import Optional

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(os.path.dirname(ROOT), "examples"))


def pin(threads: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if threads > len(cpus):
        sys.exit(f"--threads {threads}: only {len(cpus)} CPUs are available to this process")
    os.sched_setaffinity(0, cpus[:threads])


VARIANTS = {
    "compiled": "tpu compiled",
    "fused": "tpu fused eager",
    "cpu": "CPU eager",
    "inductor": "CPU Inductor",
    "jax": "JAX jit (XLA CPU)",
}


@dataclasses.dataclass(frozen=True)
class Config:
    model: str           # gpt, llama or resnet18
    batch: int
    d: int = 0           # gpt: width
    ctx: int = 0         # gpt, llama: sequence length
    layers: int = 4      # gpt

    def describe(self) -> str:
        if self.model == "gpt":
            return f"GPT {self.layers} layers d={self.d} ctx={self.ctx} batch {self.batch}"
        if self.model == "llama":
            return f"Llama dim 128 4 layers GQA 8/2 heads, {self.batch}x{self.ctx} tokens"
        return f"ResNet-18 width 16, {self.batch} images 32x32, training mode"


DEFAULTS = {"gpt": dict(batch=8, d=128, ctx=64), "llama": dict(batch=16, ctx=64), "resnet18": dict(batch=16)}
ACCEPTANCE = [Config("gpt", batch=8, d=128, ctx=64), Config("gpt", batch=8, d=256, ctx=128),
              Config("llama", batch=16, ctx=64), Config("resnet18", batch=16)]


def build_model(cfg: Config):
    """(the PyTorch model, 4 batches, loss(model, x, y), optimizer(params, device), its JAX twin)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if cfg.model == "resnet18":
        import resnet

        model = resnet.resnet18(16).train()
        images = resnet.SyntheticImages(32)
        batches = [images.batch(i, cfg.batch) for i in range(4)]

        def make_opt(params, device):
            return torch.optim.SGD(params, lr=resnet.DEFAULT_LR["resnet18"], momentum=0.9, weight_decay=5e-4,
                                   foreach=True)
        return model, batches, lambda m, x, y: F.cross_entropy(m(x), y), make_opt, "resnet"
    if cfg.model == "gpt":
        import char_gpt

        model = char_gpt.GPT(char_gpt.GPTConfig(vocab_size=96, block_size=cfg.ctx, n_layer=cfg.layers, n_head=4,
                                                n_embd=cfg.d, dropout=0.0))
    else:
        import llama

        model = llama.Llama(dataclasses.replace(llama.CONFIGS["llama"], vocab_size=96))
    batches = [(torch.randint(0, 96, (cfg.batch, cfg.ctx), generator=g),
                torch.randint(0, 96, (cfg.batch, cfg.ctx), generator=g)) for _ in range(4)]

    def make_opt(params, device):
        return torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01, foreach=True, capturable=device == "tpu")
    return model, batches, lambda m, x, y: m(x, y)[1], make_opt, cfg.model


def torch_variant(base, batches, loss_fn, make_opt, device: str, compiled: Optional[str], eager_mode):
    import torch

    import torch_tpu

    model = copy.deepcopy(base).to(device)
    opt = make_opt(model.parameters(), device)
    data = [(x.to(device), y.to(device)) for x, y in batches]

    def fwd_bwd(x, y):
        loss = loss_fn(model, x, y)
        loss.backward()
        return loss

    def update():
        opt.step()
        opt.zero_grad()

    if compiled:
        fwd_bwd, update = torch.compile(fwd_bwd, backend=compiled), torch.compile(update, backend=compiled)
    if eager_mode:
        torch_tpu.set_eager_mode(eager_mode)
    i = 0

    def step() -> float:
        nonlocal i
        x, y = data[i % len(data)]
        i += 1
        loss = fwd_bwd(x, y)
        update()
        value = loss.item()
        # loss.item() waits only for the program that computed the loss; the optimizer's update
        # is queued after it, and the step is not over until that has run too.
        if device == "tpu":
            torch.tpu.synchronize()
        return value

    return step


def jax_variant(base, batches, kind: str):
    import _jax_models as jm
    import jax.numpy as jnp

    if kind == "resnet":
        import resnet

        opt = jm.SGD(lr=resnet.DEFAULT_LR["resnet18"], momentum=0.9, weight_decay=5e-4)
        data = [(jnp.asarray(x.permute(0, 2, 3, 1).numpy()), jnp.asarray(y.numpy())) for x, y in batches]  # NHWC
    else:
        opt = jm.AdamW(lr=3e-3, weight_decay=0.01)
        data = [(jnp.asarray(x.numpy()), jnp.asarray(y.numpy())) for x, y in batches]
    params, buffers, loss_fn = getattr(jm, kind)(base)
    return jm.train_step(params, buffers, loss_fn, opt, data)


def worker(key: str, cfg: Config, threads: int, conn) -> None:
    """One variant in its own process (so no other variant's thread pool competes for its CPUs):
    builds the step, then runs one step per request and answers (seconds, loss)."""
    pin(threads)  # before torch and jax start their thread pools
    import torch

    import torch_tpu

    torch.set_num_threads(threads)
    torch_tpu._C._set_num_threads(threads)
    base, batches, loss_fn, make_opt, kind = build_model(cfg)
    try:
        if key == "jax":
            import jax

            jax.config.update("jax_platforms", "cpu")  # XLA's CPU backend, whatever else is installed
            step = jax_variant(base, batches, kind)
        elif key == "compiled":
            step = torch_variant(base, batches, loss_fn, make_opt, "tpu", "tpu", None)
        elif key == "fused":
            step = torch_variant(base, batches, loss_fn, make_opt, "tpu", None, "fused")
        else:
            step = torch_variant(base, batches, loss_fn, make_opt, "cpu", "inductor" if key == "inductor" else None,
                                 None)
    except ImportError as e:
        conn.send(("skipped", str(e)))
        return
    conn.send(("ready", ""))
    while conn.recv():
        t0 = time.perf_counter()
        loss = step()
        conn.send((time.perf_counter() - t0, loss))
    if key == "compiled":
        s = torch_tpu.compile.stats()
        conn.send(f"{s['captures']} captured programs, {s['recompiles']} recompiles, "
                  f"{s['fallbacks']} graphs fell back to eager")
    else:
        conn.send("")


def run(cfg: Config, args, skip) -> dict:
    """Times cfg's five variants taking turns; prints its table and returns {variant: (median s, losses)}."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    conns, procs = {}, []
    for key in VARIANTS:
        if key in skip:
            continue
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker, args=(key, cfg, args.threads, child), daemon=True)
        proc.start()
        procs.append(proc)
        status, why = parent.recv()  # one build at a time
        if status == "skipped":
            print(f"{VARIANTS[key]}: skipped ({why})")
            continue
        conns[key] = parent
    samples = {k: [] for k in conns}
    losses = {k: [] for k in conns}
    warmup_s = {k: 0.0 for k in conns}
    for r in range(args.warmup + args.steps):
        for key, conn in conns.items():  # one variant runs at a time; the others wait on their pipes
            conn.send(True)
            dt, loss = conn.recv()
            losses[key].append(loss)
            if r < args.warmup:
                warmup_s[key] += dt
            else:
                samples[key].append(dt)
    notes = {}
    for key, conn in conns.items():
        conn.send(False)
        notes[key] = conn.recv()
    for proc in procs:
        proc.join()

    import torch

    print(f"{cfg.describe()}: one training step; torch {torch.__version__}; each variant in its own process "
          f"pinned to {args.threads} CPU(s) with {args.threads} thread(s); median of {args.steps} timed steps after "
          f"{args.warmup} warm-up steps (the tpu figures are host-executor measurements on this CPU)\n")
    ref = statistics.median(samples["compiled"]) if "compiled" in samples else None
    header = f"{'variant':<20} {'ms/step':>9} {'min ms':>8} {'vs tpu compiled':>16} {'warm-up s':>10}   losses (steps 1-3)"
    print(header + "\n" + "-" * len(header))
    for key, ts in samples.items():
        med = statistics.median(ts)
        ratio = f"{med / ref:.2f}x" if ref else "-"
        print(f"{VARIANTS[key]:<20} {med * 1e3:>9.1f} {min(ts) * 1e3:>8.1f} {ratio:>16} {warmup_s[key]:>10.1f}   "
              + " ".join(f"{v:.5f}" for v in losses[key][:3]))
    print("\nvs tpu compiled = that variant's time / tpu compiled time (above 1: tpu compiled is faster)")
    if notes.get("compiled"):
        print("tpu compile: " + notes["compiled"])
    print(flush=True)
    return {k: (statistics.median(ts), losses[k]) for k, ts in samples.items()}


def summary(results: dict, threads: int) -> None:
    """One row per model: each variant's median ms/step (its ratio to tpu compiled), and the
    largest relative difference of any variant's first three losses from CPU eager's."""
    keys = [k for k in VARIANTS if any(k in r for r in results.values())]
    head = f"{'model':<52}" + "".join(f"{VARIANTS[k]:>22}" for k in keys) + f"{'max loss diff':>15}"
    print(f"Summary, {threads} thread(s): ms/step (that time / tpu compiled's)\n{head}\n" + "-" * len(head))
    for cfg, r in results.items():
        ref = r.get("compiled", (None,))[0]
        cells = []
        for k in keys:
            if k not in r:
                cells.append(f"{'-':>22}")
                continue
            ratio = f" ({r[k][0] / ref:.2f}x)" if ref else ""
            cells.append(f"{r[k][0] * 1e3:>13.1f}{ratio:>9}")
        base = r.get("cpu", next(iter(r.values())))[1][:3]
        diff = max(abs(a - b) / abs(b) for v in r.values() for a, b in zip(v[1][:3], base))
        print(f"{cfg.describe():<52}" + "".join(cells) + f"{diff:>15.1e}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt", choices=sorted(DEFAULTS))
    p.add_argument("--all", action="store_true", help="the acceptance set (GPT d=128 and d=256, Llama, ResNet-18) "
                   "one model after another, then a summary table")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--d", type=int, default=None, help="gpt: model width (default 128)")
    p.add_argument("--ctx", type=int, default=None, help="gpt, llama: sequence length (default 64)")
    p.add_argument("--batch", type=int, default=None, help="default 8 (gpt), 16 (llama, resnet18)")
    p.add_argument("--layers", type=int, default=4, help="gpt: layers")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10, help="timed steps per variant")
    p.add_argument("--skip", default="", help="comma-separated variants to leave out: " + ",".join(VARIANTS))
    args = p.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(VARIANTS):
        p.error(f"--skip: unknown variants {sorted(skip - set(VARIANTS))}")
    if args.threads > len(os.sched_getaffinity(0)):
        p.error(f"--threads {args.threads}: only {len(os.sched_getaffinity(0))} CPUs are available")
    if args.all:
        if args.d is not None or args.ctx is not None or args.batch is not None:
            p.error("--all runs fixed configurations: leave out --d, --ctx and --batch")
        configs = ACCEPTANCE
    else:
        if args.model != "gpt" and args.d is not None:
            p.error("--d applies to --model gpt")
        if args.model == "resnet18" and args.ctx is not None:
            p.error("--ctx does not apply to --model resnet18")
        given = {k: getattr(args, k) for k in ("d", "ctx", "batch") if getattr(args, k) is not None}
        configs = [Config(args.model, layers=args.layers, **{**DEFAULTS[args.model], **given})]
    results = {cfg: run(cfg, args, skip) for cfg in configs}
    if len(results) > 1:
        summary(results, args.threads)


if __name__ == "__main__":
    main()
