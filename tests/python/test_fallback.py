"""The CPU fallback for ops without a native lowering: same results as CPU, counted per op, warned
about once per op, refusable with config 'fallback'='error', and writing back every mutated
argument (in-place ops on views, out= tensors, tensor lists).

The ops used here were chosen because no one is making them native soon (linear algebra, scans,
histograms); if one becomes native, pick another op without a lowering."""
from __future__ import annotations

import copy
import os
import pathlib
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torch_tpu
from conftest import check_same, restored_option

REPO = str(pathlib.Path(torch_tpu.__file__).resolve().parent.parent)


@pytest.fixture
def fallback_policy():
    with restored_option("fallback") as set_policy:
        yield set_policy


def fallback_counts():
    return torch_tpu.metrics.fallback_ops()


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---- results and counting ----------------------------------------------------------------------
@pytest.mark.parametrize("name,fn,counted", [
    ("det", lambda a: torch.linalg.det(a), "aten::_linalg_det.result"),
    ("i0e", lambda a: torch.special.i0e(a), "aten::special_i0e.out"),
    ("frexp", lambda a: torch.frexp(a), "aten::frexp.Tensor_out"),
    ("slogdet", lambda a: torch.linalg.slogdet(a), "aten::_linalg_slogdet.sign"),
    ("logcumsumexp", lambda a: torch.logcumsumexp(a, 0), "aten::_logcumsumexp"),
])
def test_fallback_matches_cpu_and_is_counted(mode, fallback_policy, name, fn, counted):
    fallback_policy("silent")
    torch_tpu.metrics.reset()
    out = check_same(fn, rand(4, 4))
    for t in out if isinstance(out, tuple) else (out,):
        assert t.device == torch.device("tpu:0")  # results come back on the device
    assert fallback_counts().get(counted) == 1, fallback_counts()
    assert torch_tpu.metrics.counters()[f"fallback/{counted}"] == 1


def test_fallback_noncontiguous_and_dtypes(mode, fallback_policy):
    fallback_policy("silent")
    x = rand(5, 6)
    check_same(lambda a: torch.special.i0e(a.t()[1:]), x)
    check_same(lambda a: torch.special.i0e(a[:, ::2]), x.bfloat16())
    check_same(lambda a: torch.cummin(a, 0), torch.tensor([3, -1, 7, 0, 7, 2]))
    check_same(lambda a: torch.cummax(a, 0), torch.tensor([True, False, True]))


def test_fallback_mixed_with_native(mode, fallback_policy):
    fallback_policy("silent")
    check_same(lambda a, b: torch.special.i0e(a * 2 + b) - b, rand(4, 3), rand(4, 3, seed=1))


def test_fallback_gradients(mode, fallback_policy):
    fallback_policy("silent")
    x = rand(3, 3, seed=2).requires_grad_()
    d = x.detach().to("tpu").requires_grad_()
    for t in (x, d):
        torch.linalg.det(t * 2).backward()
    torch.testing.assert_close(d.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)


# ---- warnings and the error policy -------------------------------------------------------------
def test_warns_once_per_op():
    # "Once" is per process, so this runs in a fresh one where nothing has warned yet.
    code = textwrap.dedent("""
        import warnings, torch, torch_tpu
        x = torch.ones(8, device="tpu")
        texts = []
        for op in (torch.frexp, torch.frexp, torch.linalg.det, torch.frexp):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                op(x.view(2, 2, 2) if op is torch.linalg.det else x)
            texts += [str(m.message) for m in w if "no native tpu lowering" in str(m.message)]
            print([t.split(" has no")[0] for t in texts])
        print(torch_tpu.metrics.fallback_ops())
        print(texts[0])
    """)
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCH_TPU_FALLBACK="warn",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:4] == ["['aten::frexp.Tensor_out']", "['aten::frexp.Tensor_out']",
                         "['aten::frexp.Tensor_out', 'aten::_linalg_det.result']",
                         "['aten::frexp.Tensor_out', 'aten::_linalg_det.result']"]
    assert lines[4] == "{'aten::_linalg_det.result': 1, 'aten::frexp.Tensor_out': 3}"  # counted every time, warned once
    assert lines[5].startswith("aten::frexp.Tensor_out has no native tpu lowering: it runs on the CPU")
    assert "fallback/aten::frexp.Tensor_out" in lines[5] and "TORCH_TPU_FALLBACK=error" in lines[5]


def test_silent_policy_does_not_warn(fallback_policy):
    fallback_policy("silent")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.frexp(torch.tensor([0.5, 2.5], device="tpu"))
    assert fallback_counts().get("aten::frexp.Tensor_out")
    assert not [m for m in w if "no native tpu lowering" in str(m.message)]


def test_error_policy(fallback_policy):
    fallback_policy("error")
    x = torch.ones(3, 3, device="tpu")
    with pytest.raises(RuntimeError, match=r"aten::frexp.Tensor_out has no native tpu lowering.*TORCH_TPU_FALLBACK=error"):
        torch.frexp(x)
    with pytest.raises(RuntimeError, match=r"aten::_linalg_det.result has no native tpu lowering"):
        torch.linalg.det(x)
    # native ops are unaffected, and the device keeps working
    assert torch.equal((x * 2).cpu(), torch.full((3, 3), 2.0))
    fallback_policy("silent")
    assert torch.linalg.det(x).item() == 0.0


# ---- mutating ops write back -------------------------------------------------------------------
def test_inplace_fallback_on_view_writes_base(mode, fallback_policy):
    fallback_policy("silent")

    def fn(a):
        a = a.clone()
        a[:, 1:2].renorm_(2, 1, 0.5)  # through renorm.out with out = a strided view
        a.t()[2:].renorm_(1, 0, 1.0)
        a[1:, :2].renorm_(2, 0, 1.0)
        return a
    check_same(fn, rand(4, 5))


def test_out_through_fallback(mode, fallback_policy):
    fallback_policy("silent")
    x = rand(4, 5)
    d = x.to("tpu")
    # out= of the wrong size is resized, like CPU
    o = torch.empty(0, device="tpu")
    r = torch.renorm(d, 2, 0, 1.0, out=o)
    assert r is o and o.shape == (4, 5)
    assert torch.equal(o.cpu(), torch.renorm(x, 2, 0, 1.0))
    # out= a non-contiguous view of a bigger tensor: written in place, the rest untouched
    big = torch.full((5, 4), -7.0, device="tpu")
    torch.renorm(d[:, :4], 2, 0, 1.0, out=big.t()[:, 1:])
    ref = torch.full((5, 4), -7.0)
    ref.t()[:, 1:].copy_(torch.renorm(x[:, :4], 2, 0, 1.0))
    assert torch.equal(big.cpu(), ref)
    # several outputs
    mantissa = torch.empty(0, device="tpu")
    exponent = torch.empty(0, dtype=torch.int32, device="tpu")
    torch.frexp(d, out=(mantissa, exponent))
    em, ee = torch.frexp(x)
    assert torch.equal(mantissa.cpu(), em) and torch.equal(exponent.cpu(), ee)


def test_out_dtype_mismatch_through_fallback(fallback_policy):
    fallback_policy("silent")
    expected = None
    try:
        torch.renorm(torch.full((3, 3), 2.0), 2, 0, 1.0, out=torch.empty(3, 3, dtype=torch.long))
    except RuntimeError as e:
        expected = e
    if expected is None:  # CPU accepts it: the device must give the same values
        o = torch.empty(3, 3, dtype=torch.long, device="tpu")
        torch.renorm(torch.full((3, 3), 2.0, device="tpu"), 2, 0, 1.0, out=o)
        assert torch.equal(o.cpu(), torch.renorm(torch.full((3, 3), 2.0), 2, 0, 1.0).long())
    else:
        with pytest.raises(RuntimeError):
            torch.renorm(torch.full((3, 3), 2.0, device="tpu"), 2, 0, 1.0,
                         out=torch.empty(3, 3, dtype=torch.long, device="tpu"))


def test_tensor_list_mutation_through_fallback(fallback_policy):
    # _fused_adagrad_ mutates four tensor lists (parameters, gradients, sums, steps) and has no
    # tpu kernel, so the fallback must write every element of every list back.
    fallback_policy("silent")

    def lists(device):
        params = [rand(3).to(device), rand(2, 2, seed=1).to(device)]
        grads = [rand(3, seed=2).to(device), rand(2, 2, seed=3).to(device)]
        sums = [torch.zeros(3, device=device), torch.full((2, 2), 0.5, device=device)]
        steps = [torch.tensor(1.0, device=device), torch.tensor(4.0, device=device)]
        return params, grads, sums, steps

    kw = dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, eps=1e-10, maximize=False,
              grad_scale=None, found_inf=None)
    cpu, dev = lists("cpu"), lists("tpu")
    torch._fused_adagrad_(*cpu, **kw)
    torch_tpu.metrics.reset()
    torch._fused_adagrad_(*dev, **kw)
    for lc, ld in zip(cpu, dev):
        for c, d in zip(lc, ld):
            assert torch.equal(d.cpu(), c)
    assert "aten::_fused_adagrad_" in fallback_counts()


def test_foreach_ops_mutate_lists(mode, fallback_policy):
    fallback_policy("silent")

    def fn(a, b, c):
        xs = [a.clone(), b.clone().t(), c.clone()]
        torch._foreach_mul_(xs, 3.0)
        torch._foreach_add_(xs, [a, b.t(), c], alpha=0.5)
        torch._foreach_addcmul_(xs, xs, xs, value=0.5)
        return xs
    check_same(fn, rand(3), rand(2, 4, seed=1), rand(5, seed=2))


@pytest.mark.parametrize("foreach", [True, False])
def test_adam_step_matches_cpu(mode, fallback_policy, foreach):
    fallback_policy("silent")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    model_d = copy.deepcopy(model).to("tpu")
    x = rand(6, 4, seed=3)
    results = []
    for m, inp in ((model, x), (model_d, x.to("tpu"))):
        opt = torch.optim.Adam(m.parameters(), lr=0.05, weight_decay=0.01, foreach=foreach)
        for _ in range(3):
            opt.zero_grad()
            (m(inp) ** 2).sum().backward()
            opt.step()
        results.append([p.detach().cpu() for p in m.parameters()])
        results.append([opt.state[p]["exp_avg_sq"].cpu() for p in m.parameters()])
    for cpu_ts, dev_ts in ((results[0], results[2]), (results[1], results[3])):
        for c, d in zip(cpu_ts, dev_ts):
            torch.testing.assert_close(d, c, rtol=1e-5, atol=1e-6)


def test_view_ops_never_reach_the_fallback():
    # The fallback cannot alias (it computes on a CPU copy): every view op must be native.
    d = torch.arange(9.0).to("tpu")
    torch_tpu.metrics.reset()
    u = d.unfold(0, 3, 3)
    assert "aten::unfold" not in fallback_counts()
    u.zero_()
    assert torch.equal(d.cpu(), torch.zeros(9))


# ---- memory ----------------------------------------------------------------------------------
def test_fallback_copies_are_charged_to_the_device(fallback_policy):
    # On the host executor device memory is host RAM: the CPU copies the fallback makes of device
    # tensors take it too, so they count in memory_stats and in the process's budget.
    fallback_policy("silent")
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    x = torch.randn(4 << 20, device="tpu")  # 16 MiB
    torch.tpu.reset_peak_memory_stats()
    torch.logcumsumexp(x, 0).cpu()
    stats = torch.tpu.memory_stats()
    assert stats["host_copy_bytes.all.current"] == 0  # the copies are gone with the call
    assert stats["host_copy_bytes.all.peak"] >= 16 << 20
    # A budget with room for x's result but not also for its copy: the fallback is refused with
    # the device's out-of-memory error, and the device stays usable.
    capacity = torch.tpu.get_device_properties().total_memory
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    torch.tpu.set_per_process_memory_fraction((torch.tpu.memory_reserved() + (24 << 20)) / capacity)
    try:
        with pytest.raises(torch.tpu.OutOfMemoryError, match="out of memory"):
            torch.logcumsumexp(x, 0)
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    assert torch.tpu.memory_stats()["host_copy_bytes.all.current"] == 0
    torch.testing.assert_close(torch.logcumsumexp(x[:8], 0).cpu(), torch.logcumsumexp(x[:8].cpu(), 0))
