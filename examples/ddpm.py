"""A small denoising diffusion model (DDPM): a UNet trained to predict noise, then sampling.

    python examples/ddpm.py --device tpu --mode strict --steps 200
    python examples/ddpm.py --device cpu --steps 200                 # the same run on PyTorch CPU
    python examples/ddpm.py --steps 100 --save ckpt.pt
    python examples/ddpm.py --steps 300 --resume ckpt.pt --sample-steps 50 --out samples.png

Ho et al.'s recipe at toy size. The UNet embeds the timestep (sinusoidal features, then an MLP)
and adds it inside every residual block (GroupNorm, SiLU, 3x3 convolutions); it goes down by
strided convolutions and up by nearest-neighbour upsampling and a convolution, concatenating the
skip connections of the way down; one self-attention block sits at the lowest resolution.
Training draws a timestep t and noise e per image, forms x_t = sqrt(abar_t) x_0 +
sqrt(1 - abar_t) e (the linear beta schedule) and regresses e with MSE. Sampling is ancestral
(x_{t-1} drawn from the posterior given the predicted noise) over `--sample-steps` timesteps
spaced across the schedule, their betas recomputed from abar (Nichol & Dhariwal's respacing).

The images are synthetic (a disc or a square of one colour on a two-colour gradient), a pure
function of (seed, step): nothing is downloaded, and a resumed run sees the same batches.
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training import (  # noqa: E402  (what the examples share)
    example_parser, load_checkpoint, parse_example_args, print_run, run_steps, save_checkpoint)


@dataclass
class UNetConfig:
    image_size: int = 16
    channels: int = 3
    base: int = 32                          # channels at full resolution
    mults: tuple[int, ...] = (1, 2, 2)      # per level; every level but the last halves the size
    groups: int = 8                         # GroupNorm groups (divides every channel count)
    attention: bool = True                  # self-attention at the lowest resolution
    timesteps: int = 1000                   # T of the noise schedule


def timestep_embedding(t, dim: int):
    """Sinusoidal features of the (float) timesteps t (B,) -> (B, dim), frequencies 1 .. 1/10000."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, device=t.device, dtype=torch.float32) * (-math.log(10000.0) / half))
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


class ResBlock(nn.Module):
    """GroupNorm-SiLU-conv twice; the time embedding is projected and added per channel between."""

    def __init__(self, cin: int, cout: int, tdim: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.time = nn.Linear(tdim, cout)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class SelfAttention(nn.Module):
    """Single-head attention over the H*W positions, with a residual connection."""

    def __init__(self, ch: int, groups: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        B, C, H, W = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(B, 3, C, H * W).transpose(2, 3).unbind(1)  # (B, HW, C)
        h = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj(h.transpose(1, 2).reshape(B, C, H, W))


class Downsample(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


class Upsample(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2, mode="nearest"))


class UNet(nn.Module):
    """Predicts the noise in x_t (B, C, S, S) at timesteps t (B,)."""

    def __init__(self, cfg: UNetConfig):
        super().__init__()
        self.cfg = cfg
        chans = [cfg.base * m for m in cfg.mults]
        tdim = 4 * cfg.base
        self.time_mlp = nn.Sequential(nn.Linear(cfg.base, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.conv_in = nn.Conv2d(cfg.channels, chans[0], 3, padding=1)
        self.down = nn.ModuleList()
        cin = chans[0]
        for i, c in enumerate(chans):
            last = i == len(chans) - 1
            self.down.append(nn.ModuleDict(dict(res=ResBlock(cin, c, tdim, cfg.groups),
                                                down=nn.Identity() if last else Downsample(c))))
            cin = c
        self.mid1 = ResBlock(cin, cin, tdim, cfg.groups)
        self.mid_attn = SelfAttention(cin, cfg.groups) if cfg.attention else nn.Identity()
        self.mid2 = ResBlock(cin, cin, tdim, cfg.groups)
        self.up = nn.ModuleList()
        for i, c in reversed(list(enumerate(chans))):
            # Each level's block takes the path from below concatenated with that level's skip.
            self.up.append(nn.ModuleDict(dict(res=ResBlock(cin + c, c, tdim, cfg.groups),
                                              up=Upsample(c) if i > 0 else nn.Identity())))
            cin = c
        self.norm_out = nn.GroupNorm(cfg.groups, cin)
        self.conv_out = nn.Conv2d(cin, cfg.channels, 3, padding=1)

    def forward(self, x, t):
        temb = self.time_mlp(timestep_embedding(t, self.cfg.base))
        h = self.conv_in(x)
        skips = []
        for level in self.down:
            h = level["res"](h, temb)
            skips.append(h)
            h = level["down"](h)
        h = self.mid2(self.mid_attn(self.mid1(h, temb)), temb)
        for level in self.up:
            h = level["res"](torch.cat([h, skips.pop()], dim=1), temb)
            h = level["up"](h)
        return self.conv_out(F.silu(self.norm_out(h)))


# ---- the diffusion process -----------------------------------------------------------------------

class DDPMSchedule:
    """Linear betas 1e-4 .. 0.02 over T steps; abar_t = prod_{s<=t} (1 - beta_s) (kept in float64
    on the host: the sampler's coefficients are Python scalars)."""

    def __init__(self, timesteps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02):
        self.timesteps = timesteps
        betas = torch.linspace(beta_start, beta_end, timesteps, dtype=torch.float64)
        self.abar = torch.cumprod(1 - betas, dim=0)
        self._device_abar = {}  # float32 copies of abar, per device, for add_noise

    def add_noise(self, x0, noise, t):
        """x_t for integer timesteps t (B,), all on x0's device (abar_t is gathered there)."""
        table = self._device_abar.get(str(x0.device))
        if table is None:
            table = self._device_abar[str(x0.device)] = self.abar.float().to(x0.device)
        abar = table[t][:, None, None, None]
        return abar.sqrt() * x0 + (1 - abar).sqrt() * noise

    def sampling_timesteps(self, n: int) -> list[int]:
        """n timesteps from T-1 down to 0, evenly spaced."""
        return torch.linspace(self.timesteps - 1, 0, n).round().long().unique_consecutive().tolist()

    def ancestral_step(self, x, eps, t: int, t_prev: int, noise):
        """x_{t_prev} from x_t and the predicted noise: the posterior mean, plus sqrt(posterior
        variance) * noise unless t_prev < 0 (the last step returns the mean)."""
        abar_t = self.abar[t].item()
        abar_prev = self.abar[t_prev].item() if t_prev >= 0 else 1.0
        beta = 1 - abar_t / abar_prev  # the beta of the (respaced) step t -> t_prev
        mean = (x - (beta / math.sqrt(1 - abar_t)) * eps) / math.sqrt(1 - beta)
        if t_prev < 0:
            return mean
        var = beta * (1 - abar_prev) / (1 - abar_t)
        return mean + math.sqrt(var) * noise


@torch.no_grad()
def sample(model: UNet, schedule: DDPMSchedule, n: int, steps: int, device, seed: int = 0):
    """Ancestral sampling over `steps` timesteps. The noise is drawn on the host from `seed` (the
    same on every device); returns images (n, C, S, S) clamped to [-1, 1]."""
    cfg = model.cfg
    g = torch.Generator().manual_seed(seed)
    shape = (n, cfg.channels, cfg.image_size, cfg.image_size)
    x = torch.randn(shape, generator=g).to(device)
    ts = schedule.sampling_timesteps(steps)
    for t, t_prev in zip(ts, ts[1:] + [-1]):
        eps = model(x, torch.full((n,), t, device=device))
        x = schedule.ancestral_step(x, eps, t, t_prev, torch.randn(shape, generator=g).to(device))
    return x.clamp(-1, 1)


# ---- synthetic images ----------------------------------------------------------------------------

def synthetic_images(n: int, size: int, generator: torch.Generator):
    """(n, 3, size, size) in [-1, 1]: a disc or a square of one colour on a linear gradient
    between two colours along a random direction."""
    g = generator
    coords = (torch.arange(size, dtype=torch.float32) + 0.5) / size
    yy, xx = coords[:, None], coords[None, :]
    angle = torch.rand(n, 1, 1, generator=g) * 2 * math.pi
    ramp = ((xx - 0.5) * angle.cos() + (yy - 0.5) * angle.sin() + 0.71) / 1.42  # (n, S, S), 0..1
    c0, c1, c_shape = (torch.rand(n, 3, 1, 1, generator=g) * 2 - 1 for _ in range(3))
    img = c0 + (c1 - c0) * ramp[:, None]
    cy, cx = (torch.rand(n, 1, 1, generator=g) * 0.5 + 0.25 for _ in range(2))
    r = torch.rand(n, 1, 1, generator=g) * 0.15 + 0.1
    disc = (xx - cx) ** 2 + (yy - cy) ** 2 < r ** 2
    square = ((xx - cx).abs() < r) & ((yy - cy).abs() < r)
    is_disc = torch.rand(n, 1, 1, generator=g) < 0.5
    mask = torch.where(is_disc, disc, square)[:, None]
    return torch.where(mask, c_shape, img).clamp(-1, 1)


def training_batch(step: int, batch_size: int, cfg: UNetConfig, seed: int = 0):
    """(x0, t, noise) of one step: a pure function of (seed, step)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step + 1)
    x0 = synthetic_images(batch_size, cfg.image_size, g)
    t = torch.randint(0, cfg.timesteps, (batch_size,), generator=g)
    return x0, t, torch.randn(x0.shape, generator=g)


# ---- training ------------------------------------------------------------------------------------

def train_step(model: UNet, schedule: DDPMSchedule, opt: torch.optim.Optimizer, x0, t, noise):
    """One noise-prediction step; returns the MSE loss (a device tensor)."""
    loss = F.mse_loss(model(schedule.add_noise(x0, noise, t), t), noise)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def train(device: str, steps: int, batch_size: int = 16, cfg: UNetConfig | None = None, lr: float = 1e-3,
          seed: int = 0, save: str | None = None, resume: str | None = None, progress: bool = True):
    """Trains from a fixed seed up to step `steps` (from the checkpoint's step when resuming).
    Returns (model, schedule, losses of the steps run here, seconds per step after warm-up)."""
    cfg = cfg or UNetConfig()
    torch.manual_seed(seed)
    model = UNet(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = DDPMSchedule(cfg.timesteps)
    start = load_checkpoint(resume, dataclasses.asdict(cfg), model, opt) if resume else 0

    def step_fn(step):
        x0, t, noise = (v.to(device) for v in training_batch(step, batch_size, cfg, seed))
        return train_step(model, schedule, opt, x0, t, noise)

    losses, sec = run_steps(step_fn, start, steps, f"train ddpm {device}", batch_size, "img", progress,
                            loss_digits=4)
    if save:
        save_checkpoint(save, dataclasses.asdict(cfg), model, opt, max(start, steps))
    return model, schedule, losses, sec


def save_grid(images, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    n = images.size(0)
    fig, axes = plt.subplots(1, n, figsize=(1.5 * n, 1.7))
    for ax, img in zip([axes] if n == 1 else axes, images.cpu()):
        ax.imshow(((img.permute(1, 2, 0) + 1) / 2).clamp(0, 1).numpy())
        ax.axis("off")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return True


def main() -> None:
    p = example_parser(__doc__, checkpoints=True)
    p.add_argument("--steps", type=int, default=200, help="train up to this step (counted from 0)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--base", type=int, default=32, help="UNet channels at full resolution")
    p.add_argument("--image-size", type=int, default=16)
    p.add_argument("--samples", type=int, default=8, help="images to sample after training (0: none)")
    p.add_argument("--sample-steps", type=int, default=25, help="ancestral sampling steps")
    p.add_argument("--out", default=None, help="write the samples as a PNG here")
    args = parse_example_args(p)
    cfg = UNetConfig(image_size=args.image_size, base=args.base)
    model, schedule, losses, sec = train(args.device, args.steps, args.batch_size, cfg, args.lr,
                                         save=args.save, resume=args.resume)
    k = max(1, len(losses) // 10)
    mse = f"noise MSE {losses[0]:.4f} -> {sum(losses[-k:]) / k:.4f}" if losses else None
    print_run(f"UNet: {sum(p.numel() for p in model.parameters()):,} parameters", losses, sec, args.batch_size,
              "images", args.save, loss_text=mse)
    if args.samples > 0:
        t0 = time.perf_counter()
        images = sample(model.eval(), schedule, args.samples, args.sample_steps, args.device).cpu()
        print(f"sampled {args.samples} images in {args.sample_steps} steps ({time.perf_counter() - t0:.1f} s): "
              f"pixel mean {images.mean():.3f}, std {images.std():.3f}")
        if args.out and save_grid(images, args.out):
            print(f"samples: {args.out}")


if __name__ == "__main__":
    main()
