"""The compile cache: the persistent tier shared by processes, its damage handling, cache-only
mode, dumps of missed programs and the reason recorded for every compile."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu
from conftest import restored_option

# One training step of a small MLP in the given mode; prints a JSON line of what it saw.
CHILD = textwrap.dedent("""
    import json, sys, time, torch, torch.nn.functional as F, torch_tpu
    mode, width = sys.argv[1], int(sys.argv[2])
    torch_tpu.set_eager_mode(mode)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.GELU(), torch.nn.Linear(width, 4)).to("tpu")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    x = torch.randn(8, 16).to("tpu"); y = torch.randint(0, 4, (8,)).to("tpu")
    losses = []
    t0 = time.perf_counter()
    for _ in range(3):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(loss.item())
    s = torch_tpu.compile_cache.stats()
    print(json.dumps({"losses": losses, "compiles": s["compiles"], "disk_hits": s["disk_hits"],
                      "disk_writes": s["disk_writes"], "rejected": s["disk_rejected"],
                      "seconds": time.perf_counter() - t0}))
""")


def run_child(cache_dir, mode="fused", width=32, wait=True):
    # Every program is persisted here, however fast it compiles (by default only those that take
    # longer than reading them back: option cache_dir_min_compile_us).
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir), TORCH_DEVICE_BACKEND_AUTOLOAD="0",
               TORCH_TPU_CACHE_DIR_MIN_COMPILE_US="0")
    p = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(width)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if not wait:
        return p
    return finish(p)


def finish(p):
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def entries(d):
    return sorted(p for p in d.rglob("*.tpuexe"))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_second_process_compiles_nothing(tmp_path, mode):
    cold = run_child(tmp_path, mode)
    assert cold["compiles"] > 0 and cold["disk_writes"] == cold["compiles"]
    assert len(entries(tmp_path)) == cold["compiles"]
    warm = run_child(tmp_path, mode)
    assert warm["compiles"] == 0, warm
    assert warm["disk_hits"] == cold["compiles"]
    assert warm["losses"] == cold["losses"]  # bit for bit: the same programs


def test_damaged_entries_are_recompiled_and_replaced(tmp_path):
    cold = run_child(tmp_path)
    files = entries(tmp_path)
    original = {f: f.read_bytes() for f in files}
    for i, f in enumerate(files):  # every kind of damage, spread over the entries
        b = original[f]
        if i % 3 == 0:
            f.write_bytes(b[: len(b) // 2])               # truncated (a crash mid-write elsewhere)
        elif i % 3 == 1:
            f.write_bytes(b[:40] + bytes([b[40] ^ 0xFF]) + b[41:])  # a flipped byte
        else:
            f.write_bytes(b"not an entry")                 # another tool's file
    again = run_child(tmp_path)
    assert again["rejected"] == len(files)
    assert again["compiles"] == len(files)
    assert again["losses"] == cold["losses"]
    assert {f: f.read_bytes() for f in entries(tmp_path)} == original  # replaced by good entries
    assert run_child(tmp_path)["compiles"] == 0


def test_two_processes_filling_one_directory_at_once(tmp_path):
    procs = [run_child(tmp_path, "fused", w, wait=False) for w in (32, 48)]
    results = [finish(p) for p in procs]
    assert all(r["compiles"] > 0 for r in results)
    assert not list(tmp_path.rglob("*.tmp-*"))
    # Every entry is whole: both configurations now load everything.
    for w, r in zip((32, 48), results):
        again = run_child(tmp_path, "fused", w)
        assert again["compiles"] == 0 and again["rejected"] == 0
        assert again["losses"] == r["losses"]


def test_cache_only_mode_proves_a_loop_compiles_nothing(mode):
    # A clean in-process cache: the miss below is reported against the nearest cached program, and
    # an earlier test's matmul of another dtype would be as near as this loop's.
    torch_tpu.compile_cache.clear()
    x = torch.randn(64, 32).to("tpu")
    w = torch.randn(32, 32, requires_grad=True, device="tpu")

    def step():
        y = (x @ w).relu().sum()
        y.backward()
        with torch.no_grad():
            w.sub_(w.grad * 1e-3)
            w.grad.zero_()
        return y.item()

    for _ in range(2):
        step()
    with torch_tpu.compile_cache.cache_only():
        for _ in range(20):
            step()
        with pytest.raises(RuntimeError, match="cache-only mode") as e:
            (torch.randn(65, 32).to("tpu") @ w).relu().sum().item()
        assert "internal error" not in str(e.value)
        if mode != "fused":  # (a fused window of other ops is a new program, not a new shape)
            assert "input_shape: input 0 is tensor<65x32xf32>" in str(e.value)
    step()  # normal again


def test_dump_misses_writes_the_missed_programs(tmp_path):
    torch_tpu.compile_cache.clear()
    with torch_tpu.compile_cache.dump_misses(str(tmp_path)):
        (torch.ones(7, device="tpu") * 3 + 1).cpu()
    files = list(tmp_path.glob("*.mlir"))
    assert files and all("func.func" in f.read_text() for f in files)


def test_every_compile_says_why():
    torch_tpu.compile_cache.clear()
    torch.ones(5, device="tpu").exp().cpu()
    torch.ones(6, device="tpu").exp().cpu()
    reasons = torch_tpu.compile_cache.recompiles()
    assert any(r == "input_shape" and "tensor<6xf32>, was tensor<5xf32>" in what for _, r, what in reasons), reasons
    s = torch_tpu.compile_cache.stats()
    assert s["reasons"].get("input_shape", 0) >= 1
    assert s["entries"] and {"name", "ops", "hits", "compile_ms", "from_disk"} <= set(s["entries"][0])
    assert "compiles by reason" in torch_tpu.metrics.report()
