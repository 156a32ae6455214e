"""The main demo: train a character-level GPT on the tpu device, then report.

    bash scripts/demo.sh            # sets everything up, then runs this
    python examples/demo.py --steps 150 --out out/

It trains on a text every Debian system has (the GPL-3 licence text), shows progress, and prints
a report: the loss curve, throughput on the device (fused eager by default, and strict mode
for comparison) vs PyTorch CPU eager on this machine, the
device metrics (compiles, cache hits, CPU-fallback ops), and a sample of generated text. The loss
curve is written as a PNG. The tpu figures are host-executor measurements: the compiled programs
run on this machine's CPU.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import char_gpt  # noqa: E402

import torch_tpu  # noqa: E402


def plot(losses: list[float], path: str) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(losses, label="training loss (tpu, host executor)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    ax.set_title("Character-level GPT on torch_tpu")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--cpu-steps", type=int, default=30, help="steps of the PyTorch CPU baseline")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--mode", default="fused", choices=["fused", "strict", "debug"],
                   help="eager mode of the main run (default fused: whole-window programs)")
    p.add_argument("--compare-steps", type=int, default=30,
                   help="steps of the strict-mode comparison run (0: skip it)")
    p.add_argument("--out", default="out", help="folder for the loss-curve PNG")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch_tpu._C._set_num_threads(args.threads)
    torch_tpu.set_eager_mode(args.mode)
    data = char_gpt.CharData()
    print(f"torch {torch.__version__} | device {torch.tpu.get_device_name()} | {args.threads} thread(s)")
    print(f"training text: {data.path} ({len(data.data):,} characters, {data.vocab_size} symbols)")

    torch_tpu.metrics.reset()
    t0 = time.perf_counter()
    model, losses, tpu_sec = char_gpt.train("tpu", args.steps, args.batch_size, data=data)
    wall = time.perf_counter() - t0
    metrics = torch_tpu.metrics.counters()
    fallbacks = torch_tpu.metrics.fallback_ops()

    strict_sec = None
    if args.mode != "strict" and args.compare_steps > 0:
        print(f"\ntpu strict-mode comparison ({args.compare_steps} steps, one program per op) ...")
        with torch_tpu.eager_mode("strict"):
            _, _, strict_sec = char_gpt.train("tpu", args.compare_steps, args.batch_size, data=data, progress=False)

    print(f"\nPyTorch CPU eager baseline ({args.cpu_steps} steps, same model and data) ...")
    _, cpu_losses, cpu_sec = char_gpt.train("cpu", args.cpu_steps, args.batch_size, data=data, progress=False)

    start = torch.tensor([[data.stoi.get("\n", 0)]], device="tpu")
    sample = model.eval().generate(start, 240, generator=torch.Generator().manual_seed(0))
    text = data.decode(sample[0].tolist())

    os.makedirs(args.out, exist_ok=True)
    png = plot(losses, os.path.join(args.out, "demo_loss.png"))
    tokens = args.batch_size * model.cfg.block_size
    k = max(1, len(losses) // 10)
    print("\n================ torch_tpu demo report ================")
    print(f"model: GPT {model.cfg.n_layer} layers x {model.cfg.n_embd} wide, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters; eager mode '{args.mode}'")
    print(f"loss: {losses[0]:.3f} at step 0 -> {sum(losses[-k:]) / k:.3f} (mean of the last {k} steps), "
          f"min {min(losses):.3f}; {args.steps} steps in {wall:.1f} s")
    print("throughput (host-executor measurements on this machine's CPU):")
    print(f"  tpu ({args.mode})       {tpu_sec * 1e3:8.1f} ms/step  {tokens / tpu_sec:10,.0f} tokens/s")
    if strict_sec is not None:
        print(f"  tpu (strict)       {strict_sec * 1e3:8.1f} ms/step  {tokens / strict_sec:10,.0f} tokens/s")
    print(f"  PyTorch CPU eager  {cpu_sec * 1e3:8.1f} ms/step  {tokens / cpu_sec:10,.0f} tokens/s")
    print(f"  ratio              {cpu_sec / tpu_sec:8.2f}x the CPU eager throughput ({args.mode})")
    if strict_sec is not None:
        print(f"  ratio              {strict_sec / tpu_sec:8.2f}x the strict-mode throughput ({args.mode})")
    print(f"device metrics: {metrics.get('executions', 0):,} programs run, {metrics.get('compiles', 0)} compiles, "
          f"{metrics.get('compile_cache_hits', 0):,} compile-cache hits, {metrics.get('host_syncs', 0):,} host syncs")
    print(f"CPU fallback ops: {', '.join(f'{k} x{v}' for k, v in fallbacks.items()) if fallbacks else 'none'}")
    print(f"loss curve: {os.path.abspath(png) if png else '(matplotlib not installed)'}")
    print("sample:\n" + "-" * 56 + "\n" + text + "\n" + "-" * 56)


if __name__ == "__main__":
    main()
