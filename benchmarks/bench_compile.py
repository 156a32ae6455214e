"""One GPT training step (forward, backward, AdamW) five ways, side by side:

    python benchmarks/bench_compile.py [--threads 2] [--d 128] [--ctx 64] [--batch 8] [--steps 10]

  tpu compiled   torch.compile(step/update, backend="tpu") on the device (host executor)
  tpu fused      the same eager code on the device in fused eager mode
  CPU eager      the same eager code on PyTorch CPU
  CPU Inductor   torch.compile(step/update) with Inductor on PyTorch CPU
  JAX jit        the same model and AdamW written in JAX, the whole step one jax.jit (XLA CPU)

Model: examples/char_gpt.py's GPT, 4 layers, 4 heads, vocabulary 96, dropout 0 (so the five runs
compute the same function: JAX starts from the PyTorch model's weights, and the first steps'
losses are printed for each). Optimizer: AdamW(lr=3e-3, weight_decay=0.01), foreach (capturable on
the device, which torch.compile of the update needs). Same thread count everywhere: each variant
runs in its own process (so no variant's idle thread pool competes with the running one), pinned
to --threads CPUs before torch or JAX starts (XLA sizes its pool from them), with --threads
threads for PyTorch and the host executor. The variants take turns, one timed step each per
round, so a load from other processes falls on all of them alike; each figure is the median step
time after warm-up (the warm-up steps include every compile), ending in a sync point (the loss
read on the host).
"""
from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def build_model(args):
    import torch

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import char_gpt

    torch.manual_seed(0)
    cfg = char_gpt.GPTConfig(vocab_size=96, block_size=args.ctx, n_layer=args.layers, n_head=4, n_embd=args.d,
                             dropout=0.0)
    base = char_gpt.GPT(cfg)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, 96, (args.batch, args.ctx), generator=g),
                torch.randint(0, 96, (args.batch, args.ctx), generator=g)) for _ in range(4)]
    return base, cfg, batches


def torch_variant(base, batches, device: str, compiled, eager_mode):
    import torch

    import torch_tpu

    model = copy.deepcopy(base).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, foreach=True,
                            capturable=device == "tpu")
    data = [(x.to(device), y.to(device)) for x, y in batches]

    def fwd_bwd(x, y):
        loss = model(x, y)[1]
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
        return loss.item()  # a sync point: waits for the device's queued work

    return step


def worker(key: str, args, conn) -> None:
    """One variant in its own process (so no other variant's thread pool competes for its CPUs):
    builds the step, then runs one step per request and answers (seconds, loss)."""
    pin(args.threads)  # before torch and jax start their thread pools
    import torch

    import torch_tpu

    torch.set_num_threads(args.threads)
    torch_tpu._C._set_num_threads(args.threads)
    base, cfg, batches = build_model(args)
    try:
        if key == "jax":
            step = jax_variant(base, cfg, batches)
        elif key == "compiled":
            step = torch_variant(base, batches, "tpu", "tpu", None)
        elif key == "fused":
            step = torch_variant(base, batches, "tpu", None, "fused")
        else:
            step = torch_variant(base, batches, "cpu", "inductor" if key == "inductor" else None, None)
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--d", type=int, default=128, help="model width")
    p.add_argument("--ctx", type=int, default=64, help="sequence length")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10, help="timed steps per variant")
    p.add_argument("--skip", default="", help="comma-separated variants to leave out: " + ",".join(VARIANTS))
    args = p.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(VARIANTS):
        p.error(f"--skip: unknown variants {sorted(skip - set(VARIANTS))}")
    if args.threads > len(os.sched_getaffinity(0)):
        p.error(f"--threads {args.threads}: only {len(os.sched_getaffinity(0))} CPUs are available")

    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    conns, procs = {}, []
    for key in VARIANTS:
        if key in skip:
            continue
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker, args=(key, args, child), daemon=True)
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

    print(f"GPT {args.layers} layers d={args.d} ctx={args.ctx} batch {args.batch}: one training step "
          f"(forward, backward, AdamW); torch {torch.__version__}; each variant in its own process pinned to "
          f"{args.threads} CPU(s) with {args.threads} thread(s); median of {args.steps} timed steps after "
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


def jax_variant(base, cfg, batches):
    """The GPT and AdamW in JAX, starting from `base`'s weights; the whole step is one jax.jit."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
    sd = {k: jnp.asarray(v.detach().numpy()) for k, v in base.state_dict().items()}
    params = {k: v for k, v in sd.items() if not k.endswith(".mask")}
    H = cfg.n_head

    def linear(x, p, name, bias=True):
        y = x @ p[name + ".weight"].T
        return y + p[name + ".bias"] if bias else y

    def layer_norm(x, p, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def loss_fn(p, idx, targets):
        B, T = idx.shape
        C = cfg.n_embd
        x = p["tok_emb.weight"][idx] + p["pos_emb.weight"][jnp.arange(T)]
        causal = jnp.tril(jnp.ones((T, T), dtype=bool))
        for layer in range(cfg.n_layer):
            b = f"blocks.{layer}."
            h = layer_norm(x, p, b + "ln1")
            q, k, v = jnp.split(linear(h, p, b + "attn.qkv"), 3, axis=2)
            q, k, v = (t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for t in (q, k, v))
            att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(C // H))
            att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
            y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
            x = x + linear(y, p, b + "attn.proj")
            h = layer_norm(x, p, b + "ln2")
            h = jax.nn.gelu(linear(h, p, b + "mlp.0"), approximate=False)
            x = x + linear(h, p, b + "mlp.2")
        logits = linear(layer_norm(x, p, "ln_f"), p, "head", bias=False)
        logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]), axis=-1)
        return -jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=1).mean()

    lr, b1, b2, eps, wd = 3e-3, 0.9, 0.999, 1e-8, 0.01

    @jax.jit
    def train_step(p, m, v, t, idx, targets):
        loss, grads = jax.value_and_grad(loss_fn)(p, idx, targets)
        t = t + 1
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        m = jax.tree_util.tree_map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, grads)
        v = jax.tree_util.tree_map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, grads)
        p = jax.tree_util.tree_map(
            lambda p_, m_, v_: p_ * (1 - lr * wd) - (lr / bc1) * m_ / (jnp.sqrt(v_) / jnp.sqrt(bc2) + eps), p, m, v)
        return p, m, v, t, loss

    state = [params, jax.tree_util.tree_map(jnp.zeros_like, params), jax.tree_util.tree_map(jnp.zeros_like, params),
             jnp.zeros((), jnp.float32)]
    data = [(jnp.asarray(x.numpy()), jnp.asarray(y.numpy())) for x, y in batches]
    i = 0

    def step() -> float:
        nonlocal i, state
        x, y = data[i % len(data)]
        i += 1
        *state, loss = train_step(*state, x, y)
        return float(loss)  # waits for the step, as loss.item() does

    return step


if __name__ == "__main__":
    main()
