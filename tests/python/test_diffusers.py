"""Hugging Face diffusers on the device: a UNet2DModel from a tiny config (random weights, nothing
downloaded: HF_HUB_OFFLINE=1), forward and backward on the device vs the same model on PyTorch
CPU from the same weights, in both eager modes with zero CPU-fallback ops. Skipped only when
diffusers is not installed (scripts/setup.sh installs it).

The config has both of UNet2DModel's block kinds (ResNet blocks with the timestep embedding,
attention blocks at the lower resolution and in the middle), GroupNorm, strided-conv down- and
nearest up-sampling, and skip concatenation.

Tolerances: outputs at rtol 1e-4 / atol 1e-5 (every op matches CPU to float32 rounding; the
forward differs by ~1e-6). A gradient is a sum with cancellation whose error scales with its
largest terms, so each is compared to 1e-4 of its largest magnitude (as test_resnet.py). The
attention key biases are the exception: adding a bias to every key shifts all scores of a query
equally, which softmax cancels, so their gradient is zero in exact arithmetic and what both sides
compute is rounding noise (~1e-10); they are checked to be that small on both sides.
"""
import copy
import os

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

os.environ.setdefault("HF_HUB_OFFLINE", "1")
diffusers = pytest.importorskip("diffusers")

CONFIG = dict(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
              down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
              norm_num_groups=4, attention_head_dim=8)


def make_pair():
    torch.manual_seed(0)
    cpu = diffusers.UNet2DModel(**CONFIG)
    return cpu, copy.deepcopy(cpu).to("tpu")


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 16, 16, generator=g)
    return x, torch.tensor([10, 700]), torch.randn(2, 3, 16, 16, generator=g)


def forward_backward(model, device):
    x, t, target = (v.to(device) for v in inputs())
    out = model(x, t).sample
    loss = F.mse_loss(out, target)
    loss.backward()
    return out.detach().cpu(), loss.item()


def test_unet2d_forward_backward_matches_cpu(mode):
    cpu, dev = make_pair()
    want_out, want_loss = forward_backward(cpu, "cpu")
    torch_tpu.metrics.reset()
    got_out, got_loss = forward_backward(dev, "tpu")
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(got_out, want_out, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=0)
    largest = max(p.grad.abs().max().item() for p in cpu.parameters())
    for (name, p_cpu), p_dev in zip(cpu.named_parameters(), dev.parameters()):
        got, want = p_dev.grad.cpu(), p_cpu.grad
        if name.endswith("to_k.bias"):  # zero in exact arithmetic (see above)
            assert got.abs().max() <= 1e-6 * largest and want.abs().max() <= 1e-6 * largest, name
            continue
        err, scale = (got - want).abs().max().item(), want.abs().max().item()
        assert err <= 1e-4 * scale + 1e-9, f"grad of {name}: max error {err:.3g} for values up to {scale:.3g}"


def test_unet2d_eval_forward_matches_cpu(no_fallback):
    cpu, dev = make_pair()
    x, _, _ = inputs(seed=1)
    t = torch.tensor([0, 999])
    with torch.no_grad():
        want = cpu.eval()(x, t).sample
        got = dev.eval()(x.to("tpu"), t.to("tpu")).sample
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
