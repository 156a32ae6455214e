"""Input-pipeline overlap: a training loop fed directly by a DataLoader vs through
torch_tpu.data.DeviceLoader, side by side.

Each batch costs the host `--host-ms` of latency to produce (a sleep standing in for reading and
decoding; it releases the GIL as I/O does), and each training step costs the device about as
much (an MLP sized by calibration). Fed directly, a step waits for its batch and then for the
device: about host + device per step. With DeviceLoader the next batches are produced and copied
while the device works: about max(host, device). The tpu numbers are host-executor measurements
(the programs run on this machine's CPU).

    python benchmarks/bench_loader.py [--host-ms 20] [--steps 30] [--threads 2]
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

import torch_tpu
from torch_tpu.data import DeviceLoader

BATCH, FEATURES = 256, 512


class SlowBatches(Dataset):
    def __init__(self, n: int, host_ms: float):
        self.n, self.host_s = n, host_ms / 1e3

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.host_s)
        g = torch.Generator().manual_seed(i)
        return torch.randn(BATCH, FEATURES, generator=g), torch.randint(0, 10, (BATCH,), generator=g)


def make_model(width: int, depth: int) -> nn.Module:
    layers = [nn.Linear(FEATURES, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10)).to("tpu")


def run(batches, model: nn.Module, opt: torch.optim.Optimizer) -> tuple[float, int]:
    """Seconds per step (after the first, which pays compiles) over the batches."""
    t0, steps = None, 0
    for x, y in batches:
        x, y = x.to("tpu"), y.to("tpu")  # a no-op for DeviceLoader's batches
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the step is done
        if t0 is None:
            t0 = time.perf_counter()
        else:
            steps += 1
    return (time.perf_counter() - t0) / max(steps, 1), steps


def device_step_ms(depth: int, width: int, iters: int = 8) -> float:
    model = make_model(width, depth)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = [SlowBatches(1, 0)[0]] * iters
    sec, _ = run(data, model, opt)
    return sec * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host-ms", type=float, default=20.0, help="host latency per batch")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--prefetch", type=int, default=2)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--mode", default="strict", choices=["strict", "debug"])
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch_tpu._C._set_num_threads(args.threads)
    torch_tpu.set_eager_mode(args.mode)

    # Calibrate the model (narrower, or deeper) so one step costs the device about --host-ms.
    width, depth = 512, 1
    step_ms = device_step_ms(depth, width)
    while step_ms > 1.25 * args.host_ms and width > 32:
        width //= 2
        step_ms = device_step_ms(depth, width)
    while step_ms < 0.8 * args.host_ms and depth < 64:
        depth = max(depth + 1, int(depth * args.host_ms / max(step_ms, 1e-3)))
        step_ms = device_step_ms(depth, width)
    print(f"host latency {args.host_ms:.1f} ms/batch; device step {step_ms:.1f} ms "
          f"(MLP {depth} x {width}, batch {BATCH}); {args.threads} thread(s), eager mode '{args.mode}'")

    results = {}
    for name in ("DataLoader", "DeviceLoader"):
        torch.manual_seed(0)
        model = make_model(width, depth)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        loader = DataLoader(SlowBatches(args.steps + 1, args.host_ms), batch_size=None)
        feed = DeviceLoader(loader, "tpu", prefetch=args.prefetch) if name == "DeviceLoader" else loader
        sec, _ = run(feed, model, opt)
        results[name] = sec
        extra = f"   consumer waited {feed.wait_seconds * 1e3 / (args.steps + 1):.1f} ms/step" \
            if name == "DeviceLoader" else ""
        print(f"  {name:<13} {sec * 1e3:7.1f} ms/step{extra}")
    ideal_serial = args.host_ms + step_ms
    ideal_overlap = max(args.host_ms, step_ms)
    print(f"  expected      {ideal_serial:7.1f} ms/step serial, {ideal_overlap:.1f} ms/step fully overlapped")
    print(f"  speed-up      {results['DataLoader'] / results['DeviceLoader']:7.2f}x with DeviceLoader")


if __name__ == "__main__":
    main()
