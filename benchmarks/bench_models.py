"""Step time of the example models: PyTorch CPU eager (and, with --inductor, torch.compile's
Inductor on the CPU) vs the tpu device in its eager modes, side by side in one run, with the same
thread count on every side.

    python benchmarks/bench_models.py [--quick] [--threads 2] [--steps 15] [--only resnet18,ddpm_unet]
                                      [--modes strict,fused,debug] [--inductor] [--pjrt strict,fused]

Every model is built by its example script (examples/*.py) at the script's default size, for
2 cores: a training step is forward + backward + the script's optimizer step; an inference step
(ResNets) is an eval-mode forward without autograd. Each configuration runs `--warmup` steps first
(the device compiles its programs then), then `--steps` timed steps, each ending in a sync point;
the table shows the median. The configurations of a model take turns step by step, so a
load from other processes falls on all of them alike. PyTorch CPU (eager and Inductor) runs in a
peer process of its own (benchmarks/_peer.py), and each configuration's turn is followed by a
pause of --settle-ms: a thread pool that just finished keeps spinning for a while (PyTorch's OpenMP
threads for milliseconds), and in one process, or without the pause, that spinning takes CPU time
from the next configuration's step. A turn ends in the timed step; before it, untimed steps
(at least one, and at least --rewarm-ms of them) bring the side back to the speed of back-to-back
training steps: after a pause of 10 ms or more this VM runs code slower for its first milliseconds,
and the host executor's two threads take tens of milliseconds to recover (resnet18 inference
strict, steps back to back: 2.2-2.3 ms; each after a 30 ms pause: 4.4-4.9 ms; PyTorch CPU 3.5 and
5.7 ms) -- one warm step was not enough for the short steps. ratio = CPU time / tpu time (above 1: the
device is faster). The tpu figures are host-executor measurements: its compiled programs run on
this machine's CPU. `--pjrt MODES` adds columns for the same models on the pjrt backend (XLA's
CPU plugin unless TORCH_TPU_PJRT_PLUGIN names another), run in a peer process that takes its turn
in the same rotation (benchmarks/_peer.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import char_gpt  # noqa: E402
import ddpm  # noqa: E402
import dlrm  # noqa: E402
import llama  # noqa: E402
import resnet  # noqa: E402

Step = Callable[[], None]


def optimizer_step(opt: torch.optim.Optimizer, loss) -> None:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


# ---- one builder per model: (device) -> a step function, everything already on the device ---------

def build_gpt(batch: int, **cfg) -> Callable[[str], Step]:
    def build(device: str) -> Step:
        data = char_gpt.CharData()
        torch.manual_seed(0)
        model = char_gpt.GPT(char_gpt.GPTConfig(vocab_size=data.vocab_size, **cfg)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        x, y = (v.to(device) for v in data.batch(batch, model.cfg.block_size, torch.Generator().manual_seed(0)))
        return lambda: optimizer_step(opt, model(x, y)[1])
    return build


def build_llama(config: str) -> Callable[[str], Step]:
    def build(device: str) -> Step:
        data = llama.CharData()
        torch.manual_seed(0)
        model = llama.Llama(dataclasses.replace(llama.CONFIGS[config], vocab_size=data.vocab_size)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
        x, y = (v.to(device) for v in data.batch(16, 64, torch.Generator().manual_seed(0)))
        return lambda: optimizer_step(opt, model(x, y)[1])
    return build


def build_resnet(arch: str, infer: bool) -> Callable[[str], Step]:
    def build(device: str) -> Step:
        torch.manual_seed(0)
        model = resnet.ARCHS[arch](16).to(device)
        x, y = (v.to(device) for v in resnet.SyntheticImages(32).batch(0, 16))
        if infer:
            model.eval()
            return lambda: model(x)
        opt = resnet.sgd(model, resnet.DEFAULT_LR[arch])
        return lambda: resnet.train_step(model, opt, x, y)
    return build


def no_grad(fn: Step) -> Step:
    def run():
        with torch.no_grad():
            return fn()  # the output: fused mode computes only what stays alive (timed_step)
    return run


def build_ddpm(device: str) -> Step:
    cfg = ddpm.UNetConfig()
    torch.manual_seed(0)
    model = ddpm.UNet(cfg).to(device)
    schedule = ddpm.DDPMSchedule(cfg.timesteps)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x0, t, noise = (v.to(device) for v in ddpm.training_batch(0, 16, cfg))
    return lambda: ddpm.train_step(model, schedule, opt, x0, t, noise)


def build_dlrm(device: str) -> Step:
    cfg = dlrm.DLRMConfig()
    torch.manual_seed(0)
    model = dlrm.DLRM(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    dense, sparse, labels = dlrm.SyntheticClicks(cfg, 128, 1)[0]
    dense, labels = dense.to(device), labels.to(device)
    sparse = [tuple(t.to(device) for t in bags) for bags in sparse]
    return lambda: optimizer_step(opt, F.binary_cross_entropy_with_logits(model(dense, sparse), labels))


def build_hf_llama(device: str) -> Step:
    """transformers' LlamaForCausalLM at the size of examples/llama.py's default config."""
    import transformers
    cfg = llama.CONFIGS["llama"]
    hf_cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=cfg.dim, intermediate_size=cfg.hidden_dim,
                                      num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                                      num_key_value_heads=cfg.n_kv_heads, max_position_embeddings=cfg.max_seq_len)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(hf_cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 96, (16, 64), generator=torch.Generator().manual_seed(0)).to(device)
    return lambda: optimizer_step(opt, model(input_ids=ids, labels=ids).loss)


@dataclass
class Case:
    name: str
    what: str   # "train" or "infer"
    size: str   # what one step processes
    build: Callable[[str], Step]


CASES = [
    Case("char_gpt", "train", "16x64 tokens", build_gpt(16)),
    Case("gpt_4l", "train", "8x64 tokens", build_gpt(8, n_layer=4, n_head=4, n_embd=128, block_size=64)),
    Case("llama", "train", "16x64 tokens", build_llama("llama")),
    Case("qwen", "train", "16x64 tokens", build_llama("qwen")),
    Case("resnet18", "train", "16 imgs 32px", build_resnet("resnet18", infer=False)),
    Case("resnet18", "infer", "16 imgs 32px", lambda d: no_grad(build_resnet("resnet18", infer=True)(d))),
    Case("resnet50", "train", "16 imgs 32px", build_resnet("resnet50", infer=False)),
    Case("resnet50", "infer", "16 imgs 32px", lambda d: no_grad(build_resnet("resnet50", infer=True)(d))),
    Case("ddpm_unet", "train", "16 imgs 16px", build_ddpm),
    Case("dlrm", "train", "128 samples", build_dlrm),
    Case("hf_llama", "train", "16x64 tokens", build_hf_llama),
]


def device_name() -> str:
    return torch.tpu.get_device_name()


# "cpu": PyTorch CPU eager; "inductor": torch.compile (Inductor) on the CPU; the others: the tpu
# device in that eager mode.
TPU_MODES = ("strict", "fused", "debug")


def timed_step(step: Step, mode: str) -> float:
    """Seconds for one step, ending in a sync point so the device's queued work is counted. The
    step's result stays alive through the sync: fused mode computes only values that are used."""
    if mode in ("cpu", "inductor"):
        t0 = time.perf_counter()
        out = step()
        return time.perf_counter() - t0
    with torch_tpu.eager_mode(mode):  # switching waits for queued work, outside the timing
        t0 = time.perf_counter()
        out = step()
        torch.tpu.synchronize()
        elapsed = time.perf_counter() - t0
    del out
    return elapsed


def compiled(step: Step) -> Step:
    """The whole step (forward, backward, optimizer) under torch.compile with Inductor."""
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 64
    return torch.compile(step, backend="inductor")


# A peer's side (benchmarks/_peer.py): the case's step, built in the peer process (PyTorch CPU's
# configurations, the pjrt backend's modes).
_PEER_STEPS: dict = {}


def remote_build(index: int, mode: str) -> None:
    fn = CASES[index].build("tpu" if mode in TPU_MODES else "cpu")
    _PEER_STEPS[(index, mode)] = compiled(fn) if mode == "inductor" else fn
    torch_tpu.metrics.reset()


def remote_step(index: int, mode: str) -> float:
    return timed_step(_PEER_STEPS[(index, mode)], mode)


def remote_finish() -> dict:
    _PEER_STEPS.clear()
    return torch_tpu.metrics.fallback_ops()


def run_case(case: Case, modes: list[str], warmup: int, steps: int, peer=None, cpu_peer=None,
             settle: float = 0.0, rewarm: float = 0.0) -> tuple[dict[str, float], dict[str, int]]:
    """Median seconds per step in each mode ("pjrt:<mode>": that mode on the pjrt peer; "cpu" and
    "inductor" on `cpu_peer` when given). The modes take turns step by step, so that a load from
    other processes on the machine falls on all of them alike."""
    torch_tpu.metrics.reset()
    index = CASES.index(case)
    fns = {}
    for mode in modes:
        where, m = (peer, mode[5:]) if mode.startswith("pjrt:") else (cpu_peer, mode)
        if where is not None and (mode.startswith("pjrt:") or mode in ("cpu", "inductor")):
            where.call("bench_models", "remote_build", index, m)
            fns[mode] = lambda w=where, m=m: w.call("bench_models", "remote_step", index, m)
            continue
        fn = case.build("tpu" if mode in TPU_MODES else "cpu")
        step = compiled(fn) if mode == "inductor" else fn
        fns[mode] = lambda step=step, mode=mode: timed_step(step, mode)
    samples = {mode: [] for mode in modes}
    for i in range(warmup + steps):
        for mode in modes:
            if i >= warmup and settle > 0:
                # after the pause: untimed steps (at least one, `rewarm` seconds of them) that
                # bring the side back to the speed of back-to-back steps
                spent = 0.0
                while True:
                    spent += fns[mode]()
                    if spent >= rewarm:
                        break
            t = fns[mode]()
            time.sleep(settle)
            if i >= warmup:  # the warm-up steps compile the device's programs
                samples[mode].append(t)
    fallbacks = torch_tpu.metrics.fallback_ops()
    if peer is not None:
        for op, n in peer.call("bench_models", "remote_finish").items():
            fallbacks[f"{op} (pjrt)"] = n
    if cpu_peer is not None:
        cpu_peer.call("bench_models", "remote_finish")
    return {mode: statistics.median(ts) for mode, ts in samples.items()}, fallbacks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=torch.get_num_threads(),
                   help="threads for PyTorch CPU and for the host executor (the same on both sides)")
    p.add_argument("--quick", action="store_true", help="3 warm-up and 5 timed steps per configuration")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--only", default=None, help="comma-separated model names (default: all)")
    p.add_argument("--modes", default="strict,fused", help="tpu eager modes to time (strict, fused, debug)")
    p.add_argument("--inductor", action="store_true", help="also time torch.compile (Inductor) on the CPU")
    p.add_argument("--pjrt", default="", help="tpu eager modes to time on the pjrt backend too (e.g. strict,fused)")
    p.add_argument("--settle-ms", type=float, default=20.0, help="pause after every step")
    p.add_argument("--rewarm-ms", type=float, default=30.0,
                   help="untimed steps after each pause, at least one and this many milliseconds of them")
    p.add_argument("--same-process", action="store_true",
                   help="run PyTorch CPU in this process too (its idle threads then spin into the device's steps)")
    args = p.parse_args()
    if args.quick:
        args.warmup, args.steps = 3, 5
    torch.set_num_threads(args.threads)
    torch_tpu._C._set_num_threads(args.threads)
    cases = CASES
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {c.name for c in CASES}
        if unknown:
            p.error(f"unknown models {sorted(unknown)}; choose from {sorted({c.name for c in CASES})}")
        cases = [c for c in CASES if c.name in names]

    print(f"torch {torch.__version__}, {args.threads} thread(s) for PyTorch CPU and for the host executor; "
          f"{args.warmup} warm-up steps, median of {args.steps} timed steps")
    print(f"device: {torch.tpu.get_device_name()} — tpu figures are host-executor measurements\n")
    tpu_modes = [m for m in args.modes.split(",") if m]
    bad = set(tpu_modes) - set(TPU_MODES)
    if bad:
        p.error(f"unknown modes {sorted(bad)}; choose from {TPU_MODES}")
    pjrt_modes = [m for m in args.pjrt.split(",") if m]
    bad = set(pjrt_modes) - set(TPU_MODES)
    if bad:
        p.error(f"unknown --pjrt modes {sorted(bad)}; choose from {TPU_MODES}")
    peer = None
    if pjrt_modes:
        from _peer import Peer

        peer = Peer("pjrt", args.threads)
        print("pjrt: " + peer.call("bench_models", "device_name") + " — in a peer process, taking turns\n")
    cpu_peer = None
    if not args.same_process:
        from _peer import Peer

        cpu_peer = Peer(os.environ.get("TORCH_TPU_BACKEND", "host"), args.threads)
    modes = ["cpu"] + (["inductor"] if args.inductor else []) + tpu_modes + [f"pjrt:{m}" for m in pjrt_modes]
    cols = [("CPU eager", "cpu")] + ([("Inductor", "inductor")] if args.inductor else [])
    cols += [(f"tpu {m}", m) for m in tpu_modes] + [(f"pjrt {m}", f"pjrt:{m}") for m in pjrt_modes]
    header = f"{'model':<10} {'step':<6} {'size':<13}" + "".join(
        f" {name:>11}" + ("" if mode == "cpu" else f" {'ratio':>6}") for name, mode in cols)
    if "fused" in tpu_modes and "strict" in tpu_modes:
        header += f" {'fused/strict':>12}"
    header += "  fallbacks"
    print(header + "\n" + "-" * len(header), flush=True)
    for case in cases:
        try:
            t, fallbacks = run_case(case, modes, args.warmup, args.steps, peer, cpu_peer, args.settle_ms * 1e-3,
                                     args.rewarm_ms * 1e-3)
        except ImportError as e:  # hf_llama without transformers
            print(f"{case.name:<10} {case.what:<6} skipped: {e}")
            continue
        except Exception as e:
            if type(e).__name__ != "PeerError":
                raise
            print(f"{case.name:<10} {case.what:<6} failed {e}", flush=True)
            continue
        line = f"{case.name:<10} {case.what:<6} {case.size:<13}"
        for name, mode in cols:
            line += f" {t[mode] * 1e3:>9.1f}ms" + ("" if mode == "cpu" else f" {t['cpu'] / t[mode]:>5.2f}x")
        if "fused" in t and "strict" in t:
            line += f" {t['strict'] / t['fused']:>11.2f}x"
        line += f"  {', '.join(sorted(fallbacks)) if fallbacks else 'none'}"
        print(line, flush=True)
    for side in (peer, cpu_peer):
        if side is not None:
            side.close()
    print("\nratio = CPU eager time / that column's time per step (above 1: faster than PyTorch CPU eager);"
          "\nfused/strict = strict time / fused time (above 1: fused mode is faster)")


if __name__ == "__main__":
    main()
