"""End-to-end training on the device vs the same run on PyTorch CPU (same seeds), in both eager
modes, with zero CPU-fallback ops: an MLP and a GPT-style transformer (embedding, layer norm,
causal attention, GELU MLP, cross-entropy, AdamW).

Tolerances: every op matches CPU to float32 rounding (a few ulp); over a few optimizer steps
those differences compound through Adam's normalisation, so losses are compared at rtol 1e-4
and parameters at rtol 1e-4 / atol 1e-5.
"""
import copy
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from conftest import autocast_bf16_losses

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import char_gpt  # noqa: E402


def train_steps(model, device, batches, steps, opt_cls=torch.optim.AdamW, **opt_kw):
    model = model.to(device)
    opt = opt_cls(model.parameters(), **opt_kw)
    losses = []
    for i in range(steps):
        x, y = batches[i % len(batches)]
        x, y = x.to(device), y.to(device)
        out = model(x)
        logits = out[0] if isinstance(out, tuple) else out
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def compare_runs(make_model, batches, steps, **opt_kw):
    torch.manual_seed(0)
    cpu_model = make_model()
    dev_model = copy.deepcopy(cpu_model)
    cpu_model, cpu_losses = train_steps(cpu_model, "cpu", batches, steps, **opt_kw)
    torch_tpu.metrics.reset()
    dev_model, dev_losses = train_steps(dev_model, "tpu", batches, steps, **opt_kw)
    fallbacks = torch_tpu.metrics.fallback_ops()
    assert not fallbacks, f"ops fell back to the CPU: {fallbacks}"
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    for (name, p_cpu), p_dev in zip(cpu_model.named_parameters(), dev_model.parameters()):
        actual, expected = p_dev.detach().cpu(), p_cpu.detach()
        if name.endswith("attn.qkv.bias"):
            # The key third of the qkv bias has an exactly zero gradient (softmax is invariant to
            # the q.b_k it adds to a whole row of scores): both runs see ~1e-10 of rounding noise
            # there, which AdamW normalises into +-lr steps, so those values are not comparable.
            c = expected.numel() // 3
            actual, expected = torch.cat([actual[:c], actual[2 * c:]]), torch.cat([expected[:c], expected[2 * c:]])
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=name)
    assert cpu_losses[-1] < cpu_losses[0]  # it trained
    return dev_losses


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(),
                                 nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 5))

    def forward(self, x):
        return self.net(x)


def test_mlp_training_matches_cpu(mode):
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(32, 20, generator=g), torch.randint(0, 5, (32,), generator=g)) for _ in range(3)]
    compare_runs(MLP, batches, steps=6, lr=1e-2, weight_decay=0.01)


def test_mlp_sgd_momentum_matches_cpu(mode):
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randn(16, 20, generator=g), torch.randint(0, 5, (16,), generator=g))]
    compare_runs(MLP, batches, steps=4, opt_cls=torch.optim.SGD, lr=0.05, momentum=0.9)


def gpt_batches(vocab=50, block=16, n=3, batch=4):
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(n):
        x = torch.randint(0, vocab, (batch, block), generator=g)
        out.append((x, torch.roll(x, -1, dims=1)))
    return out


def small_gpt(dropout=0.0):
    cfg = char_gpt.GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=dropout)
    return char_gpt.GPT(cfg)


def test_transformer_training_matches_cpu(mode):
    compare_runs(small_gpt, gpt_batches(), steps=4, lr=3e-3, weight_decay=0.01)


def test_transformer_with_dropout_runs_natively(no_fallback):
    torch.manual_seed(0)
    model, losses = train_steps(small_gpt(dropout=0.2), "tpu", gpt_batches(), steps=4, lr=3e-3)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0] + 0.5


def test_transformer_generation_matches_cpu(no_fallback):
    torch.manual_seed(0)
    cpu = small_gpt().eval()
    dev = copy.deepcopy(cpu).to("tpu")
    start = torch.tensor([[1, 2, 3]])
    out_cpu = cpu.generate(start, 12, greedy=True)
    out_dev = dev.generate(start.to("tpu"), 12, greedy=True)
    assert torch.equal(out_dev.cpu(), out_cpu)


def test_bf16_autocast_training_runs_natively(no_fallback):
    torch.manual_seed(0)
    model = small_gpt().to("tpu")
    x, y = gpt_batches()[0]
    losses = autocast_bf16_losses(model, x, y)
    assert losses[-1] < losses[0]


# ---- the example script: checkpoint and resume ---------------------------------------------------
def _example_run(steps, **kw):
    data = char_gpt.CharData()
    cfg = char_gpt.GPTConfig(vocab_size=data.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=32)
    return char_gpt.train("tpu", steps, batch_size=4, cfg=cfg, data=data, progress=False, **kw)


def test_char_gpt_checkpoint_resume_continues_exactly(tmp_path, no_fallback):
    """Saving after step 3 and resuming to step 5 gives the uninterrupted run's losses and weights
    bit for bit (model, AdamW state and the data sampler's generator all round-trip)."""
    full_model, full_losses, _ = _example_run(5)
    ckpt = str(tmp_path / "gpt.pt")
    _, first, _ = _example_run(3, save=ckpt)
    assert first == full_losses[:3]
    resumed_model, rest, _ = _example_run(5, resume=ckpt)
    assert rest == full_losses[3:]
    for (name, a), b in zip(full_model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(a.cpu(), b.cpu()), name
