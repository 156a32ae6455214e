"""Whole training steps compiled with backend="tpu": the forward and backward of the loss (one Dynamo
graph, two AOTAutograd graphs) and the optimizer step (one inference graph) are three captured
programs; the compiled run's losses, weights and buffers equal the eager run's (same programs'
arithmetic up to fusion; measured identical here, compared with torch.testing's float32
defaults), dropout included: each replay draws its Philox range as eager would."""
from __future__ import annotations

import copy
import dataclasses
import os
import sys

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import char_gpt  # noqa: E402
import llama  # noqa: E402
import resnet  # noqa: E402


def gpt(d, ctx, batch):
    torch.manual_seed(0)
    model = char_gpt.GPT(char_gpt.GPTConfig(vocab_size=96, block_size=ctx, n_layer=4, n_head=4, n_embd=d))
    g = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, 96, (batch, ctx), generator=g), torch.randint(0, 96, (batch, ctx), generator=g))
            for _ in range(4)]
    opt = lambda m: torch.optim.AdamW(m.parameters(), lr=3e-3, foreach=True, capturable=True)  # noqa: E731
    return model, data, lambda m, x, y: m(x, y)[1], opt


def llama_model():
    torch.manual_seed(0)
    model = llama.Llama(dataclasses.replace(llama.CONFIGS["llama"], vocab_size=96))
    g = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, 96, (8, 64), generator=g), torch.randint(0, 96, (8, 64), generator=g)) for _ in range(4)]
    opt = lambda m: torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01, foreach=True,  # noqa: E731
                                      capturable=True)
    return model, data, lambda m, x, y: m(x, y)[1], opt


def resnet18():
    torch.manual_seed(0)
    model = resnet.resnet18(16)
    images = resnet.SyntheticImages(32)
    data = [images.batch(i, 16) for i in range(4)]
    opt = lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, foreach=True)  # noqa: E731
    return model, data, lambda m, x, y: F.cross_entropy(m(x), y), opt


def train(model, data, loss_fn, make_opt, compiled):
    torch.manual_seed(0)
    torch.tpu.manual_seed(0)
    m = copy.deepcopy(model).to("tpu")
    opt = make_opt(m)

    def step(x, y):
        loss = loss_fn(m, x, y)
        loss.backward()
        return loss

    def update():
        opt.step()
        opt.zero_grad()  # set_to_none: backward hands over its gradients without an add per parameter

    if compiled:
        step, update = torch.compile(step, backend="tpu"), torch.compile(update, backend="tpu")
    losses, launches = [], []
    for x, y in data:
        x, y = x.to("tpu"), y.to("tpu")
        torch.tpu.synchronize()
        before = torch_tpu.metrics.counters().get("executions", 0)
        loss = step(x, y)
        update()
        torch.tpu.synchronize()
        launches.append(torch_tpu.metrics.counters().get("executions", 0) - before)
        losses.append(loss.item())
    return losses, launches, m


@pytest.mark.parametrize("build", [lambda: gpt(128, 64, 8), llama_model, resnet18], ids=["gpt", "llama", "resnet18"])
def test_compiled_training_matches_eager(build, no_fallback):
    torch._dynamo.reset()
    torch_tpu.compile.reset_stats()
    model, data, loss_fn, make_opt = build()
    eager_losses, eager_launches, eager_model = train(model, data, loss_fn, make_opt, compiled=False)
    losses, launches, compiled_model = train(model, data, loss_fn, make_opt, compiled=True)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses))
    for (name, p), q in zip(compiled_model.named_parameters(), eager_model.parameters()):
        torch.testing.assert_close(p.cpu(), q.cpu(), msg=name)
    for b, c in zip(compiled_model.buffers(), eager_model.buffers()):
        torch.testing.assert_close(b.cpu(), c.cpu())
    stats = torch_tpu.compile.stats()
    assert stats["fallbacks"] == 0
    # Steady state: the forward, backward and optimizer programs, plus the few eager ops around
    # them (AOTAutograd's wrappers), where eager mode launches one program per op.
    assert launches[-1] <= 8 < eager_launches[-1], (launches, eager_launches)
    assert stats["captures"] == 3 + (1 if build is resnet18 else 0)  # SGD momentum: a 2nd optimizer graph


def test_gpt_training_loop_recompiles_nothing_after_warm_up(no_fallback):
    """20 compiled GPT (4 layers, d=128, ctx=64, batch 8) training steps after two warm-up steps,
    inside cache_only(): no Dynamo graph, no capture and no device program is compiled (any of them
    raises CacheOnlyError), and the counters agree."""
    torch._dynamo.reset()
    torch_tpu.compile.reset_stats()
    model, data, loss_fn, make_opt = gpt(128, 64, 8)
    m = copy.deepcopy(model).to("tpu")
    opt = make_opt(m)

    @torch.compile(backend="tpu")
    def step(x, y):
        loss = loss_fn(m, x, y)
        loss.backward()
        return loss

    @torch.compile(backend="tpu")
    def update():
        opt.step()
        opt.zero_grad()

    data = [(x.to("tpu"), y.to("tpu")) for x, y in data]
    for x, y in data[:2]:
        step(x, y)
        update()
    before = dict(torch_tpu.compile.stats())
    compiles = torch_tpu.metrics.counters().get("compiles", 0)
    losses = []
    with torch_tpu.compile.cache_only():
        for i in range(20):
            x, y = data[i % len(data)]
            losses.append(step(x, y))
            update()
    assert torch_tpu.compile.stats() == before
    assert torch_tpu.metrics.counters().get("compiles", 0) == compiles
    assert before["captures"] == 3 and before["recompiles"] == 0
    losses = torch.stack(losses).cpu()
    assert torch.isfinite(losses).all() and losses[-4:].mean() < losses[:4].mean()  # it trains
