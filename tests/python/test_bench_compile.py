"""benchmarks/bench_compile.py's JAX twins (benchmarks/_jax_models.py) compute the PyTorch training
steps they are timed against: from the same weights, three steps of each model (GPT, Llama with
grouped-query attention, training-mode ResNet-18) give PyTorch CPU's losses, and ResNet-18's batch
norm leaves PyTorch's running statistics. Skipped without jax.

Tolerance: the losses are judged against PyTorch's float64 steps, within rtol 1e-5 plus twice PyTorch
CPU float32's own distance from them (XLA and PyTorch sum in different orders, and the third step's
loss carries two optimizer steps of that rounding: on an AVX-512 Xeon, ResNet-18's third float32
loss on PyTorch CPU is 8.7e-5 from float64, JAX's 2.8e-6); 1e-5 on the running statistics.
"""
from __future__ import annotations

import copy
import os
import sys

import numpy as np
import pytest
import torch

jax = pytest.importorskip("jax")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import bench_compile  # noqa: E402
import _jax_models  # noqa: E402

CONFIGS = [bench_compile.Config("gpt", batch=4, d=64, ctx=32), bench_compile.Config("llama", batch=4, ctx=32),
           bench_compile.Config("resnet18", batch=8)]


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c.model for c in CONFIGS])
def test_jax_twin_matches_pytorch_training_steps(cfg):
    model, batches, loss_fn, make_opt, kind = bench_compile.build_model(cfg)

    def pytorch_losses(dtype):
        ref = copy.deepcopy(model).to(dtype)
        opt = make_opt(ref.parameters(), "cpu")
        losses = []
        for x, y in batches[:3]:
            loss = loss_fn(ref, x.to(dtype) if x.is_floating_point() else x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return torch.tensor(losses, dtype=torch.float64)

    expected, exact = pytorch_losses(torch.float32), pytorch_losses(torch.float64)
    with jax.default_device(jax.devices("cpu")[0]):  # jaxlib's CPU client (other tests register plugins)
        step = bench_compile.jax_variant(model, batches, kind)
        actual = torch.tensor([step() for _ in range(3)], dtype=torch.float64)
    bound = 1e-5 * exact.abs() + 2 * (expected - exact).abs()
    assert ((actual - exact).abs() <= bound).all(), (actual, expected, exact)
    assert len(set(expected.tolist())) == 3  # the steps train: each loss differs


def test_jax_batch_norm_running_statistics():
    """One training-mode forward of ResNet-18 updates every batch norm's running mean and
    (unbiased) variance as nn.BatchNorm2d does."""
    import jax.numpy as jnp

    cfg = bench_compile.Config("resnet18", batch=8)
    model, batches, _, _, _ = bench_compile.build_model(cfg)
    params, buffers, loss_fn = _jax_models.resnet(model)
    x, y = batches[0]
    with jax.default_device(jax.devices("cpu")[0]):
        _, new = loss_fn(params, buffers, jnp.asarray(x.permute(0, 2, 3, 1).numpy()), jnp.asarray(y.numpy()))
    ref = copy.deepcopy(model).train()
    with torch.no_grad():
        ref(x)
    expected = {k: v for k, v in ref.named_buffers() if not k.endswith("num_batches_tracked")}
    assert set(new) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(torch.tensor(np.asarray(new[name])), value, rtol=1e-5, atol=1e-5,
                                   msg=lambda m: f"{name}: {m}")
