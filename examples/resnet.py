"""ResNet-18 and ResNet-50 (our own definitions): training on synthetic images, or an inference
benchmark.

    python examples/resnet.py --device tpu --mode strict --steps 50
    python examples/resnet.py --device cpu --steps 50                 # the same run on PyTorch CPU
    python examples/resnet.py --arch resnet50 --width 16 --steps 20 --save ckpt.pt
    python examples/resnet.py --arch resnet50 --width 16 --steps 30 --resume ckpt.pt
    python examples/resnet.py --infer --batch-size 32 --steps 20      # eval mode, images/s

The networks follow the published layout (He et al.; torchvision's v1.5 variant, the stride on
the 3x3 convolution of a bottleneck): a 7x7/2 stem and a 3x3/2 max pool, four stages of basic
blocks (ResNet-18: 2-2-2-2) or bottlenecks (ResNet-50: 3-4-6-3, 4x channel expansion), global
average pooling and a linear classifier. `--width` is the stem's channel count (64 in the
paper): smaller widths keep the same structure at a fraction of the cost, for 2 CPU cores.

Training is SGD with momentum and weight decay; batch norm keeps its running statistics in
buffers, which are part of the checkpoint. The images are synthetic, a pure function of (seed,
step): every class is a fixed smooth pattern, each image that pattern plus strong noise, so the loss
falls within a few dozen steps and nothing is downloaded.
"""
from __future__ import annotations

import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training import (  # noqa: E402  (what the examples share)
    example_parser, load_checkpoint, parse_example_args, print_run, run_steps, save_checkpoint)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions; the shortcut is a strided 1x1 convolution when the shape changes."""
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = shortcut(cin, cout, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand by 4."""
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = shortcut(cin, cout, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


def shortcut(cin: int, cout: int, stride: int) -> nn.Module | None:
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    def __init__(self, block: type, depths: list[int], width: int = 64, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, cin = [], width
        for i, depth in enumerate(depths):
            planes = width * 2 ** i
            blocks = [block(cin, planes, 1 if i == 0 else 2)]
            cin = planes * block.expansion
            blocks += [block(cin, planes, 1) for _ in range(depth - 1)]
            stages.append(nn.Sequential(*blocks))
        self.layers = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.avgpool(self.layers(x))
        return self.fc(torch.flatten(x, 1))


def resnet18(width: int = 64, num_classes: int = 10) -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2], width, num_classes)


def resnet50(width: int = 64, num_classes: int = 10) -> ResNet:
    return ResNet(Bottleneck, [3, 4, 6, 3], width, num_classes)


ARCHS = {"resnet18": resnet18, "resnet50": resnet50}
# SGD learning rates that train stably at batch 16 (the deeper ResNet-50 wants a smaller one).
DEFAULT_LR = {"resnet18": 0.01, "resnet50": 0.005}


# ---- synthetic images ----------------------------------------------------------------------------

class SyntheticImages:
    """Batch i is a pure function of (seed, i). Class c is a smooth random pattern (4x4 noise
    upsampled bilinearly); an image is its class's pattern plus Gaussian noise (std 1.5)."""

    def __init__(self, image_size: int = 32, num_classes: int = 10, seed: int = 0):
        self.image_size, self.num_classes, self.seed = image_size, num_classes, seed
        g = torch.Generator().manual_seed(seed)
        coarse = torch.randn(num_classes, 3, 4, 4, generator=g)
        self.patterns = F.interpolate(coarse, size=(image_size, image_size), mode="bilinear",
                                      align_corners=False)

    def batch(self, i: int, batch_size: int):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i + 1)
        y = torch.randint(0, self.num_classes, (batch_size,), generator=g)
        noise = torch.randn(batch_size, 3, self.image_size, self.image_size, generator=g)
        return self.patterns[y] + 1.5 * noise, y


# ---- training ------------------------------------------------------------------------------------

def sgd(model: nn.Module, lr: float) -> torch.optim.SGD:
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x, y):
    """One SGD step; returns the loss (a device tensor: reading it is the caller's sync point)."""
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def _describe_arch(config: dict) -> str:
    return f"{config['arch']} width {config['width']}"


def train(arch: str, device: str, steps: int, batch_size: int = 16, width: int = 16, image_size: int = 32,
          lr: float | None = None, seed: int = 0, save: str | None = None, resume: str | None = None,
          progress: bool = True):
    """Trains from a fixed seed up to step `steps` (from the checkpoint's step when resuming).
    Returns (model, losses of the steps run here, seconds per step after warm-up)."""
    torch.manual_seed(seed)
    model = ARCHS[arch](width).to(device).train()
    opt = sgd(model, lr or DEFAULT_LR[arch])
    data = SyntheticImages(image_size, seed=seed)
    # The checkpoint's model state holds the batch-norm running statistics (buffers) too.
    config = {"arch": arch, "width": width}
    start = load_checkpoint(resume, config, model, opt, describe=_describe_arch) if resume else 0

    def step_fn(step):
        x, y = data.batch(step, batch_size)
        return train_step(model, opt, x.to(device), y.to(device))

    losses, sec = run_steps(step_fn, start, steps, f"train {arch} {device}", batch_size, "img", progress)
    if save:
        save_checkpoint(save, config, model, opt, max(start, steps))
    return model, losses, sec


@torch.no_grad()
def benchmark_inference(model: nn.Module, device: str, steps: int, batch_size: int = 32, image_size: int = 32,
                        warmup: int = 3, progress: bool = True) -> float:
    """Eval mode (batch norm uses its running statistics), no autograd. Returns images/s."""
    model.eval()
    x, _ = SyntheticImages(image_size).batch(0, batch_size)
    x = x.to(device)
    for _ in range(warmup):  # the first calls compile the programs
        model(x).cpu()
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=steps, desc=f"infer {device}", unit="batch")
    t0 = time.perf_counter()
    for _ in range(steps):
        out = model(x)
        if bar:
            bar.update(1)
    out.cpu()  # a sync point: every queued batch has finished
    sec = time.perf_counter() - t0
    if bar:
        bar.set_postfix(img_s=f"{batch_size * steps / sec:,.0f}")
        bar.close()
    return batch_size * steps / sec


def main() -> None:
    p = example_parser(__doc__, checkpoints=True)
    p.add_argument("--arch", default="resnet18", choices=sorted(ARCHS))
    p.add_argument("--width", type=int, default=16, help="stem channels (64 in the paper)")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=50, help="training steps (or timed batches with --infer)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=None, help=f"SGD learning rate (default {DEFAULT_LR})")
    p.add_argument("--infer", action="store_true", help="inference benchmark instead of training")
    args = parse_example_args(p)
    if args.infer:
        torch.manual_seed(0)
        model = ARCHS[args.arch](args.width).to(args.device)
        if args.resume:
            model.load_state_dict(torch.load(args.resume, map_location="cpu")["model"])
        img_s = benchmark_inference(model, args.device, args.steps, args.batch_size, args.image_size)
        print(f"{args.arch} (width {args.width}) inference on {args.device}: {img_s:,.1f} images/s "
              f"(batch {args.batch_size}, {args.image_size}x{args.image_size})")
        return
    model, losses, sec = train(args.arch, args.device, args.steps, args.batch_size, args.width,
                               args.image_size, args.lr, save=args.save, resume=args.resume)
    n_params = sum(p.numel() for p in model.parameters())
    print_run(f"{args.arch} (width {args.width}): {n_params:,} parameters", losses, sec, args.batch_size,
              "images", args.save)


if __name__ == "__main__":
    main()
