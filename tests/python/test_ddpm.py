"""examples/ddpm.py on the device vs the same script on PyTorch CPU: the diffusion UNet (timestep
embedding, GroupNorm/SiLU residual blocks, strided-conv down- and nearest up-sampling, skip
concatenation, self-attention), the noise-prediction training step with Adam, and ancestral
sampling, in both eager modes with zero CPU-fallback ops.

Tolerances: every op matches CPU to float32 rounding (a UNet forward to ~1e-6 of its outputs), and
the model has no max pools or ReLUs whose gradients could jump, so losses over several Adam steps
match at rtol 1e-4. Parameters are judged against the same training run in float64 on the CPU
(the exact reference), at rtol 1e-4 / atol 1e-5 plus twice CPU float32's own largest error on that
tensor: Adam's normalisation makes the update of an element with a small gradient sensitive to
its rounding, and CPU float32 itself is 3e-6 off the float64 weights there (mid2.time.weight,
whose float32 results moved by 1.4e-5 when the device's convolutions were split by images: no
float32 order of the sums is the reference one).
One exception: the key third of the attention's qkv bias. Adding a bias to every key adds the same
q.b to all scores of a query, which softmax cancels: its gradient is zero in exact arithmetic
(~1e-11 here, rounding noise), and Adam turns that noise into steps of up to lr on either side,
so it is only checked to stay within lr per step of CPU's. Sampling chains the UNet through
`steps` ancestral updates, each dividing by sqrt(1 - beta) and scaling the predicted noise by up
to beta / sqrt(1 - abar): differences grow to ~3e-5 over 6 steps, compared at atol 1e-4.
"""
import math
import os
import sys

import torch

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import ddpm  # noqa: E402

# 8x8 images, channels 8/16/16 over three levels: attention at 2x2.
SMALL = ddpm.UNetConfig(image_size=8, base=8, groups=4)
LR = 1e-3


def run(device, steps, **kw):
    return ddpm.train(device, steps, batch_size=4, cfg=SMALL, lr=LR, progress=False, **kw)


def run_cpu_float64(steps, monkeypatch):
    """run("cpu", steps) in float64: the model, its inputs and the timestep features."""
    def embedding(t, dim):
        half = dim // 2
        freqs = torch.exp(torch.arange(half, dtype=torch.float64) * (-math.log(10000.0) / half))
        args = t.double()[:, None] * freqs[None]
        return torch.cat([torch.sin(args), torch.cos(args)], dim=1)

    monkeypatch.setattr(ddpm, "timestep_embedding", embedding)
    torch.manual_seed(0)  # as ddpm.train: the same initial weights, then widened
    model = ddpm.UNet(SMALL).double()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    schedule = ddpm.DDPMSchedule(SMALL.timesteps)
    for step in range(steps):
        x0, t, noise = ddpm.training_batch(step, 4, SMALL)
        ddpm.train_step(model, schedule, opt, x0.double(), t, noise.double())
    monkeypatch.undo()
    return model


def assert_params_close(dev_model, cpu_model, exact_model, steps):
    for (name, p_cpu), p_dev, p_exact in zip(cpu_model.named_parameters(), dev_model.parameters(),
                                             exact_model.parameters()):
        assert p_dev.device.type == "tpu", name
        got, want, exact = p_dev.detach().cpu().double(), p_cpu.detach().double(), p_exact.detach()
        if name == "mid_attn.qkv.bias":  # q, k, v biases: the key part's gradient is noise (see above)
            c = want.numel() // 3
            torch.testing.assert_close(got[c:2 * c], want[c:2 * c], rtol=0, atol=LR * steps, msg=name)
            got, want, exact = (torch.cat([v[:c], v[2 * c:]]) for v in (got, want, exact))
        cpu_error = (want - exact).abs().max().item()
        torch.testing.assert_close(got, exact, rtol=1e-4, atol=1e-5 + 2 * cpu_error,
                                   msg=lambda m: f"{name} (CPU float32 off by {cpu_error:.1e}): {m}")


def test_training_and_sampling_match_cpu(mode, monkeypatch):
    cpu_model, schedule, cpu_losses, _ = run("cpu", 5)
    exact_model = run_cpu_float64(5, monkeypatch)
    torch_tpu.metrics.reset()
    dev_model, _, dev_losses, _ = run("tpu", 5)
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6)
    assert_params_close(dev_model, cpu_model, exact_model, 5)
    assert cpu_losses[-1] < cpu_losses[0]  # it trained
    # Sampling from the trained weights with the same noise (drawn on the host from one seed).
    want = ddpm.sample(cpu_model.eval(), schedule, 3, 6, "cpu", seed=1)
    got = ddpm.sample(dev_model.eval(), schedule, 3, 6, "tpu", seed=1)
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()


def test_sampling_from_identical_weights_matches_cpu(mode, no_fallback):
    torch.manual_seed(3)
    cpu_model = ddpm.UNet(SMALL).eval()
    dev_model = ddpm.UNet(SMALL).to("tpu").eval()
    dev_model.load_state_dict(cpu_model.state_dict())
    schedule = ddpm.DDPMSchedule(SMALL.timesteps)
    want = ddpm.sample(cpu_model, schedule, 2, 4, "cpu", seed=2)
    got = ddpm.sample(dev_model, schedule, 2, 4, "tpu", seed=2)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


class Oracle(torch.nn.Module):
    """Predicts the exact noise of x_t given the true x0: the sampler must then return x0."""

    def __init__(self, x0, schedule):
        super().__init__()
        self.cfg, self.x0, self.schedule = SMALL, x0, schedule

    def forward(self, x, t):
        abar = self.schedule.abar.float().to(x.device)[t][:, None, None, None]
        return (x - abar.sqrt() * self.x0) / (1 - abar).sqrt()


def test_sampler_recovers_x0_with_an_exact_noise_predictor(no_fallback):
    # Not a CPU comparison: the schedule's algebra. With the true noise, the posterior mean of the
    # last step (to t = -1, abar = 1) is x0 itself, whatever the noise drawn on the way.
    schedule = ddpm.DDPMSchedule(SMALL.timesteps)
    x0 = ddpm.synthetic_images(2, SMALL.image_size, torch.Generator().manual_seed(0))
    out = ddpm.sample(Oracle(x0.to("tpu"), schedule), schedule, 2, 5, "tpu", seed=4)
    torch.testing.assert_close(out.cpu(), x0, rtol=0, atol=1e-4)


def test_checkpoint_resume_continues_exactly(tmp_path, no_fallback):
    full_model, _, full_losses, _ = run("tpu", 4)
    ckpt = str(tmp_path / "ckpt.pt")
    _, _, first, _ = run("tpu", 2, save=ckpt)
    assert first == full_losses[:2]
    resumed_model, _, rest, _ = run("tpu", 4, resume=ckpt)
    assert rest == full_losses[2:]
    for (name, want), got in zip(full_model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(got.cpu(), want.cpu()), name


def test_synthetic_images_are_reproducible_and_in_range():
    a = ddpm.training_batch(3, 4, SMALL, seed=1)
    b = ddpm.training_batch(3, 4, SMALL, seed=1)
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    x0, t, noise = a
    assert x0.shape == noise.shape == (4, 3, 8, 8) and x0.min() >= -1 and x0.max() <= 1
    assert t.min() >= 0 and t.max() < SMALL.timesteps
