"""The device queue's two ways of running a program, checked against each other and against CPU.

A program whose work is at most the option `inline_work` (elements produced, roughly), submitted
while the queue is idle, runs on the calling thread; anything else goes to the queue's worker.
Neither may be observable: results, ordering against queued work, and where errors surface
(strict: the next sync point; debug: the op) must be the same.
"""
from __future__ import annotations

import threading

import pytest
import torch

import torch_tpu
from conftest import restored_option


@pytest.fixture
def inline_work():
    with restored_option("inline_work") as set_to:
        yield set_to


def inline_runs():
    return torch_tpu.metrics.counters().get("inline_executions", 0)


def test_small_programs_run_inline_only_when_allowed(inline_work, no_fallback):
    x = torch.randn(16, device="tpu")
    torch.tpu.synchronize()
    inline_work(2048)
    before = inline_runs()
    y = x * 2 + 1
    assert inline_runs() == before + 2
    inline_work(0)
    z = x * 2 + 1
    assert inline_runs() == before + 2
    torch.testing.assert_close(y.cpu(), x.cpu() * 2 + 1)
    torch.testing.assert_close(z.cpu(), y.cpu(), rtol=0, atol=0)


def test_large_programs_are_queued(inline_work):
    inline_work(2048)
    x = torch.randn(256, 256, device="tpu")
    torch.tpu.synchronize()
    before = inline_runs()
    y = x @ x  # 256^3 multiply-adds: far above the bound
    torch.tpu.synchronize()
    assert inline_runs() == before
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("eager", ["strict", "debug"])
def test_small_ops_after_queued_work_see_its_results(inline_work, eager):
    """A tiny op reading (or overwriting) what a queued matmul still computes must wait its turn."""
    inline_work(2048)
    a = torch.randn(384, 384)
    with torch_tpu.eager_mode(eager):
        x = a.to("tpu")
        torch.tpu.synchronize()
        for _ in range(3):
            y = x @ x            # queued (large)
            s = y[:4, :4] * 1.0  # small, submitted while the matmul may still run
            x2 = x.clone()
            x2[:2] = 0.0         # small write into a tensor...
            z = x2 @ x2          # ...that a later large op reads
        expected = a @ a
        torch.testing.assert_close(s.cpu(), expected[:4, :4], rtol=1e-4, atol=1e-3)
        a2 = a.clone()
        a2[:2] = 0.0
        torch.testing.assert_close(z.cpu(), a2 @ a2, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("inline", [True, False])
def test_data_dependent_error_surfaces_at_sync_in_strict(inline_work, inline):
    inline_work(2048 if inline else 0)
    x = torch.tensor([1.0, 2.0], device="tpu")
    idx = torch.tensor([5], device="tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("strict"):
        before = inline_runs()
        y = x.index_select(0, idx)  # returns; the error is kept for the next sync point
        assert (inline_runs() > before) == inline
        with pytest.raises(IndexError, match="aten::index_select"):
            y.cpu()
    torch.tpu.synchronize()  # reported once
    assert (x + 1).cpu().tolist() == [2.0, 3.0]


@pytest.mark.parametrize("inline", [True, False])
def test_data_dependent_error_raises_at_the_op_in_debug(inline_work, inline):
    inline_work(2048 if inline else 0)
    x = torch.tensor([1.0, 2.0], device="tpu")
    idx = torch.tensor([5], device="tpu")
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(IndexError, match="aten::index_select"):
            x.index_select(0, idx)
    assert (x * 2).cpu().tolist() == [2.0, 4.0]


def test_several_python_threads_issue_ops(inline_work):
    """Ops from several threads (as a DeviceLoader thread and the training loop do) interleave on
    one queue; each thread's chain of small and large ops must still compute its own result."""
    inline_work(2048)
    results, errors = {}, []

    def work(k):
        try:
            g = torch.Generator().manual_seed(k)
            a = torch.randn(64, 64, generator=g)
            x = a.to("tpu")
            acc = torch.zeros(64, 64, device="tpu")
            for i in range(20):
                acc = acc + (x @ x if i % 5 == 0 else x * float(i))
            results[k] = (acc.cpu(), a)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, (got, a) in results.items():
        expected = torch.zeros(64, 64)
        for i in range(20):
            expected = expected + (a @ a if i % 5 == 0 else a * float(i))
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-3)
