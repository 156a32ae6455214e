"""The tpu device as PyTorch sees it: torch.device, .to()/.tpu(), torch.accelerator, the torch.tpu
module (devices, RNG, memory, streams/events, autocast), torch_tpu.config, environment options in
a fresh process, autoload, and the metrics counters."""
from __future__ import annotations

import gc
import importlib.metadata
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu

MiB = 1 << 20
REPO = pathlib.Path(torch_tpu.__file__).resolve().parent.parent


def run_python(code: str, **env_overrides) -> str:
    """Runs `code` in a fresh interpreter that imports this checkout of torch_tpu."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    env.update({k: str(v) for k, v in env_overrides.items()})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, f"subprocess failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


# ---- device objects and moving tensors ---------------------------------------------------------
def test_device_objects():
    assert torch.device("tpu").type == "tpu"
    assert torch.device("tpu:0") == torch.device("tpu", 0)
    assert torch_tpu.device(0) == torch.device("tpu:0")
    assert torch_tpu.device("tpu") == torch.device("tpu:0")
    assert torch_tpu.device() == torch.device("tpu:0")
    with pytest.raises(ValueError, match="tpu"):
        torch_tpu.device("cpu")


@pytest.mark.parametrize("move", [
    lambda t: t.tpu(),
    lambda t: t.to("tpu"),
    lambda t: t.to(torch.device("tpu:0")),
    lambda t: t.to(device="tpu", dtype=torch.float64),
])
def test_tensor_moves(move):
    x = torch.randn(3, 5)
    d = move(x)
    assert d.device == torch.device("tpu:0") and d.is_tpu
    torch.testing.assert_close(d.cpu(), x.to(d.dtype), rtol=0, atol=0)


def test_factories_on_device():
    assert torch.empty(2, 3, device="tpu").device == torch.device("tpu:0")
    assert torch.equal(torch.full((2,), 7, device="tpu").cpu(), torch.full((2,), 7))
    assert torch.equal(torch.zeros_like(torch.ones(3, device="tpu")).cpu(), torch.zeros(3))
    assert torch.equal(torch.tensor([1, 2], device="tpu").cpu(), torch.tensor([1, 2]))
    assert torch.ones(1, device="tpu").type() == "torch.tpu.FloatTensor"


def test_module_tpu():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    ref = [t.clone() for t in m.state_dict().values()]
    m.tpu()
    for t, r in zip(m.state_dict().values(), ref):
        assert t.device == torch.device("tpu:0")
        assert torch.equal(t.cpu(), r)
    m.to("cpu")
    assert all(t.device.type == "cpu" for t in m.state_dict().values())


def test_scalar_reads():
    d = torch.tensor([1.5, -2.0, 3.0], device="tpu")
    assert d[0].item() == 1.5
    assert d.tolist() == [1.5, -2.0, 3.0]
    assert bool(d[2] > 0)
    with pytest.raises(TypeError, match="cpu"):
        d.numpy()


# ---- torch.accelerator ----------------------------------------------------------------------------
def test_accelerator():
    acc = torch.accelerator
    assert acc.is_available()
    assert acc.current_accelerator() == torch.device("tpu")
    assert acc.device_count() == torch.tpu.device_count() >= 1
    assert acc.current_device_index() == torch.tpu.current_device()
    acc.synchronize()
    if not hasattr(acc, "memory_allocated"):
        pytest.skip("this torch has no torch.accelerator memory API")
    gc.collect()  # device tensors an earlier test left in reference cycles (tracebacks) go now
    before = acc.memory_allocated()
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="tpu")
    assert acc.memory_allocated() >= before + 4 * MiB
    acc.reset_peak_memory_stats()
    assert acc.max_memory_allocated() == acc.memory_allocated()
    del x
    assert acc.memory_allocated() == before
    assert acc.max_memory_allocated() >= before + 4 * MiB


# ---- torch.tpu: devices ------------------------------------------------------------------------
def test_device_queries():
    tpu = torch.tpu
    assert tpu.is_available() and tpu.is_initialized()
    assert tpu.device_count() >= 1
    assert tpu.current_device() == 0
    tpu.set_device(0)
    tpu.set_device("tpu:0")
    tpu.synchronize()
    tpu.synchronize(0)
    props = tpu.get_device_properties(0)
    chip = os.environ.get("TORCH_TPU_CHIP", "v6e")  # v6e unless the environment chose another
    assert props.chip == chip == torch_tpu.config.get("chip")
    assert chip in tpu.get_device_name() and tpu.get_device_name(0) == props.name
    host_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < props.total_memory <= host_bytes
    assert props.total_memory <= props.hbm_bytes
    assert chip in repr(props)


@pytest.mark.parametrize("bad", [99, -1, "tpu:7"])
def test_set_device_invalid_index(bad):
    with pytest.raises(RuntimeError, match=r"Invalid device index tpu:(99|-1|7).*configured"):
        torch.tpu.set_device(bad)
    assert torch.tpu.current_device() == 0
    with pytest.raises(RuntimeError, match="Invalid device index"):
        torch.empty(1, device=f"tpu:{torch.tpu.device_count()}")


def test_set_device_wrong_type():
    with pytest.raises(ValueError, match="expected a tpu device"):
        torch.tpu.set_device("cpu")


# ---- torch.tpu: random number generator state --------------------------------------------------
def test_seeds_and_rng_state():
    tpu = torch.tpu
    tpu.manual_seed(1234)
    assert tpu.initial_seed() == 1234
    tpu.manual_seed_all(99)
    assert all(g.initial_seed() == 99 for g in tpu.default_generators)
    torch.manual_seed(7)  # torch.manual_seed seeds every device too
    assert tpu.initial_seed() == 7
    state = tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    tpu.manual_seed(8)
    assert not torch.equal(tpu.get_rng_state(), state)
    tpu.set_rng_state(state)
    assert torch.equal(tpu.get_rng_state(), state) and tpu.initial_seed() == 7
    assert [s.tolist() for s in tpu.get_rng_state_all()] == [state.tolist()] * tpu.device_count()
    with pytest.raises(RuntimeError, match="16 bytes"):
        tpu.set_rng_state(torch.zeros(3, dtype=torch.uint8))


def test_rng_state_replays_random_draws(no_fallback):
    torch.tpu.manual_seed(3)
    state = torch.tpu.get_rng_state()
    a = torch.rand(64, device="tpu")  # native: drawn from the device generator
    torch.tpu.set_rng_state(state)
    b = torch.rand(64, device="tpu")
    assert torch.equal(a.cpu(), b.cpu())


# ---- torch.tpu: memory ---------------------------------------------------------------------------
def test_memory_accounting():
    tpu = torch.tpu
    torch.tpu.synchronize()
    before = tpu.memory_allocated()
    free_before, total = tpu.mem_get_info()
    assert total == tpu.get_device_properties().total_memory and 0 < free_before <= total
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="tpu")
    assert tpu.memory_allocated() >= before + 4 * MiB
    assert tpu.memory_reserved() >= tpu.memory_allocated()
    tpu.reset_peak_memory_stats()
    assert tpu.max_memory_allocated() == tpu.memory_allocated()
    stats = tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == tpu.memory_allocated()
    assert stats["capacity"] == total
    del x
    assert tpu.memory_allocated() == before
    assert tpu.max_memory_allocated() >= before + 4 * MiB
    tpu.empty_cache()
    assert tpu.memory_reserved() == tpu.memory_allocated() == before
    assert tpu.mem_get_info()[0] == total - tpu.memory_reserved()


def test_memory_peak_tracks_temporaries():
    torch.tpu.synchronize()
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    x = torch.ones(MiB, device="tpu")  # 4 MiB
    y = (x + 1) * 2                     # a 4 MiB temporary and a 4 MiB result
    del y
    torch.tpu.synchronize()
    assert torch.tpu.max_memory_allocated() >= base + 12 * MiB
    del x
    assert torch.tpu.memory_allocated() == base


# ---- torch.tpu: streams, events, autocast ------------------------------------------------------
def test_stream_and_event():
    s = torch.tpu.Stream()
    assert isinstance(s, torch.Stream) and s.device == torch.device("tpu:0")
    assert torch.tpu.current_stream().device_type == torch.tpu.default_stream().device_type
    start = torch.tpu.Event(enable_timing=True)
    end = torch.tpu.Event(enable_timing=True)
    start.record()
    x = torch.ones(512, 512, device="tpu")
    for _ in range(5):
        x = x * 1.5 + 1
    end.record()
    end.synchronize()
    assert end.query() and start.query()
    assert start.elapsed_time(end) >= 0
    with torch.tpu.stream(s):
        y = x + 1
    s.synchronize()
    assert s.query()
    e = s.record_event()
    e.wait()
    e.synchronize()
    assert torch.equal(y.cpu(), x.cpu() + 1)


def test_autocast_defaults_to_bfloat16():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu")
        assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()
    assert torch.tpu.is_bf16_supported()


def test_autocast_policy_like_cpu_bfloat16():
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref_mm, ref_sum = a @ b, (a + 1).sum()
    with torch.autocast("tpu"):
        mm = a.to("tpu") @ b.to("tpu")        # a lower-precision op: runs in bfloat16
        s = (a.to("tpu") + 1).sum()            # no policy: keeps float32
    assert mm.dtype == ref_mm.dtype == torch.bfloat16
    assert s.dtype == ref_sum.dtype == torch.float32
    torch.testing.assert_close(mm.cpu(), ref_mm)


# ---- configuration -----------------------------------------------------------------------------
def test_config_get_set_describe():
    cfg = torch_tpu.config
    assert cfg.get("eager_mode") in ("strict", "debug", "fused")
    text = cfg.describe()
    for name in ("TORCH_TPU_EAGER_MODE", "TORCH_TPU_FALLBACK", "TORCH_TPU_CHIP", "TORCH_TPU_NUM_DEVICES"):
        assert name in text
    names = {o["name"] for o in cfg.options()}
    assert {"fallback", "check_nan", "memory_capacity"} <= names
    old = cfg.get("fallback")
    try:
        cfg.set("fallback", "silent")
        assert cfg.get("fallback") == "silent"
    finally:
        cfg.set("fallback", old)
    cfg.set("check_nan", True)
    assert cfg.get("check_nan") == "1"
    cfg.set("check_nan", False)
    assert cfg.get("check_nan") == "0"


@pytest.mark.parametrize("name,value,match", [
    ("no_such_option", 1, "unknown torch_tpu option 'no_such_option'"),
    ("num_threads", "many", "expects an integer"),
    ("check_nan", "maybe", "expects a boolean"),
    ("fallback", "sometimes", "expects one of 'warn', 'silent', 'error'"),
    ("eager_mode", "fast", "expects one of 'strict', 'debug', 'fused'"),
    ("num_threads", 100000, r"expects an integer in \[0, 1024\]"),
    ("cache_size", 0, r"expects an integer in \[1, "),
    ("chip", "v9", "expects one of"),
    ("num_devices", 3, "TORCH_TPU_NUM_DEVICES"),  # read once at startup: refuse, don't ignore
])
def test_config_rejects_bad_options(name, value, match):
    before = {o["name"]: o["value"] for o in torch_tpu.config.options()}
    with pytest.raises(ValueError, match=match):
        torch_tpu.config.set(name, value)
    assert {o["name"]: o["value"] for o in torch_tpu.config.options()} == before
    if name != "no_such_option":
        return
    with pytest.raises(ValueError, match="unknown torch_tpu option"):
        torch_tpu.config.get(name)


def test_kernels_make_no_second_openmp_team():
    """Note [oneDNN on one thread] (csrc/runtime/host/onednn_threads.h): the device's matmuls and
    convolutions, large enough to be split over its pool, start no OpenMP threads beside PyTorch's
    own team (more OpenMP threads than cores made every PyTorch CPU op in the process slower), and
    leave PyTorch's thread count on the submitting thread as it was."""
    out = run_python("""
        import os, torch, torch_tpu
        torch.set_num_threads(2)
        a = torch.randn(512, 512)
        for _ in range(3):
            a @ a  # PyTorch's OpenMP team, on this thread
        # The device, its pool (a large elementwise op) and autograd's device thread are up.
        v = torch.ones(1 << 22, device="tpu", requires_grad=True)
        (v * 2).sum().backward()
        v.grad.sum().cpu()
        threads = lambda: len(os.listdir("/proc/self/task"))
        before = threads()
        m = torch.randn(8, 256, 256, device="tpu")
        (m @ m).sum().cpu()  # split by batch
        (m[0] @ m[0]).cpu()  # split by rows
        x = torch.randn(4, 32, 32, 32, device="tpu", requires_grad=True)
        w = torch.randn(32, 32, 3, 3, device="tpu", requires_grad=True)
        torch.nn.functional.conv2d(x, w, padding=1).square().sum().backward()
        (w.grad.sum() + x.grad.sum()).cpu()
        (torch.ones(2, 2, device="tpu") @ torch.ones(2, 2, device="tpu")).cpu()  # on this thread
        print(before, threads(), torch.get_num_threads())
    """, TORCH_TPU_BACKEND="host")
    before, after, torch_threads = map(int, out.split())
    assert after == before, f"the device's kernels started {after - before} thread(s)"
    assert torch_threads == 2


def test_eager_mode_switch():
    with torch_tpu.eager_mode("debug"):
        assert torch_tpu.get_eager_mode() == "debug"
    assert torch_tpu.get_eager_mode() == "strict"
    with torch_tpu.eager_mode("fused"):
        assert torch_tpu.get_eager_mode() == "fused"
    assert torch_tpu.get_eager_mode() == "strict"
    with pytest.raises(ValueError, match="unknown eager mode"):
        torch_tpu.set_eager_mode("fast")


# ---- environment options in a fresh process -----------------------------------------------------
def test_environment_options_two_devices():
    out = run_python("""
        import torch, torch_tpu
        tpu = torch.tpu
        print(tpu.device_count(), tpu.get_device_properties(1).chip, tpu.get_device_name(1))
        print(tpu.get_device_properties(0).total_memory, tpu.mem_get_info(1)[1])
        a = torch.arange(6.0, device="tpu:1")
        print(a.device, tpu.memory_allocated(1) > 0, tpu.memory_allocated(0) == 0)
        b = a.to("tpu:0") * 2                      # tpu:1 -> tpu:0
        c = torch.zeros(6, device="tpu:1").copy_(b)  # tpu:0 -> tpu:1
        print(b.device, c.device, b.cpu().tolist(), c.cpu().tolist())
        on0 = tpu.memory_allocated(0)
        a.resize_(1 << 16)                         # grows on its own device, not the current one
        print(a.untyped_storage().device, tpu.memory_allocated(0) == on0, a[:6].cpu().tolist() == list(range(6)))
        e = torch.ones(2, device="tpu:1")
        e.set_()                                   # the new empty storage stays on tpu:1
        torch_tpu.config.set("fallback", "silent")
        f = torch.cumsum(a[:6], 0)                 # through the CPU fallback: back on tpu:1
        print(e.untyped_storage().device, f.device, f.cpu().tolist() == [0.0, 1.0, 3.0, 6.0, 10.0, 15.0])
        tpu.set_device(1)
        print(torch.empty(1, device="tpu").device, (torch.ones(2, device="tpu:1") + 1).device)
        try:
            a[:6] + b
        except RuntimeError as e:
            print("mixed:", "tpu:1" in str(e) and "tpu:0" in str(e))
        try:
            torch.empty(1 << 20, device="tpu:1")
        except torch.OutOfMemoryError as e:
            print("oom:", "tpu:1" in str(e))
    """, TORCH_TPU_NUM_DEVICES=2, TORCH_TPU_CHIP="v5e", TORCH_TPU_MEMORY_CAPACITY=3 * MiB)
    lines = out.splitlines()
    assert lines[0] == "2 v5e TPU v5e (host executor)"
    assert lines[1] == f"{3 * MiB} {3 * MiB}"
    assert lines[2] == "tpu:1 True True"
    assert lines[3] == "tpu:0 tpu:1 [0.0, 2.0, 4.0, 6.0, 8.0, 10.0] [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]"
    assert lines[4] == "tpu:1 True True"
    assert lines[5] == "tpu:1 tpu:1 True"
    assert lines[6] == "tpu:1 tpu:1"
    assert lines[7] == "mixed: True"
    assert lines[8] == "oom: True"


def test_environment_eager_mode_and_fallback():
    out = run_python("""
        import torch, torch_tpu
        print(torch_tpu.get_eager_mode(), torch_tpu.config.get("fallback"))
        try:
            torch.linalg.det(torch.ones(2, 2, device="tpu"))
        except RuntimeError as e:
            print("refused:", "aten::_linalg_det" in str(e))
    """, TORCH_TPU_EAGER_MODE="debug", TORCH_TPU_FALLBACK="error")
    assert out.splitlines() == ["debug error", "refused: True"]


# ---- autoload and import order -----------------------------------------------------------------
def test_import_torch_tpu_before_torch():
    out = run_python("""
        import torch_tpu
        import torch
        print(torch.randn(2).to("tpu").device, torch.tpu.device_count())
    """, TORCH_DEVICE_BACKEND_AUTOLOAD=1)
    assert out.split() == ["tpu:0", "1"]


def test_autoload_entry_point():
    eps = [e for e in importlib.metadata.entry_points(group="torch.backends") if e.name == "torch_tpu"]
    if not eps:
        pytest.skip("torch_tpu is not installed in this environment (no torch.backends entry point); "
                    "`pip install --no-build-isolation .` registers it")
    assert eps[0].value == "torch_tpu:_autoload"
    out = run_python("""
        import torch
        print(torch.randn(2).to("tpu").device)
    """, TORCH_DEVICE_BACKEND_AUTOLOAD=1)
    assert out.strip() == "tpu:0"


# ---- metrics -----------------------------------------------------------------------------------
def test_metrics_counters_and_cache_hits():
    x = torch.randn(7, 3, device="tpu")
    y = torch.randn(7, 3, device="tpu")
    (x * y).cpu()  # compiled (or already cached) before counting
    torch_tpu.metrics.reset()
    c = torch_tpu.metrics.counters()
    assert c and all(v == 0 for v in c.values())
    r = (x * y).cpu()
    c = torch_tpu.metrics.counters()
    for key in ("executions", "compiles", "compile_cache_hits", "compile_cache_misses", "host_syncs",
                "transfers_to_host", "transfer_bytes_to_host"):
        assert key in c, key
    assert c["executions"] == 1 and c["compile_cache_hits"] == 1
    assert c["compile_cache_misses"] == 0 and c["compiles"] == 0
    assert c["host_syncs"] >= 1 and c["transfers_to_host"] == 1
    assert c["transfer_bytes_to_host"] == r.numel() * 4
    torch.ones(11, 13).to("tpu")
    assert torch_tpu.metrics.counters()["transfers_to_device"] == 1
    assert torch_tpu.metrics.counters()["transfer_bytes_to_device"] == 11 * 13 * 4


def test_metrics_miss_on_new_shape():
    a = torch.ones(5, 17, 3, device="tpu")
    torch_tpu.metrics.reset()
    # A shape no other test subtracts: the first run compiles, the second hits the cache.
    (a - 0.25).cpu()
    (a - 0.75).cpu()  # a different Python number is a runtime scalar, not a recompile
    c = torch_tpu.metrics.counters()
    assert c["compile_cache_misses"] == 1 and c["compiles"] == 1
    assert c["compile_cache_hits"] == 1


def test_metrics_report_lists_fallback_ops():
    torch_tpu.metrics.reset()
    old = torch_tpu.config.get("fallback")
    torch_tpu.config.set("fallback", "silent")
    try:
        torch.linalg.det(torch.ones(3, 3, device="tpu"))
    finally:
        torch_tpu.config.set("fallback", old)
    text = torch_tpu.metrics.report()
    assert text.startswith("torch_tpu metrics")
    for word in ("executions", "compiles", "compile cache", "host syncs", "aten::_linalg_det.result"):
        assert word in text
    assert torch_tpu.metrics.fallback_ops() == {"aten::_linalg_det.result": 1}
    torch_tpu.metrics.reset()
    assert torch_tpu.metrics.fallback_ops() == {}
    assert "CPU fallback ops     none" in torch_tpu.metrics.report()
