"""Choosing the pjrt backend's plugin from Python (README "PJRT backend").

libtpu on a machine without a TPU: selecting it (TORCH_TPU_PJRT_PLUGIN) must fail at the first
device use with a Python error that says there is no TPU, within 5 s, never blocking on the cloud
metadata server (the backend sets TPU_SKIP_MDS_QUERY=1 itself). The C++ side is tested in
csrc/runtime/pjrt/libtpu_test.cc; this checks what a user sees. Each case runs in a child process:
the backend is chosen once per process.
"""
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_tpu import _backend

ROOT = Path(__file__).resolve().parents[2]

# The child times the first device use only (importing torch is slow on a loaded machine).
CHILD = r"""
import json, time
import torch, torch_tpu
t0 = time.monotonic()
try:
    torch.zeros(1, device="tpu").cpu()
    props = torch.tpu.get_device_properties()
    out = {"ok": True, "backend": props.backend, "name": props.name}
except Exception as e:
    out = {"ok": False, "type": type(e).__name__, "message": str(e)}
out["seconds"] = time.monotonic() - t0
torch.zeros(2).add_(1)  # the process is still usable after the error
print(json.dumps(out))
"""


def _tpu_present():
    for path in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            if Path(path).read_text().strip().lower() == "0x1ae0":
                return True
        except OSError:
            pass
    return False


def _libtpu():
    return next((p for p in _backend.plugin_candidates() if os.path.basename(p) == "libtpu.so"), None)


def _run_child(env):
    full = {k: v for k, v in os.environ.items() if k not in ("TPU_SKIP_MDS_QUERY", "TPU_LOG_DIR")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=240,
                         env=full, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_libtpu_without_a_tpu_fails_fast_and_says_so():
    libtpu = _libtpu()
    if libtpu is None:
        pytest.skip("libtpu is not installed (scripts/setup.sh installs it on Python >= 3.11)")
    if _tpu_present():
        pytest.skip("this machine has a TPU")
    r = _run_child({"TORCH_TPU_BACKEND": "pjrt", "TORCH_TPU_PJRT_PLUGIN": libtpu})
    assert not r["ok"], "libtpu started on a machine without a TPU?"
    assert r["type"] == "RuntimeError", r
    assert "no TPU found on this machine" in r["message"], r["message"]
    assert r["seconds"] < 5.0, f"selecting libtpu took {r['seconds']:.2f} s: {r['message']}"


def test_candidates_skip_libtpu_without_a_tpu():
    """Without TORCH_TPU_PJRT_PLUGIN the backend passes over an installed libtpu where there is no
    TPU and runs on XLA's CPU plugin."""
    cpu = [p for p in _backend.plugin_candidates() if os.path.basename(p) != "libtpu.so"]
    if not cpu:
        pytest.skip("no XLA CPU PJRT plugin installed (scripts/setup.sh installs lammps-jax-pjrt-cpu)")
    if _tpu_present():
        pytest.skip("this machine has a TPU")
    r = _run_child({"TORCH_TPU_BACKEND": "pjrt", "TORCH_TPU_PJRT_PLUGIN": ""})
    assert r["ok"], r
    assert r["backend"] == "pjrt" and "cpu" in r["name"].lower(), r
