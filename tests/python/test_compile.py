"""torch.compile(backend="tpu"): graphs captured as one program each and replayed (torch_tpu/compile,
csrc/torch/deferred/capture.h). Results are compared with the same function run eagerly on the CPU
(torch.testing's float32 defaults; the compiled program computes what the eager ops compute, with
the host executor's fusion)."""
from __future__ import annotations

import gc
import warnings

import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from conftest import to_cpu, to_tpu


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    # A training graph is held by the autograd.Function class AOTAutograd makes for it, which
    # lives in a reference cycle (as classes do): only the collector frees an earlier test's.
    gc.collect()
    torch_tpu.compile.reset_stats()
    torch_tpu.metrics.reset()
    yield
    torch._dynamo.reset()


def counter(name):
    return torch_tpu.metrics.counters().get(name, 0)


def test_backend_is_listed_and_registered_through_the_entry_point():
    from importlib.metadata import entry_points

    assert "tpu" in torch._dynamo.list_backends()
    eps = entry_points(group="torch_dynamo_backends", name="tpu")
    assert [ep.value for ep in eps] == ["torch_tpu.compile:tpu_backend"]
    assert torch._dynamo.lookup_backend("tpu") is torch_tpu.compile.tpu_backend


def test_a_function_is_one_program_replayed_on_new_data(no_fallback):
    def f(x, y):
        return (x * y + 1).relu().sum(dim=1) / 3.0, torch.tanh(x) @ y.t()

    cf = torch.compile(f, backend="tpu")
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
        out = cf(x.to("tpu"), y.to("tpu"))
        for a, e in zip(out, f(x, y)):
            torch.testing.assert_close(a.cpu(), e)
    assert torch_tpu.compile.stats()["captures"] == 1
    assert counter("compiled_graph_captures") == 1
    assert counter("compiled_graph_replays") == 4
    (graph,) = [g for g in torch_tpu.compile.graphs() if g.programs]
    assert graph.kind == "inference"
    text = graph.text()
    assert "stablehlo.dot_general" in text and "stablehlo.tanh" in text


def test_training_step_forward_and_backward_each_one_program(no_fallback):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    ref = nn.Sequential(*[m for m in __import__("copy").deepcopy(model)])
    model.to("tpu")
    cmodel = torch.compile(model, backend="tpu")
    for step in range(3):
        x = torch.randn(8, 16)
        y = torch.randint(0, 4, (8,))
        loss = F.cross_entropy(cmodel(x.to("tpu")), y.to("tpu"))
        loss.backward()
        ref_loss = F.cross_entropy(ref(x), y)
        ref_loss.backward()
        torch.testing.assert_close(loss.cpu(), ref_loss)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6)
    kinds = sorted(g.kind for g in torch_tpu.compile.graphs() if g.programs)
    assert kinds == ["backward", "forward"]
    assert torch_tpu.compile.stats()["captures"] == 2  # one each, replayed on later steps


def test_outputs_that_alias_inputs_or_each_other_are_views(no_fallback):
    def f(x):
        y = x * 2
        return x.t(), x[1:, ::2], y, y[0], y.view(-1)

    x = torch.randn(4, 6)
    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        t = x.to("tpu")
        a, b, y, y0, yflat = cf(t)
        for got, want in zip((a, b, y, y0, yflat), f(x)):
            torch.testing.assert_close(got.cpu(), want)
        assert a.data_ptr() == t.data_ptr() and a._base is t or a.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        assert b.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        assert y0.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
        assert yflat.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
        t.add_(1)  # the views see writes to their base, as in eager
        torch.testing.assert_close(a.cpu(), (x + 1).t())


def test_inputs_written_in_place_are_written_by_the_program(no_fallback):
    def f(x, buf):
        buf.mul_(0.5).add_(x)
        x[0].zero_()
        return buf.sum()

    cf = torch.compile(f, backend="tpu")
    x, buf = torch.randn(3, 5), torch.randn(3, 5)
    tx, tbuf = x.to("tpu"), buf.to("tpu")
    for _ in range(3):
        want = f(x, buf)
        got = cf(tx, tbuf)
        torch.testing.assert_close(got.cpu(), want)
        torch.testing.assert_close(tx.cpu(), x)
        torch.testing.assert_close(tbuf.cpu(), buf)
        x.add_(1)
        tx.add_(1)


def test_graph_breaks_run_as_eager_ops(no_fallback):
    def f(x):
        y = x.sin() * 2
        torch._dynamo.graph_break()
        return y.cos() + x

    x = torch.randn(5, 5)
    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        torch.testing.assert_close(cf(x.to("tpu")).cpu(), f(x))
    assert torch_tpu.compile.stats()["dynamo_graphs"] == 2


def test_a_host_read_inside_a_graph_runs_that_graph_eagerly_with_a_warning():
    def f(x):
        n = (x > 0).sum().item()
        return x * n

    x = torch.randn(6)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        cf = torch.compile(f, backend="tpu")
        with pytest.warns(UserWarning, match="reads a device value on the host"):
            out = cf(x.to("tpu"))
        torch.testing.assert_close(out.cpu(), f(x))
        x2 = torch.randn(6)
        torch.testing.assert_close(cf(x2.to("tpu")).cpu(), f(x2))  # still right, no new warning
    (why,) = torch_tpu.compile.fallbacks().values()
    assert "host" in why
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        torch._dynamo.reset()
        strict = torch.compile(f, backend="tpu", options={"fallback": "error"})
        with pytest.raises(RuntimeError, match="cannot be captured as one program"):
            strict(x.to("tpu"))


def test_a_cpu_fallback_op_makes_its_graph_eager():
    def f(x):
        return torch.linalg.det(x) + 1  # det has no tpu lowering

    x = torch.randn(3, 3)
    cf = torch.compile(f, backend="tpu")
    with pytest.warns(UserWarning, match="no native tpu lowering"):
        torch.testing.assert_close(cf(x.to("tpu")).cpu(), f(x))


def test_dropout_draws_new_masks_like_eager(no_fallback):
    def f(x):
        return F.dropout(x, 0.5, training=True)

    x = torch.ones(64, 64)
    cf = torch.compile(f, backend="tpu")
    torch.tpu.manual_seed(7)
    compiled = [cf(x.to("tpu")).cpu() for _ in range(3)]
    torch.tpu.manual_seed(7)
    eager = [f(x.to("tpu")).cpu() for _ in range(3)]
    for c, e in zip(compiled, eager):
        torch.testing.assert_close(c, e)  # the same Philox draws, in the same order
    assert not torch.equal(compiled[0], compiled[1])


def test_a_new_shape_recompiles_with_its_reason():
    def f(x):
        return x.softmax(-1)

    cf = torch.compile(f, backend="tpu", dynamic=False)
    for n in (8, 8, 9):
        x = torch.randn(4, n)
        torch.testing.assert_close(cf(x.to("tpu")).cpu(), f(x))
    (rc,) = torch_tpu.compile.recompiles()
    assert rc.level == "dynamo" and "size" in rc.reason


def test_cache_only_proves_a_loop_compiles_nothing():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    cmodel = torch.compile(model, backend="tpu")
    x = torch.randn(4, 8, device="tpu")

    def step():
        opt.zero_grad()
        cmodel(x).square().mean().backward()
        opt.step()

    for _ in range(2):
        step()
    with torch_tpu.compile.cache_only():
        for _ in range(20):
            step()
    with pytest.raises(torch_tpu.compile.CacheOnlyError, match="size mismatch"):
        with torch_tpu.compile.cache_only():
            cmodel(torch.randn(5, 8, device="tpu"))


def test_plain_torch_compile_uses_the_tpu_backend_and_reports_inductor_settings(no_fallback):
    def f(x):
        return (x.exp() - 1).mean(0)

    x = torch.randn(7, 3)
    cf = torch.compile(f, mode="max-autotune-no-cudagraphs")
    with pytest.warns(UserWarning, match="do not apply to tpu tensors"):
        out = cf(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x))
    assert torch_tpu.compile.stats()["captures"] == 1
    # CPU tensors still go to Inductor.
    torch.testing.assert_close(torch.compile(f)(x), f(x))


def test_options_and_modes_that_do_not_apply_are_reported():
    def f(x):
        return x + 1

    with pytest.warns(UserWarning, match=r"\['triton.cudagraphs'\] do not apply"):
        torch.compile(f, backend="tpu", options={"triton.cudagraphs": True})(torch.ones(2, device="tpu"))
    torch._dynamo.reset()
    with pytest.warns(UserWarning, match="mode='max-autotune' does not apply"):
        torch.compile(f, backend="tpu", mode="max-autotune")(torch.ones(2, device="tpu"))
    with pytest.raises(Exception, match="fallback"):
        torch._dynamo.reset()
        torch.compile(f, backend="tpu", options={"fallback": "sometimes"})(torch.ones(2, device="tpu"))


def test_compiled_graphs_in_each_eager_mode(mode, no_fallback):
    def f(x, w):
        return F.gelu(x @ w).mean(-1)

    cf = torch.compile(f, backend="tpu")
    x, w = torch.randn(6, 4), torch.randn(4, 5)
    for _ in range(2):
        torch.testing.assert_close(cf(x.to("tpu"), w.to("tpu")).cpu(), f(x, w))


def test_fused_window_work_on_the_graphs_buffers_runs_first(no_fallback):
    def f(x, acc):
        acc.add_(x)
        return (x * 3).sum()

    cf = torch.compile(f, backend="tpu")
    acc, x = torch.zeros(4), torch.arange(4.0)
    tacc = acc.to("tpu")
    cf(x.to("tpu"), tacc)  # captured outside fused mode
    with torch_tpu.eager_mode("fused"):
        torch_tpu.metrics.reset()
        tx = x.to("tpu") + 1           # pending in the window
        seen = tacc * 1                # the window reads acc before the graph writes it
        s = cf(tx, tacc)
        after = tacc * 1
        assert torch_tpu.metrics.window_cuts().get("compiled_graph") == 1
        torch.testing.assert_close(seen.cpu(), x)
        torch.testing.assert_close(after.cpu(), x + x + 1)
        torch.testing.assert_close(s.cpu(), ((x + 1) * 3).sum())


def test_capture_takes_no_device_memory_for_intermediates(no_fallback):
    def f(x):
        for _ in range(8):
            x = (x * 1.5).tanh()
        return x

    cf = torch.compile(f, backend="tpu")
    x = torch.randn(256, 256, device="tpu")
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    y = cf(x)
    torch.tpu.synchronize()
    # The capture recorded 16 intermediates of 256 KiB without memory; the call allocated its one output.
    assert torch.tpu.memory_allocated() - before <= y.untyped_storage().nbytes()
    torch.testing.assert_close(y.cpu(), f(x.cpu()))


def test_attention_rows_masked_entirely_are_zero_like_pytorchs(no_fallback):
    # SDPA's math path ends its softmax in the safe-softmax guard (rows whose every score is -inf
    # give 0, not NaN); the host executor runs softmax and guard as one row kernel (Note [Safe
    # softmax rows]). Rows 2 and 5 of the mask hide every key; forward and gradients vs PyTorch CPU.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 8, 16, generator=g) for _ in range(3))
    mask = torch.rand(8, 8, generator=g) > 0.3
    mask[:, 0] = True
    mask[2] = mask[5] = False

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.device))

    def run(fn, device):
        ins = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
        out = fn(*ins)
        out.backward(torch.cos(torch.arange(out.numel(), dtype=torch.float32)).reshape(out.shape).to(device))
        return [out.detach().cpu()] + [t.grad.cpu() for t in ins]

    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        want = run(f, "cpu")
    got = run(torch.compile(f, backend="tpu"), "tpu")
    assert torch.all(want[0][:, :, [2, 5]] == 0)
    for a, e in zip(got, want):
        assert not torch.isnan(a).any()
        torch.testing.assert_close(a, e)
