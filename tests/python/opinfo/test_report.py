"""report.py's results file: never a fixed name in /tmp, where a planted symlink would redirect a
root process's writes; by default build/opinfo/results.jsonl in this tree."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from . import report

OLD_PATH = "/tmp/opinfo_results.jsonl"  # the fixed default it once had
REPORT = [sys.executable, "-m", "tests.python.opinfo.report", "--ops", "abs", "--dtypes", "float32"]


def test_default_results_file_is_in_the_tree():
    assert report.DEFAULT_JSONL == os.path.join(report.ROOT, "build", "opinfo", "results.jsonl")


def _private_tmp_available() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /tmp"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def _run_report_with_symlink_planted(victim: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    run = dict(cwd=report.ROOT, env=env, capture_output=True, text=True, timeout=600)
    if not os.path.lexists(OLD_PATH):
        os.symlink(victim, OLD_PATH)
        try:
            return subprocess.run(REPORT, **run)
        finally:
            os.unlink(OLD_PATH)
    # The name is taken (someone's results): plant ours in a private /tmp instead.
    if not _private_tmp_available():
        pytest.skip(f"{OLD_PATH} exists and no private mount namespace is available")
    if os.path.realpath(report.ROOT).startswith("/tmp/"):
        pytest.skip(f"{OLD_PATH} exists and the checkout is under /tmp, which a private /tmp would hide")
    plant = f'mount -t tmpfs tmpfs /tmp && ln -s "{victim}" {OLD_PATH} && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", plant, "sh", *REPORT], **run)


def test_symlink_planted_at_the_old_path_is_not_followed():
    # The victim lives in the tree's build/ (outside /tmp, which the private mount would hide).
    victim_dir = os.path.join(report.ROOT, "build", "opinfo-symlink-test")
    os.makedirs(victim_dir, exist_ok=True)
    victim = os.path.join(victim_dir, "victim")
    with open(victim, "w"):
        pass
    try:
        r = _run_report_with_symlink_planted(victim)
        assert r.returncode == 0, r.stderr
        assert os.path.getsize(victim) == 0, "the report wrote through the planted symlink"
    finally:
        shutil.rmtree(victim_dir, ignore_errors=True)
    with open(report.DEFAULT_JSONL) as f:
        records = [json.loads(line) for line in f if line.strip()]
    assert any(rec.get("op") == "abs" and rec.get("dtype") == "float32" for rec in records)


def _cpu_pjrt_plugin_installed() -> bool:
    from torch_tpu import _backend

    return any(not p.endswith("libtpu.so") for p in _backend.plugin_candidates())


@pytest.mark.skipif(not _cpu_pjrt_plugin_installed(), reason="no PJRT CPU plugin installed (scripts/setup.sh installs one)")
def test_pjrt_column_comes_from_a_walk_on_the_pjrt_backend(tmp_path):
    jsonl, md = tmp_path / "r.jsonl", tmp_path / "ops.md"
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    env.pop("TORCH_TPU_BACKEND", None)
    p = subprocess.run([sys.executable, "-m", "tests.python.opinfo.report", "--ops", "abs,softmax", "--dtypes",
                        "float32", "--backends", "host,pjrt", "--jsonl", str(jsonl), "--out", str(md)],
                       cwd=report.ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    pjrt = [json.loads(line) for line in open(tmp_path / "r-pjrt.jsonl")]
    assert {(r["op"], r["dtype"], r["status"]) for r in pjrt if "status" in r} == {
        ("abs", "float32", "native"), ("softmax", "float32", "native")}
    text = md.read_text()
    assert "| op | float32 | grad float32 | error inputs | pjrt float32 | notes |" in text
    assert "| `softmax` | native | native | — | native |" in text
    assert "| float32 on pjrt | 2 | 0 | 0 | 0 | 0 |" in text
