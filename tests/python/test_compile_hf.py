"""Hugging Face LlamaForCausalLM under torch.compile(backend="tpu"): a tiny random config (no
download: HF_HUB_OFFLINE=1). The compiled forward's logits equal eager's, and generate() with a
static KV cache -- whose decoding steps transformers runs through a compiled forward -- picks the
same tokens as eager greedy generate on PyTorch CPU. Skipped when transformers is not installed.

Tolerance: the logits at rtol 1e-4 / atol 1e-5, as test_hf.py's losses (the same float32 ops,
fused differently). Greedy tokens must be equal: the logits' top two differ by far more than that
tolerance for these seeds, so a wrong compiled step changes a token.
"""
import contextlib
import copy
import os
import warnings

import pytest
import torch
import torch._dynamo

import torch_tpu

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

VOCAB = 64


def tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cpu = transformers.LlamaForCausalLM(cfg).eval()
    return cpu, copy.deepcopy(cpu).to("tpu")


def tokens(*shape, seed=0):
    return torch.randint(3, VOCAB, shape, generator=torch.Generator().manual_seed(seed))


@contextlib.contextmanager
def _inductor_settings_ignored(backend):
    """transformers' default CompileConfig asks Inductor for mode="reduce-overhead": on tpu tensors
    the tpu backend compiles instead and says that Inductor's settings do not apply."""
    with warnings.catch_warnings():
        if backend == "default":
            warnings.filterwarnings("ignore", message=".*Inductor settings.*do not apply.*")
        yield


@pytest.fixture
def fresh_compile():
    torch._dynamo.reset()
    torch_tpu.compile.reset_stats()
    yield
    torch._dynamo.reset()


def test_compiled_forward_matches_eager(fresh_compile, no_fallback):
    cpu, dev = tiny_llama()
    compiled = torch.compile(dev, backend="tpu")
    with torch.no_grad():
        for seed in range(3):  # same shapes: the later calls replay the first capture
            ids = tokens(2, 12, seed=seed)
            expected = cpu(input_ids=ids).logits
            eager = dev(input_ids=ids.to("tpu")).logits.cpu()
            actual = compiled(input_ids=ids.to("tpu")).logits
            assert actual.device.type == "tpu"
            torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(actual.cpu(), eager, rtol=1e-4, atol=1e-5)
    stats = torch_tpu.compile.stats()
    assert stats["captures"] >= 1 and stats["fallbacks"] == 0, stats
    assert stats["recompiles"] == 0, torch_tpu.compile.recompiles()


def test_compiled_forward_with_labels_and_backward_matches_eager(fresh_compile, no_fallback):
    """The training path: loss and gradients of the compiled model (forward and backward graphs)."""
    cpu, dev = tiny_llama()
    cpu.train()
    dev.train()
    compiled = torch.compile(dev, backend="tpu")
    ids = tokens(2, 12, seed=5)
    expected = cpu(input_ids=ids, labels=ids).loss
    expected.backward()
    loss = compiled(input_ids=ids.to("tpu"), labels=ids.to("tpu")).loss
    loss.backward()
    torch.testing.assert_close(loss.cpu(), expected, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(dev.named_parameters(), cpu.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
    assert torch_tpu.compile.stats()["fallbacks"] == 0


@pytest.mark.parametrize("backend", ["tpu", "default"])
def test_static_cache_generate_matches_eager_greedy(backend, fresh_compile, no_fallback):
    """cache_implementation="static": transformers compiles the model's forward for the decoding
    steps on a tpu model (its auto-compile; "default" leaves transformers' CompileConfig as it is,
    Inductor, which on tpu tensors compiles with the tpu backend). Every token equals CPU eager's
    greedy generate (dynamic cache), and the decoding steps replay their captures."""
    cpu, dev = tiny_llama()
    prompt = tokens(2, 6, seed=7)
    kw = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    expected = cpu.generate(prompt, **kw)
    eager = dev.generate(prompt.to("tpu"), **kw).cpu()
    assert torch.equal(eager, expected)
    extra = {}
    if backend == "tpu":
        extra["compile_config"] = transformers.CompileConfig(backend="tpu", fullgraph=True)
    replays = torch_tpu.metrics.counters().get("compiled_graph_replays", 0)
    with _inductor_settings_ignored(backend):
        actual = dev.generate(prompt.to("tpu"), cache_implementation="static", **kw, **extra)
    # The prefill runs eagerly; each of the other max_new_tokens - 1 forwards is one replay.
    assert torch_tpu.metrics.counters().get("compiled_graph_replays", 0) - replays == kw["max_new_tokens"] - 1
    assert actual.device.type == "tpu"
    assert torch.equal(actual.cpu(), expected), (actual.cpu(), expected)
    stats = torch_tpu.compile.stats()
    assert stats["captures"] >= 1 and stats["fallbacks"] == 0, (stats, torch_tpu.compile.fallbacks())
    # A second generate reuses the compiled decoding step: no new Dynamo graph, no new capture.
    with torch_tpu.compile.cache_only(), _inductor_settings_ignored(backend):
        again = dev.generate(tokens(2, 6, seed=8).to("tpu"), cache_implementation="static", **kw, **extra)
    assert torch.equal(again.cpu(), cpu.generate(tokens(2, 6, seed=8), **kw))
