"""torch_tpu.export.to_stablehlo: a torch.export program as StableHLO text (weights as arguments or
inlined constants), compiled and run by XLA twice -- jaxlib's CPU client and XLA's PJRT CPU plugin
(the one the pjrt backend loads, through jax's plugin loader) -- and compared with the device and
with PyTorch's CPU result (xla_check's float32 tolerances, rtol=1e-5 atol=1e-6, except where noted).
"""
from __future__ import annotations

import os
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _backend
from xla_check import jax, run_on_xla, signature, xla_client  # noqa: F401  (jax: skips without it)

# XLA's CPU PJRT plugin, registered with jax before any of its clients starts (at collection).
_PLUGIN = next((p for p in _backend.plugin_candidates() if os.path.basename(p) == "pjrt_c_api_cpu_plugin.so"), None)
if _PLUGIN is not None:
    from jax._src import xla_bridge

    xla_bridge.register_plugin("tpu_export_pjrt_cpu", library_path=_PLUGIN)


@pytest.fixture(scope="module")
def clients():
    out = {"jaxlib": xla_client()}
    if _PLUGIN is None:
        pytest.skip("XLA's PJRT CPU plugin (lammps-jax-pjrt-cpu) is not installed")
    from jax.extend import backend as jax_backend

    out["pjrt_plugin"] = jax_backend.get_backend("tpu_export_pjrt_cpu")
    assert out["pjrt_plugin"].platform_version.startswith("PJRT C API")  # the plugin, not jaxlib's built-in client
    return out


class Block(nn.Module):
    """A pre-norm transformer block (causal attention over a non-persistent mask buffer, GELU MLP)."""

    def __init__(self, d=16, heads=2, ctx=8):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (C // self.heads) ** 0.5
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(y.mean((2, 3))), y


def _exported(model, *inputs):
    torch.manual_seed(0)
    model = model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # batch norm's weight and bias away from 1 and 0
        for b in model.buffers():
            if b.is_floating_point():
                b.add_(torch.rand_like(b))
    return model, torch.export.export(model, inputs)


CASES = {
    "transformer_block": lambda: (Block(), torch.randn(2, 8, 16)),
    "conv_bn_pool": lambda: (ConvNet(), torch.randn(2, 3, 8, 8)),
}


@pytest.mark.parametrize("weights", ["args", "constants"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_exported_program_runs_on_xla_and_matches_the_device(clients, case, weights, no_fallback):
    model, x = CASES[case]()
    model, ep = _exported(model, x)
    text = torch_tpu.export.to_stablehlo(ep, weights=weights)
    params, results = signature(text)
    state = [ep.state_dict[s.target] if s.target in ep.state_dict else ep.constants[s.target]
             for s in ep.graph_signature.input_specs if s.kind.name != "USER_INPUT"]
    args = [x] if weights == "constants" else state + [x]
    assert [p[0] for p in params] == [tuple(a.shape) for a in args]
    if weights == "constants":
        assert "stablehlo.constant dense<\"0x" in text
    with torch.no_grad():
        expected = model(x)
        device = to_cpu(model.to("tpu")(x.to("tpu")))
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    device = list(device) if isinstance(device, tuple) else [device]
    for client_name, client in clients.items():
        got = run_on_xla(client, text, args)
        assert len(got) == len(expected)
        for g, d, e in zip(got, device, expected):
            # 1e-5/1e-6 as in xla_check; the conv net's batch norm divides by sqrt(var + eps)
            # with var near 1, so the same bound holds.
            torch.testing.assert_close(g, d, rtol=1e-5, atol=1e-5, msg=lambda m: f"{client_name} vs device: {m}")
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5, msg=lambda m: f"{client_name} vs CPU: {m}")


def to_cpu(x):
    return tuple(t.cpu() for t in x) if isinstance(x, tuple) else x.cpu()


def test_other_user_inputs_and_bool_constants(clients, no_fallback):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("keep", torch.tensor([True, False, True, True]))

        def forward(self, x, scale):
            return torch.where(self.keep, x * scale, x.t()[0] + 2.5), x.sum(0, keepdim=True) @ x

    x, scale = torch.randn(4, 4), torch.tensor(3.0)
    ep = torch.export.export(M(), (x, scale))
    text = torch_tpu.export.to_stablehlo(ep, weights="constants")
    assert "stablehlo.convert" in text  # the i1 constant, from its bytes
    expected = M()(x, scale)
    for client in clients.values():
        for g, e in zip(run_on_xla(client, text, [x, scale]), expected):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_bad_arguments_are_named():
    ep = torch.export.export(nn.Linear(2, 2), (torch.randn(1, 2),))
    with pytest.raises(ValueError, match="weights must be one of"):
        torch_tpu.export.to_stablehlo(ep, weights="inline")
    with pytest.raises(ValueError, match="must be a tpu device"):
        torch_tpu.export.to_stablehlo(ep, device="cpu")


def test_dynamic_dims_are_fixed_with_a_warning(clients, no_fallback):
    """A program exported with a dynamic dim is exported at the lowering inputs' sizes, and says so;
    the static program still computes the right values at that size."""

    class M(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=1).sum(1)

    x = torch.randn(4, 16)
    ep = torch.export.export(M(), (x,), dynamic_shapes={"x": {1: torch.export.Dim("s", min=2, max=64)}})
    with pytest.warns(UserWarning, match=r"exported as a static program .*x dim 1 \(s\w* in \[2, 64\]\) = 16"):
        text = torch_tpu.export.to_stablehlo(ep)
    assert "tensor<4x16xf32>" in text
    x9 = torch.randn(4, 9)
    with pytest.warns(UserWarning, match=r"= 9 "):
        text9 = torch_tpu.export.to_stablehlo(ep, args=(x9,))
    for client in clients.values():
        (got,) = run_on_xla(client, text9, [x9])
        torch.testing.assert_close(got, M()(x9), rtol=1e-5, atol=1e-6)
    static = torch.export.export(M(), (x,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch_tpu.export.to_stablehlo(static)
