"""Where a data-dependent device error goes (Note [Task errors] in csrc/runtime/queue.h): to the
thread that issued the failing op and to the sync points whose data depends on it -- never to an
unrelated thread, never lost, and work that depends on a failed value does not run on it, so a
training step with a bad label leaves the weights as they were (as on CPU, where the op raises)."""
from __future__ import annotations

import contextlib
import copy
import inspect
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

import torch_tpu
from conftest import restored_option


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


def device_still_works():
    a = torch.arange(6.0).to("tpu")
    assert ((a * 2 + 1).cpu() == torch.arange(6.0) * 2 + 1).all()
    torch.tpu.synchronize()  # no stale error left on the queue


# ---- threads ----------------------------------------------------------------------------------
def test_a_threads_error_reaches_that_thread_only(mode, no_fallback):
    """Thread A issues an out-of-range index_select; thread B, afterwards, runs unrelated ops and
    reads them. B sees no error; A gets its own (at the op in debug mode, at its sync point
    otherwise), naming the op and A's line."""
    x = torch.tensor([1.0, 2.0], device="tpu")
    bad = torch.tensor([5], device="tpu")
    issued, b_done = threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        try:
            try:
                seen["a_line"] = this_line() + 1
                y = x.index_select(0, bad)
            except IndexError as e:  # debug mode: at the op
                seen["a_error"] = str(e)
                return
            finally:
                issued.set()
            b_done.wait(60)
            try:
                y.cpu()
                seen["a_error"] = None
            except IndexError as e:
                seen["a_error"] = str(e)
        except BaseException as e:  # anything else is a failure of the test
            seen["a_unexpected"] = repr(e)

    def thread_b():
        try:
            issued.wait(60)
            z = torch.ones(3, device="tpu") * 2 + torch.arange(3.0, device="tpu")
            seen["b_value"] = z.cpu()
            seen["b_item"] = z.sum().item()
        except BaseException as e:
            seen["b_error"] = repr(e)
        finally:
            b_done.set()

    ta, tb = threading.Thread(target=thread_a), threading.Thread(target=thread_b)
    ta.start(), tb.start()
    ta.join(120), tb.join(120)
    assert "a_unexpected" not in seen, seen
    assert "b_error" not in seen, f"thread B received another thread's error: {seen['b_error']}"
    assert torch.equal(seen["b_value"], torch.tensor([2.0, 3.0, 4.0]))
    assert seen["b_item"] == 9.0
    msg = seen["a_error"]
    assert msg is not None, "thread A's bad op raised nowhere"
    assert "aten::index_select" in msg and f"{__file__}:{seen['a_line']}" in msg, msg
    assert "index 5 is out of bounds" in msg
    device_still_works()


# ---- a training step with a bad label ----------------------------------------------------------
def _model_and_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 5))
    x = torch.randn(3, 4)
    return model, x, torch.tensor([1, 7, 2]), torch.tensor([1, 2, 3])  # 7: no such class


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=0.01, fused=True),
}


def _bad_step(model, opt, x, y):
    opt.zero_grad()
    line = this_line() + 1
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss, line


def _cpu_reference_error(model, x, y):
    with pytest.raises(IndexError) as e:
        torch.nn.functional.cross_entropy(model(x), y)
    return str(e.value)


@pytest.mark.parametrize("inline", [0, 2048], ids=["queued", "inline"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_bad_label_step_leaves_weights_unchanged_strict(name, inline, no_fallback):
    """Strict mode: cross_entropy with a bad label, backward() and opt.step() are all queued; the
    loss, the gradients and the update do not run on the failed value, loss.item() raises naming
    the op and the line, and the weights keep their values (on CPU the loss raises at once). The
    optimizer state is usable afterwards: the next good step trains as it does on the CPU.
    `queued` keeps the ops off the calling thread (loss.item() then reports the error before the
    update has even been skipped)."""
    model, x, y_bad, y_good = _model_and_data()
    cpu_model = copy.deepcopy(model)
    cpu_message = _cpu_reference_error(cpu_model, x, y_bad)
    assert "Target 7 is out of bounds" in cpu_message
    before = [p.detach().clone() for p in model.parameters()]
    with restored_option("inline_work") as set_inline, torch_tpu.eager_mode("strict"):
        set_inline(inline)
        model.to("tpu")
        opt = OPTIMIZERS[name](model.parameters())
        loss, line = _bad_step(model, opt, x.to("tpu"), y_bad.to("tpu"))
        with pytest.raises(IndexError) as e:
            loss.item()
        msg = str(e.value)
        assert "aten::nll_loss_forward" in msg and f"{__file__}:{line}" in msg, msg
        assert "index 7 is out of bounds for dimension 1 with size 5" in msg
        for b, p in zip(before, model.parameters()):
            assert torch.equal(p.detach().cpu(), b), "the failed step changed a weight"
        device_still_works()
        # The next step trains from the unchanged weights, as the CPU does after its error.
        cpu_opt = OPTIMIZERS[name](cpu_model.parameters())
        for m, o, xx, yy in [(model, opt, x.to("tpu"), y_good.to("tpu")), (cpu_model, cpu_opt, x, y_good)]:
            o.zero_grad()
            torch.nn.functional.cross_entropy(m(xx), yy).backward()
            o.step()
        if name == "sgd":
            for p, q in zip(model.parameters(), cpu_model.parameters()):
                torch.testing.assert_close(p.detach().cpu(), q.detach())
        elif name.startswith("adam"):
            # The failed step created the moments on the device (zeros; their in-place update
            # did not run) and advanced the step count (a Python number, or a tensor the update
            # did not touch): the weights move, from valid data, though not exactly as the CPU's.
            for p, b in zip(model.parameters(), before):
                p = p.detach().cpu()
                assert torch.isfinite(p).all() and not torch.equal(p, b)
        else:
            # The momentum buffers were created from the gradients of the failed step, which have
            # no value: the next step that uses them does not run either, and says so once (no
            # silently stale weights); the weights keep their values.
            with pytest.raises(IndexError, match="aten::.*this op did not run: an input has no value.*"
                                                 "aten::nll_loss_forward"):
                torch.tpu.synchronize()
            for b, p in zip(before, model.parameters()):
                assert torch.equal(p.detach().cpu(), b)
            opt.state.clear()  # fresh buffers: training goes on
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x.to("tpu")), y_good.to("tpu")).backward()
            opt.step()
            assert all(not torch.equal(p.detach().cpu(), b) for p, b in zip(model.parameters(), before))
        torch.tpu.synchronize()


def test_bad_label_step_leaves_weights_unchanged_fused(no_fallback):
    """Fused mode: forward, backward and the update are one window; loss.item() cuts it. The
    window's failed op (the loss's checked gather) fails only what depends on it: the weights
    written in place keep their values, the loss raises naming the op and the line."""
    model, x, y_bad, y_good = _model_and_data()
    before = [p.detach().clone() for p in model.parameters()]
    with torch_tpu.eager_mode("fused"):
        model.to("tpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss, line = _bad_step(model, opt, x.to("tpu"), y_bad.to("tpu"))
        with pytest.raises(IndexError) as e:
            loss.item()
        msg = str(e.value)
        assert "aten::nll_loss_forward" in msg and f"{__file__}:{line}" in msg, msg
        for b, p in zip(before, model.parameters()):
            assert torch.equal(p.detach().cpu(), b), "the failed window changed a weight"
        device_still_works()
        opt.zero_grad()  # the failed step's gradients have no value
        loss = torch.nn.functional.cross_entropy(model(x.to("tpu")), y_good.to("tpu"))
        loss.backward()
        opt.step()
        assert torch.isfinite(loss).item()
        assert all(not torch.equal(p.detach().cpu(), b) for p, b in zip(model.parameters(), before))


def test_fused_state_made_from_a_failed_value_says_so(no_fallback):
    """Fused mode, momentum: the momentum buffer the failed step creates is computed from the
    gradient that has no value. Reading it (or stepping with it) raises the original error's
    text -- never garbage, never silence. (Strict mode keeps the buffers valid: see above.)"""
    model, x, y_bad, _ = _model_and_data()
    with torch_tpu.eager_mode("fused"):
        model.to("tpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss, _ = _bad_step(model, opt, x.to("tpu"), y_bad.to("tpu"))
        with pytest.raises(IndexError):
            loss.item()
        buf = opt.state[next(model.parameters())]["momentum_buffer"]
        with pytest.raises((IndexError, RuntimeError), match="has no value.*aten::nll_loss_forward"):
            buf.cpu()
        device_still_works()


# ---- scripts: Ctrl-C at a sync point, errors nothing synced -------------------------------------
REPO = Path(__file__).resolve().parents[2]


def run_script(tmp_path, text: str, **env_extra) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(text))
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCH_TPU_EAGER_MODE="strict", **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)


def test_ctrl_c_at_a_sync_point_interrupts_promptly_and_cancels(tmp_path):
    """Note [Interruptible waits]: SIGINT while the main thread waits at .item() for many queued
    matmuls raises KeyboardInterrupt within a second; the queued work that had not started is
    cancelled (its result says so), the weights it was to update in place keep their values, and
    the device works afterwards."""
    r = run_script(tmp_path, """
        import os, signal, threading, time
        import torch, torch_tpu
        torch_tpu.config.set("inline_work", 0)
        a = torch.randn(1024, 1024, device="tpu")
        w = torch.zeros(4, device="tpu")
        torch.tpu.synchronize()
        for _ in range(400):  # minutes of queued work
            a = (a @ a) * 1e-3
        w.add_(1.0)  # queued after the matmuls: cancelled, w keeps 0
        sent = []
        threading.Timer(0.5, lambda: (sent.append(time.monotonic()), os.kill(os.getpid(), signal.SIGINT))).start()
        try:
            a.sum().item()
            print("NOT INTERRUPTED")
        except KeyboardInterrupt:
            print("latency", time.monotonic() - sent[0])
        try:
            a.cpu()
            print("A HAS A VALUE")
        except RuntimeError as e:
            print("a:", "cancelled" in str(e))
        print("cancelled", torch_tpu.metrics.counters().get("tasks_cancelled", 0) > 300)
        print("w", w.cpu().tolist())
        print("works", (torch.ones(3, device="tpu") * 2).sum().item())
    """, TORCH_TPU_QUEUE_HELD_MEMORY_MB="4096")
    # (On pjrt the queue bounds the memory of the freed tensors its tasks keep alive, 1 GiB by
    # default; past it, issuing work waits. The 400 matmuls' 3.2 GB must all be queued here.)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "NOT INTERRUPTED" not in out and "latency" in out, out
    latency = float(out.split("latency ")[1].split()[0])
    assert latency < 1.0, out
    assert "cancelled True" in out and "a: True" in out, out
    assert "w [0.0, 0.0, 0.0, 0.0]" in out, out
    assert "works 6.0" in out, out


def test_an_error_nothing_synced_is_reported_at_exit(tmp_path):
    """Note [Errors at exit]: a failed op whose result is never read, in a script that never
    synchronizes, is printed at exit and the exit status becomes 1, not 0."""
    r = run_script(tmp_path, """
        import torch, torch_tpu
        x = torch.tensor([1.0, 2.0], device="tpu")
        y = x.index_select(0, torch.tensor([5], device="tpu"))
        print("done")
    """)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "done" in r.stdout
    assert "device errors that no sync point reported" in r.stderr, r.stderr
    assert "aten::index_select" in r.stderr and "index 5 is out of bounds" in r.stderr, r.stderr
    assert f"script.py:4" in r.stderr, r.stderr


def test_exit_status_is_kept_without_unreported_errors(tmp_path):
    r = run_script(tmp_path, """
        import sys, torch, torch_tpu
        x = torch.tensor([1.0, 2.0], device="tpu")
        y = x.index_select(0, torch.tensor([5], device="tpu"))
        try:
            y.cpu()
        except IndexError:
            pass
        sys.exit(3)
    """)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "no sync point reported" not in r.stderr, r.stderr
    ok = run_script(tmp_path, """
        import torch, torch_tpu
        print((torch.ones(2, device="tpu") + 1).cpu().tolist())
    """)
    assert ok.returncode == 0 and "[2.0, 2.0]" in ok.stdout, ok.stderr


# ---- torch._assert_async ----------------------------------------------------------------------
@pytest.mark.parametrize("value, msg, error", [
    (torch.tensor(0), None, "Expected Tensor with single nonzero value, but got zero"),
    (torch.tensor(0.0), "the user's message", "the user's message"),
    (torch.tensor(False), "", "Assertion is failed"),
    (torch.tensor(0j), None, "Expected Tensor with single nonzero value, but got zero"),
    (torch.tensor([[3]]), None, None),
    (torch.tensor(float("nan")), "nan is nonzero", None),
    (torch.tensor(True), None, None),
    (torch.tensor(-2 + 0j), None, None),
])
def test_assert_async_checks_on_the_device(mode, no_fallback, value, msg, error):
    """_assert_async runs on the device without a host sync (it used to fall back to the CPU,
    which read the value). A zero raises CPU's message at the next sync point, naming the op and
    the user's line (debug mode: at the op); a nonzero passes; the device stays usable."""
    args = (value,) if msg is None else (value, msg)
    with pytest.raises(RuntimeError, match=error) if error else contextlib.nullcontext():
        torch._assert_async(*args)  # the CPU agrees
    t = value.to("tpu")
    targs = (t,) if msg is None else (t, msg)
    host_syncs = torch_tpu.metrics.counters().get("host_syncs", 0)
    try:
        line = this_line() + 1
        torch._assert_async(*targs)
        assert torch_tpu.metrics.counters().get("host_syncs", 0) == host_syncs  # nothing read back
        torch.tpu.synchronize()
        raised = None
    except RuntimeError as e:
        raised = str(e)
    if error is None:
        assert raised is None
    else:
        assert raised is not None and error in raised and "_assert_async" in raised, raised
        assert f"test_error_delivery.py:{line}" in raised, raised
    device_still_works()


@pytest.mark.parametrize("bad", [torch.tensor([1, 1]), torch.tensor([])])
def test_assert_async_of_not_one_element_raises_at_the_call(mode, bad):
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with"):
        torch._assert_async(bad.to("tpu"))


def test_assert_async_inside_a_fused_window_runs_with_it():
    """In fused mode the check's result is read by nobody, yet the window keeps it as a result
    (Lowering::ForEffect, Window::KeepUntilCut): the check runs when the window does. No cut for
    the assert itself. (Which of the window's other values a failed check leaves uncomputed is the backend's: the
    host skips only what depends on the check, PJRT fails the whole program.)"""
    with torch_tpu.eager_mode("fused"):
        torch.tpu.synchronize()
        torch_tpu.metrics.reset()
        x = torch.arange(4.0, device="tpu")
        y = x * 2
        torch._assert_async((y.sum() > 100).to(torch.int64), "sum too small")
        z = y + 1
        assert torch_tpu.metrics.window_cuts() == {}
        with pytest.raises(RuntimeError, match="sum too small"):
            torch.tpu.synchronize()
        del z
        y = torch.arange(4.0, device="tpu") * 2
        torch._assert_async((y.sum() > 1).to(torch.int64), "fine")
        assert (y + 1).cpu().tolist() == [1.0, 3.0, 5.0, 7.0]
        torch.tpu.synchronize()
    device_still_works()
