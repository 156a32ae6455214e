"""torch.profiler with the tpu device (Note [Device timeline] in csrc/torch/profiler.cc): device
events for what the queue ran -- named by their op, with the user's line -- in the same Chrome
trace as the CPU ops and in key_averages(), linked to the ops that issued them; their durations
add up to the time the device was busy."""
import json
import time

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu
from conftest import restored_option

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def test_the_device_timeline_shows_each_program(mode, tmp_path):
    x = torch.randn(128, 128, device="tpu")
    torch.tpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        y = x @ x  # the user's line of the mm
        z = torch.relu(y + 1)
        z.sum().item()
    events = torch_tpu.profiler.device_events(prof)
    assert events, "no device events in the profile"
    names = {e.name for e in events}
    if mode == "fused":
        assert "tpu fused window" in names
    else:
        assert {"tpu aten::mm", "tpu aten::add", "tpu aten::relu", "tpu aten::sum"} <= names, names
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    dev = torch_tpu.profiler.trace_device_events(str(path))
    assert len(dev) == len(events)
    mm = [e for e in dev if e["args"]["op"] == ("fused window" if mode == "fused" else "aten::mm")]
    assert mm and mm[0]["args"]["user line"].endswith("test_profiler.py:%d" % (_line_of("y = x @ x") ))
    if mode == "fused":
        assert "aten::mm" in mm[0]["args"]["ops"] and "aten::relu" in mm[0]["args"]["ops"]
    trace = json.loads(path.read_text())
    cpu_ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    assert any(e["name"] == "aten::mm" for e in cpu_ops)  # one trace: CPU ops and the device
    rows = {r.key: r for r in prof.key_averages()}
    device_rows = [r for r in rows.values() if r.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert device_rows and all(r.self_device_time_total > 0 for r in device_rows)
    if mode != "fused":
        # The CPU op that issued a program carries its device time.
        assert rows["aten::mm"].device_time_total > 0


def _line_of(text):
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return i
    raise AssertionError(text)


def test_device_events_add_up_to_the_busy_time(tmp_path):
    # A device-bound run: big matmuls queued back to back keep the queue busy from the first
    # launch to the last result, so the wall time of the section is the device's busy time.
    with restored_option("inline_work") as set_inline_work, torch_tpu.eager_mode("strict"):
        set_inline_work(0)
        a = torch.randn(768, 768, device="tpu")
        (a @ a).sum().item()  # compiled and warm
        torch.tpu.synchronize()
        with profile(activities=ACTIVITIES) as prof:
            t0 = time.perf_counter()
            b = a
            for _ in range(12):
                b = torch.tanh(b @ a)
            torch.tpu.synchronize()
            wall_us = (time.perf_counter() - t0) * 1e6
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    dev = torch_tpu.profiler.trace_device_events(str(path))
    busy_us = sum(e["dur"] for e in dev)
    span_us = max(e["ts"] + e["dur"] for e in dev) - min(e["ts"] for e in dev)
    assert len([e for e in dev if e["name"] == "tpu aten::mm"]) == 12
    assert abs(busy_us - wall_us) <= 0.1 * wall_us, (busy_us, wall_us)
    assert busy_us <= span_us * 1.001  # one queue: its tasks do not overlap
    assert abs(torch_tpu.profiler.device_time_us(prof) - busy_us) <= 0.01 * busy_us


def test_copies_and_host_tasks_are_on_the_timeline():
    with profile(activities=ACTIVITIES) as prof:
        d = torch.arange(1000.0).to("tpu")
        d.cpu()
        ev = torch.tpu.Event(enable_timing=True)
        ev.record()
        ev.synchronize()
    kinds = {e.name for e in torch_tpu.profiler.device_events(prof)}
    assert {"tpu copy to tpu", "tpu copy to host", "tpu event.record"} <= kinds, kinds


def test_a_cpu_only_profile_has_no_device_events():
    x = torch.randn(16, device="tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x * 2).sum().item()
    assert not torch_tpu.profiler.device_events(prof)
    assert not torch_tpu._C._device_profiling()


def test_profiling_twice_and_after(tmp_path):
    x = torch.randn(32, 32, device="tpu")
    for _ in range(2):
        with profile(activities=ACTIVITIES) as prof:
            (x @ x).sum().item()
        assert {e.name for e in torch_tpu.profiler.device_events(prof)} >= {"tpu aten::mm"}
    assert not torch_tpu._C._device_profiling()
    (x @ x).sum().item()  # the device runs on without an observer


def test_plot_trace_draws_the_exported_events(tmp_path):
    pytest.importorskip("matplotlib")
    x = torch.randn(64, 64, device="tpu")
    with profile(activities=ACTIVITIES) as prof:
        (x @ x).relu().sum().item()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    png = tmp_path / "trace.png"
    torch_tpu.profiler.plot_trace(str(path), str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_host_profile_keeps_each_steps_first_run_apart():
    # TORCH_TPU_HOST_PROFILE=1 prints, at exit, the host executor's time per step kind; a step's
    # first run (a oneDNN primitive's creation, first-touch memory) is reported apart so a short
    # run does not show it as a slow kernel.
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import torch, torch_tpu
        a = torch.randn(64, 32, device="tpu"); b = torch.randn(32, 16, device="tpu")
        for _ in range(3):
            (a @ b).cpu()
    """)
    env = dict(os.environ, TORCH_TPU_HOST_PROFILE="1", TORCH_TPU_BACKEND="host", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "torch_tpu host_profile:" in r.stderr and "after each one's first run" in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if "stablehlo.dot_general [64, 32]" in ln]
    assert " 2 steps " in line and "first run" in line  # three runs: the first apart, two after
