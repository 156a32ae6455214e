"""torch_tpu.__version__ and the environment report of ``python -m torch_tpu``."""
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import torch

import torch_tpu
from torch_tpu import _env, _version
from conftest import restored_option

ROOT = Path(__file__).resolve().parents[2]


def run_module(*args, env=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    out = subprocess.run([sys.executable, "-m", "torch_tpu", *args], capture_output=True, text=True, timeout=300,
                         env=full_env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_version():
    declared = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert torch_tpu.__version__ == metadata.version("torchtpu-backend") == declared
    assert _version._from_source_tree() == declared  # the fallback for a tree that was never installed


def test_report_text():
    text = run_module()
    assert f"torch_tpu          {torch_tpu.__version__}" in text
    assert f"torch              {torch.__version__}" in text
    assert "backend            host" in text
    assert f"devices            {torch.tpu.device_count()}" in text
    for o in torch_tpu.config.options():
        assert o["env"] in text
    assert "compile cache dir" in text and "TORCH_TPU_CACHE_DIR" in text
    assert "host executor SIMD" in text and "oneDNN" in text and "threads" in text


def test_report_json_and_option_sources():
    info = json.loads(run_module("--json", env={"TORCH_TPU_CHIP": "v5e", "TORCH_TPU_NUM_DEVICES": "2"}))
    assert info["torch_tpu"]["version"] == torch_tpu.__version__ and info["torch"] == torch.__version__
    assert info["device_count"] == 2 and [d["chip"] for d in info["devices"]] == ["v5e", "v5e"]
    sources = {o["name"]: o["source"] for o in info["options"]}
    assert sources["chip"] == "env" and sources["num_devices"] == "env" and sources["fallback"] == "default"
    assert info["compile_cache_dir"]["option"] == "TORCH_TPU_CACHE_DIR"
    assert info["threads"]["host_executor"] >= 1 and info["cpu"]["host_simd_target"]


def test_option_set_in_code_is_reported():
    with restored_option("cache_size") as set_cache_size:
        set_cache_size(123)
        options = {o["name"]: o for o in _env.collect()["options"]}
        assert options["cache_size"]["value"] == "123"
        assert options["cache_size"]["source"].startswith("set in code") or "TORCH_TPU_CACHE_SIZE" in os.environ
