"""Bounded dynamic sizes under torch.compile (Note [Bounded dims], torch_tpu/compile/_bounded.py):
mark_dynamic(t, dim, min=, max=) compiles one program per graph for the whole range, padded at
the bound, and results equal eager ones for every size.

Every test fills the padding of the inputs with NaN and out-of-range indices (`poison`), so a
padded position that reached a real value would show as NaN or as an index error. Results are
compared with the same code run eagerly on the CPU at torch.testing's float32 defaults: the padded
program computes the same ops on the same values, and masked positions add exact zeros (or -inf
before a max), so only summation order can differ.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import torch_tpu
from torch_tpu.compile import _padded

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    torch._dynamo.reset()
    torch_tpu.compile.reset_stats()
    monkeypatch.setattr(_padded, "poison", True)
    yield
    torch._dynamo.reset()


def _dynamic(t, dim, lo, hi):
    torch._dynamo.mark_dynamic(t, dim, min=lo, max=hi)
    return t


def test_gpt_train_step_64_lengths_one_program_per_graph(mode, no_fallback):
    from char_gpt import GPT, GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=2, dropout=0.0, block_size=96)
    ref = GPT(cfg)
    model = GPT(cfg).to("tpu")
    model.load_state_dict(ref.state_dict())

    def loss_of(m, idx, targets):
        return m(idx, targets)[1]

    step = torch.compile(loss_of, backend="tpu")
    g = torch.Generator().manual_seed(1)
    for n, T in enumerate(range(2, 66)):   # 64 lengths under one bound
        idx = torch.randint(0, cfg.vocab_size, (4, T), generator=g)
        tgt = torch.randint(0, cfg.vocab_size, (4, T), generator=g)
        ref.zero_grad()
        model.zero_grad()
        expect = loss_of(ref, idx, tgt)
        expect.backward()
        it, tt = _dynamic(idx.to("tpu"), 1, 2, 80), _dynamic(tgt.to("tpu"), 1, 2, 80)
        if n < 2 or torch_tpu.config.get("backend") != "host":
            # On PJRT the copies at the graph's edges are programs of each size (Note [Run copies]).
            loss = step(model, it, tt)
            loss.backward()
        else:  # after warm-up nothing compiles: no new graph, no capture, no eager program
            with torch_tpu.compile.cache_only():
                loss = step(model, it, tt)
                loss.backward()
        torch.testing.assert_close(loss.cpu(), expect)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, msg=lambda m: f"T={T} {name}: {m}")
    stats = torch_tpu.compile.stats()
    assert stats["dynamo_graphs"] == 1 and stats["captures"] == 2 and stats["padded_graphs"] == 2
    assert torch_tpu.compile.recompiles() == []


def _attention(q, k, v):
    return torch.softmax(q @ k.transpose(1, 2) / 4.0, dim=-1) @ v


def _gram(x):  # rows of a merged (batch * length) dim contracted away
    flat = x.reshape(-1, x.shape[-1])
    return flat.t() @ flat


CASES = {
    "sum": lambda x: x.sum(1),
    "mean": lambda x: x.mean(1),
    "mean_all": lambda x: x.mean(),
    "amax": lambda x: x.amax(1),
    "amin": lambda x: x.amin(dim=(0, 1)),
    "softmax": lambda x: x.softmax(1),
    "log_softmax": lambda x: F.log_softmax(x, 1),
    "attention": lambda x: _attention(x, x * 0.5, x + 1),
    "gram": _gram,
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]).sum(1),
    "size_as_value": lambda x: x.sum(1) / x.shape[1] + x.shape[1] * 0.5,
    "shifted_difference": lambda x: (x[:, 1:] - x[:, :-1]).sum(1),
    "pad_then_sum": lambda x: F.pad(x, (0, 0, 1, 2), value=0.5).sum(1),
    "causal": lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True),
    "cat_after_static": lambda x: torch.cat([torch.ones(2, 3, 8, device=x.device), x], 1).softmax(1),
    "cross_entropy": lambda x: F.cross_entropy(x.reshape(-1, x.shape[-1]),
                                               (x.detach().reshape(-1, x.shape[-1]).abs() * 7).long().sum(1) % 8),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ops_over_a_bounded_dim_never_see_the_padding(case, no_fallback):
    fn = CASES[case]
    compiled = torch.compile(fn, backend="tpu")
    g = torch.Generator().manual_seed(2)
    for T in (3, 17, 40):
        x = torch.randn(2, T, 8, generator=g)
        xt = _dynamic(x.to("tpu").requires_grad_(), 1, 3, 48)
        xc = x.clone().requires_grad_()
        expect = fn(xc)
        out = compiled(xt)
        torch.testing.assert_close(out.cpu(), expect.detach())
        expect.sum().backward()
        out.sum().backward()
        torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    stats = torch_tpu.compile.stats()
    assert stats["captures"] == 2 and stats["padded_graphs"] == 2, stats


def test_llama_example_and_hf_llama_run_padded(no_fallback):
    """The example Llama's train step (RMSNorm, RoPE, causal SDPA, SwiGLU) and Hugging Face's
    LlamaForCausalLM (its causal mask, its DynamicCache's concatenation, its shifted labels)."""
    import llama as L

    torch.manual_seed(0)
    cfg = L.LlamaConfig(vocab_size=128, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=128, max_seq_len=64)
    ref = L.Llama(cfg)
    model = L.Llama(cfg).to("tpu")
    model.load_state_dict(ref.state_dict())
    models = [(ref, model, lambda m, ids: m(ids, ids)[1])]
    transformers = pytest.importorskip("transformers")
    hf_cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    hf_ref = transformers.LlamaForCausalLM(hf_cfg)
    hf = transformers.LlamaForCausalLM(hf_cfg).to("tpu")
    hf.load_state_dict(hf_ref.state_dict())
    models.append((hf_ref, hf, lambda m, ids: m(input_ids=ids, labels=ids).loss))
    g = torch.Generator().manual_seed(3)
    for ref_model, dev_model, loss_of in models:
        torch._dynamo.reset()
        torch_tpu.compile.reset_stats()
        step = torch.compile(loss_of, backend="tpu")
        for T in (5, 23, 40):
            ids = torch.randint(3, 64, (2, T), generator=g)
            ref_model.zero_grad()
            dev_model.zero_grad()
            expect = loss_of(ref_model, ids)
            expect.backward()
            loss = step(dev_model, _dynamic(ids.to("tpu"), 1, 2, 60))
            loss.backward()
            torch.testing.assert_close(loss.cpu(), expect, rtol=1e-4, atol=1e-5)
            for (name, p), q in zip(dev_model.named_parameters(), ref_model.parameters()):
                torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
        stats = torch_tpu.compile.stats()
        assert stats["captures"] == 2 and stats["padded_graphs"] == 2, (stats, torch_tpu.compile.unpadded())


def test_an_op_without_a_padded_rule_compiles_per_size_and_says_so(no_fallback):
    def fn(x):
        return x.cumsum(1) * 2

    compiled = torch.compile(fn, backend="tpu")
    with pytest.warns(UserWarning, match=r"cumsum.*compiles once per size"):
        for T in (5, 9):
            x = torch.randn(3, T)
            torch.testing.assert_close(compiled(_dynamic(x.to("tpu"), 1, 2, 32)).cpu(), fn(x))
    stats = torch_tpu.compile.stats()
    assert stats["unpadded_bounded_graphs"] == 1 and stats["captures"] == 2
    assert "cumsum" in next(iter(torch_tpu.compile.unpadded().values()))


def test_a_size_beyond_the_bound_recompiles_with_its_reason(no_fallback):
    def fn(x):
        return x.softmax(1)

    compiled = torch.compile(fn, backend="tpu")
    for T in (4, 12):
        x = torch.randn(2, T)
        torch.testing.assert_close(compiled(_dynamic(x.to("tpu"), 1, 2, 16)).cpu(), fn(x))
    assert torch_tpu.compile.recompiles() == []
    x = torch.randn(2, 20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), fn(x))
    (rc,) = [r for r in torch_tpu.compile.recompiles() if r.level == "dynamo"]
    assert "size" in rc.reason or "16" in rc.reason


def test_without_a_bound_each_size_is_its_own_program(no_fallback):
    def fn(x):
        return x.softmax(1)

    compiled = torch.compile(fn, backend="tpu")
    for T in (4, 12):
        x = torch.randn(2, T)
        torch._dynamo.mark_dynamic(xt := x.to("tpu"), 1)
        torch.testing.assert_close(compiled(xt).cpu(), fn(x))
    stats = torch_tpu.compile.stats()
    assert stats["padded_graphs"] == 0 and stats["captures"] == 2


def test_run_copies_move_strided_regions_without_a_program():
    """_C._copy_runs (Note [Run copies]): the copies at a padded graph's edges."""
    from torch_tpu import _C

    src = torch.randn(4, 5, 6)
    buf = torch.zeros(4, 9, 6, device="tpu")
    before = torch_tpu.metrics.counters().get("compiles", 0)
    assert _C._copy_runs(src.to("tpu"), buf.narrow(1, 0, 5)) == (torch_tpu.config.get("backend") == "host")
    if torch_tpu.config.get("backend") == "host":
        assert torch_tpu.metrics.counters().get("compiles", 0) == before
        expect = torch.zeros(4, 9, 6)
        expect[:, :5] = src
        torch.testing.assert_close(buf.cpu(), expect, rtol=0, atol=0)
        back = torch.empty(4, 5, 6, device="tpu")
        assert _C._copy_runs(buf.narrow(1, 0, 5), back)
        torch.testing.assert_close(back.cpu(), src, rtol=0, atol=0)
    # Different sizes or dtypes are not its job: it says so and copies nothing.
    assert not _C._copy_runs(src.to("tpu"), torch.zeros(4, 5, 7, device="tpu"))
    assert not _C._copy_runs(src.to("tpu"), torch.zeros(4, 5, 6, device="tpu", dtype=torch.float64))
