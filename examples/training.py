"""What the example scripts share: their common command-line options, and the training loop
(numbered steps with a tqdm progress bar: step, loss, throughput; the time per step)."""
from __future__ import annotations

import argparse
import time
from typing import Callable

import torch


def example_parser(doc: str, checkpoints: bool = False) -> argparse.ArgumentParser:
    """An argument parser with the options every example takes: --device and --mode (and, with
    `checkpoints`, --save and --resume)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    p.add_argument("--mode", default="strict", choices=["strict", "debug"], help="tpu eager mode")
    if checkpoints:
        p.add_argument("--save", default=None, help="write a checkpoint here after training")
        p.add_argument("--resume", default=None, help="continue from this checkpoint")
    return p


def parse_example_args(p: argparse.ArgumentParser) -> argparse.Namespace:
    """Parses an example_parser()'s arguments and, on the tpu device, applies --mode."""
    args = p.parse_args()
    if args.device == "tpu":
        import torch_tpu
        torch_tpu.set_eager_mode(args.mode)
    return args


def save_checkpoint(path: str, config: dict, model: torch.nn.Module, opt: torch.optim.Optimizer, step: int,
                    data_rng: torch.Generator | None = None) -> None:
    """Everything a resumed run needs; tensors are saved from the device they live on. The random
    states go in too (the data sampler's, the CPU's and the model's device's), so dropout draws
    the same masks after a resume."""
    torch.save({"config": config, "step": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "data_rng": data_rng.get_state() if data_rng is not None else None, "rng": _rng_states(model)}, path)


def _rng_states(model: torch.nn.Module) -> dict:
    states = {"cpu": torch.get_rng_state()}
    device = next(model.parameters()).device
    if device.type != "cpu":
        states[device.type] = torch.get_device_module(device.type).get_rng_state(device)
    return states


def load_checkpoint(path: str, config: dict, model: torch.nn.Module, opt: torch.optim.Optimizer,
                    data_rng: torch.Generator | None = None, describe: Callable[[dict], str] = repr) -> int:
    """Restores a save_checkpoint() file into `model`, `opt` and `data_rng`; returns its step.
    A file saved for another `config` is refused, naming both (as `describe` words them)."""
    # Loaded to the host first: load_state_dict copies the weights into the model's device tensors,
    # and the optimizer moves each state tensor next to its parameter (keeping step counts on the
    # host, where PyTorch keeps them).
    ckpt = torch.load(path, map_location="cpu")
    if ckpt["config"] != config:
        raise ValueError(f"{path} was saved for another model config: {describe(ckpt['config'])}, "
                         f"not {describe(config)}")
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    if data_rng is not None:
        data_rng.set_state(ckpt["data_rng"])
    device = next(model.parameters()).device
    for kind, state in ckpt.get("rng", {}).items():
        if kind == "cpu":
            torch.set_rng_state(state)
        elif kind == device.type:
            torch.get_device_module(kind).set_rng_state(state, device)
    return ckpt["step"]


def run_steps(step_fn: Callable[[int], object], start: int, steps: int, desc: str, items_per_step: int,
              items: str, progress: bool = True, loss_digits: int = 3, warmup: int = 3):
    """Runs step_fn(step) for step in [start, steps); each returns its loss as a tensor, which is
    read at once (a sync point: the step has finished when its time is taken). `items_per_step`
    `items` (e.g. 1024 "tok") give the throughput shown. Returns (losses, seconds per step after
    `warmup` steps, the ones that compile)."""
    losses, times = [], []
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=steps, initial=start, desc=desc, unit="step")
    for step in range(start, steps):
        t0 = time.perf_counter()
        losses.append(step_fn(step).item())
        times.append(time.perf_counter() - t0)
        if bar:
            bar.set_postfix({"loss": f"{losses[-1]:.{loss_digits}f}",
                             f"{items}_s": f"{items_per_step / times[-1]:,.0f}"})
            bar.update(1)
    if bar:
        bar.close()
    steady = times[min(warmup, len(times) - 1):] or [float("nan")]
    return losses, sum(steady) / len(steady)


def print_run(header: str, losses: list[float], sec: float, items_per_step: float, items: str,
              save: str | None, loss_text: str | None = None) -> None:
    """The line an example prints after training: `header`, the loss (first -> last, unless
    `loss_text` says otherwise), time per step, throughput, and where the checkpoint went."""
    print(f"{header}; ", end="")
    if losses:
        loss_text = loss_text or f"loss {losses[0]:.3f} -> {losses[-1]:.3f}"
        print(f"{loss_text}; {sec * 1e3:.1f} ms/step, {items_per_step / sec:,.0f} {items}/s")
    else:
        print("nothing to train (already at --steps)")
    if save:
        print(f"checkpoint: {save}")
