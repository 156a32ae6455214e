"""The training loop the example scripts share: numbered steps with a tqdm progress bar (step,
loss, throughput) and the time per step."""
from __future__ import annotations

import time
from typing import Callable


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
