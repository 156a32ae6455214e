"""Steady state in fused mode: after warm-up, a training loop of each example model compiles
nothing (cache-only mode passes 20 steps), and a fused GPT step's peak device memory is no higher
than strict mode's.

Each model trains twice from the same seed: a short warm-up run (2 steps, plus the model's
construction and transfer), then 20 steps inside `compile_cache.cache_only()`, where any program
the cache does not hold is an error naming it and why it missed. The second run's steps 3..20 have
optimizer step counts the warm-up never saw, so a step count (or any per-step value) baked into a
program as a constant fails the test.
"""
import dataclasses
import os
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import compile_cache

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import char_gpt  # noqa: E402
import ddpm  # noqa: E402
import dlrm  # noqa: E402
import llama  # noqa: E402
import resnet  # noqa: E402

DATA = char_gpt.CharData()


def gpt(steps):
    cfg = char_gpt.GPTConfig(vocab_size=DATA.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=32)
    return char_gpt.train("tpu", steps, batch_size=4, cfg=cfg, data=DATA, progress=False)[1]


def llama_small(steps):
    cfg = dataclasses.replace(llama.CONFIGS["llama"], vocab_size=DATA.vocab_size, max_seq_len=32, dim=32,
                              n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=64)
    return llama.train(cfg, "tpu", steps, batch_size=4, seq_len=16, data=llama.CharData(), progress=False)[1]


def resnet_small(steps):
    return resnet.train("resnet18", "tpu", steps, batch_size=4, width=8, image_size=16, progress=False)[1]


def dlrm_small(steps):
    cfg = dlrm.DLRMConfig(cardinalities=[60, 40, 20, 10], embedding_dim=8, bottom_mlp=[16], top_mlp=[16])
    return dlrm.train("tpu", steps, batch_size=32, cfg=cfg, progress=False)[1]


def ddpm_small(steps):
    cfg = ddpm.UNetConfig(image_size=8, base=8, groups=4)
    return ddpm.train("tpu", steps, batch_size=4, cfg=cfg, progress=False)[2]


MODELS = {"char_gpt": gpt, "llama": llama_small, "resnet18": resnet_small, "dlrm": dlrm_small, "ddpm": ddpm_small}


@pytest.mark.parametrize("name", list(MODELS))
def test_no_compiles_after_warmup(name):
    train = MODELS[name]
    with torch_tpu.eager_mode("fused"):
        warm = train(2)
        before = compile_cache.stats()["compiles"]
        with compile_cache.cache_only():
            losses = train(20)
    assert compile_cache.stats()["compiles"] == before
    assert len(losses) == 20 and all(torch.isfinite(torch.tensor(losses)))
    # The same seed and data: the first steps repeat the warm-up's exactly.
    assert losses[:2] == warm


def test_a_loop_that_reads_nothing_each_step_compiles_nothing_after_warmup():
    """Note [Step windows] (torch_tpu/modes.py): with no host read per step, the windows are cut
    when optimizer.step() returns, so each step is the same program. Cut only at the size limit
    (window_ops), windows would span steps at a different point each time: new programs."""
    torch.manual_seed(0)
    cfg = char_gpt.GPTConfig(vocab_size=DATA.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0)
    gen = torch.Generator().manual_seed(0)
    batches = [[t.to("tpu") for t in DATA.batch(4, cfg.block_size, gen)] for _ in range(3)]
    with torch_tpu.eager_mode("fused"):
        model = char_gpt.GPT(cfg).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def steps(n):
            for i in range(n):
                x, y = batches[i % len(batches)]
                _, loss = model(x, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            return loss

        steps(2)
        torch.tpu.synchronize()
        torch_tpu.metrics.reset()
        before = compile_cache.stats()["compiles"]
        with compile_cache.cache_only():
            loss = steps(12)  # about 17,000 ops: past window_ops (10,000) if nothing cut them
            torch.tpu.synchronize()
        assert compile_cache.stats()["compiles"] == before
        assert torch_tpu.metrics.window_cuts().get("optimizer_step") == 12, torch_tpu.metrics.window_cuts()
        assert torch.isfinite(loss).item()


def gpt_peak(mode):
    torch.manual_seed(0)
    cfg = char_gpt.GPTConfig(vocab_size=DATA.vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=64)
    with torch_tpu.eager_mode(mode):
        model = char_gpt.GPT(cfg).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        gen = torch.Generator().manual_seed(0)
        for step in range(3):
            x, y = DATA.batch(8, cfg.block_size, gen)
            if step == 2:  # the third step, measured alone (state and caches are warm)
                torch.tpu.synchronize()
                torch.tpu.reset_peak_memory_stats()
                base = torch.tpu.memory_allocated()
            _, loss = model(x.to("tpu"), y.to("tpu"))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss.item()
        torch.tpu.synchronize()
        return torch.tpu.max_memory_allocated() - base, loss.item()


def test_fused_peak_memory_not_above_strict():
    """The fused window's scratch plan shares memory by lifetime, writes in-place updates directly
    and recomputes GELU/dropout/norm outputs for the backward (Note [Rematerialization]): about
    2.47 MB above the baseline against strict mode's 2.78-3.02 MB (strict's varies with how far
    the queue is behind when tensors are freed). Without rematerialization fused mode's was
    2.88 MB, before the in-row views and the results' scratch 3.81 MB."""
    strict_peak, strict_loss = gpt_peak("strict")
    fused_peak, fused_loss = gpt_peak("fused")
    assert fused_loss == pytest.approx(strict_loss, rel=1e-5)
    assert 0 < fused_peak <= strict_peak, (fused_peak, strict_peak)
