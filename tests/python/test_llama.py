"""examples/llama.py on the device vs the same script on PyTorch CPU: training (Llama and the
Qwen2-style config, both eager modes, zero CPU-fallback ops), greedy KV-cache generation, and
checkpoint save/resume.

Tolerances: every op matches CPU to float32 rounding; over a few AdamW steps the differences
compound through Adam's normalisation, so losses and parameters are compared at rtol 1e-4 (as in
test_training.py). A resumed run on the same device repeats the same programs on the same data,
so it must match the uninterrupted run exactly.
"""
import dataclasses
import os
import sys

import pytest
import torch

import torch_tpu
from conftest import autocast_bf16_losses

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import llama  # noqa: E402

DATA = llama.CharData()


def small(name):
    return dataclasses.replace(llama.CONFIGS[name], vocab_size=DATA.vocab_size, max_seq_len=32, dim=32,
                               n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=64)


def run(cfg, device, steps, **kw):
    return llama.train(cfg, device, steps, batch_size=4, seq_len=16, data=DATA, progress=False, **kw)


def assert_params_close(dev_model, cpu_model, rtol=1e-4, atol=1e-5, key_bias_atol=1e-5):
    for (name, p_cpu), p_dev in zip(cpu_model.named_parameters(), dev_model.parameters()):
        assert p_dev.device.type == "tpu", name
        # The key bias (Qwen) adds q.R(j)b to the scores of key j; for RoPE's slowest-turning
        # pairs R(j) is nearly the identity over a short context, so that term is nearly the same
        # for every key and softmax cancels it: those components get a ~1e-9 gradient that is
        # mostly rounding noise, which AdamW normalises into steps of up to lr (3e-3). The
        # difference stays ~1e-5 (a wrong update would be ~lr).
        tol = key_bias_atol if name.endswith("wk.bias") else atol
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach().cpu(), rtol=rtol, atol=tol,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("name", ["llama", "qwen"])
def test_training_matches_cpu(name, mode):
    cfg = small(name)
    cpu_model, cpu_losses, _ = run(cfg, "cpu", 5)
    torch_tpu.metrics.reset()
    dev_model, dev_losses, _ = run(cfg, "tpu", 5)
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    assert_params_close(dev_model, cpu_model, key_bias_atol=1e-4)
    assert cpu_losses[-1] < cpu_losses[0]  # it trained


def test_qwen_embeddings_stay_tied_on_the_device(no_fallback):
    # Module.to("tpu") must move a shared parameter once, keeping it shared.
    model = llama.Llama(small("qwen")).to("tpu")
    assert model.output.weight is model.tok_emb.weight
    assert model.output.weight.device.type == "tpu"


@pytest.mark.parametrize("name", ["llama", "qwen"])
def test_greedy_kv_cache_generation_matches_cpu(name, no_fallback):
    cfg = small(name)
    cpu_model, _, _ = run(cfg, "cpu", 3)
    dev_model, _, _ = run(cfg, "tpu", 3)
    prompt = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    out_cpu = cpu_model.eval().generate(prompt, 12)
    out_dev = dev_model.eval().generate(prompt.to("tpu"), 12)
    assert out_dev.device.type == "tpu"
    assert torch.equal(out_dev.cpu(), out_cpu)
    # The cached decode agrees with a full causal pass over the generated sequence.
    with torch.no_grad():
        logits, _ = dev_model(out_dev[:, :-1])
    assert torch.equal(logits[:, 3:].argmax(-1).cpu(), out_cpu[:, 4:])


def test_checkpoint_resume_continues_exactly(tmp_path, no_fallback):
    cfg = small("qwen")
    full_model, full_losses, _ = run(cfg, "tpu", 6)
    ckpt = str(tmp_path / "ckpt.pt")
    _, first, _ = run(cfg, "tpu", 4, save=ckpt)
    assert first == full_losses[:4]
    saved = torch.load(ckpt, map_location="cpu")
    assert saved["step"] == 4 and "exp_avg" in saved["optimizer"]["state"][0]
    resumed_model, rest, _ = run(cfg, "tpu", 6, resume=ckpt)
    assert rest == full_losses[4:]
    assert_params_close(resumed_model, full_model, rtol=0, atol=0)


def test_checkpoint_of_another_config_is_refused(tmp_path):
    ckpt = str(tmp_path / "ckpt.pt")
    run(small("llama"), "tpu", 1, save=ckpt)
    with pytest.raises(ValueError, match="another model config"):
        run(small("qwen"), "tpu", 2, resume=ckpt)


def test_bf16_autocast_training_runs_natively(no_fallback):
    torch.manual_seed(0)
    model = llama.Llama(small("llama")).to("tpu")
    x, y = DATA.batch(4, 16, torch.Generator().manual_seed(0))
    losses = autocast_bf16_losses(model, x, y)
    assert losses[-1] < losses[0]
