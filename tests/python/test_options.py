"""TORCH_TPU_* environment values: checked at import against the option registry's declaration
(the same one config.set uses), never silently replaced by the default. Each case runs in a fresh
interpreter, since the environment is read once per process."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import torch_tpu

REPO = Path(__file__).resolve().parents[2]


def run(code: str, autoload: bool, **env_overrides) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "1" if autoload else "0"
    env.update({k: str(v) for k, v in env_overrides.items()})
    # A timeout: an absurd value must not hang the import either.
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


BAD = [
    # variable, value, what the error must say is accepted
    ("TORCH_TPU_MEMORY_CAPACITY", "2e9", "expects an integer in [0, 281474976710656]"),
    ("TORCH_TPU_MEMORY_CAPACITY", "-4096", "expects an integer in [0, 281474976710656]"),
    ("TORCH_TPU_EAGER_MODE", "debg", "expects one of 'strict', 'debug', 'fused'"),
    ("TORCH_TPU_NUM_DEVICES", "100000", "expects an integer in [1, 64]"),
    ("TORCH_TPU_NUM_THREADS", "100000", "expects an integer in [0, 1024]"),
    ("TORCH_TPU_CHECK_NAN", "sometimes", "expects a boolean"),
    ("TORCH_TPU_CACHE_SIZE", "4k", "expects an integer in [1, 16777216]"),
]


@pytest.mark.parametrize("var,value,accepted", BAD)
def test_explicit_import_raises_naming_variable_value_and_accepted(var, value, accepted):
    r = run("""
        import torch_tpu
        print("imported")
    """, autoload=False, **{var: value})
    assert r.returncode != 0 and "imported" not in r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: "), r.stderr
    option = var[len("TORCH_TPU_"):].lower()
    for part in (f"{var}='{value}'", f"option '{option}'", accepted, f"got '{value}'"):
        assert part in last, (part, last)


def test_autoload_warns_and_torch_stays_usable_then_explicit_import_raises():
    # `import torch` autoloads torch_tpu: that must never raise (it would break `import torch`),
    # so it warns and registers nothing; the explicit `import torch_tpu` then raises.
    r = run("""
        import torch
        print("torch ok", torch.ones(3).sum().item(), hasattr(torch, "tpu"))
        try:
            import torch_tpu
        except ValueError as e:
            print("raised:", e)
        try:
            import torch_tpu
        except ValueError as e:
            print("raised again:", "TORCH_TPU_EAGER_MODE='debg'" in str(e))
    """, autoload=True, TORCH_TPU_EAGER_MODE="debg")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "torch ok 3.0 False"
    assert lines[1].startswith("raised: ") and "TORCH_TPU_EAGER_MODE='debg'" in lines[1]
    assert "expects one of 'strict', 'debug', 'fused'" in lines[1]
    assert lines[2] == "raised again: True"
    assert "RuntimeWarning" in r.stderr and "TORCH_TPU_EAGER_MODE='debg'" in r.stderr


def test_absurd_values_with_autoload_leave_import_torch_working():
    r = run("""
        import torch
        print(torch.arange(4).sum().item())
    """, autoload=True, TORCH_TPU_NUM_DEVICES=100000, TORCH_TPU_NUM_THREADS=100000)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["6"]
    assert "TORCH_TPU_NUM_DEVICES='100000'" in r.stderr and "TORCH_TPU_NUM_THREADS='100000'" in r.stderr


def test_every_bad_variable_is_named_at_once():
    r = run("import torch_tpu", autoload=False, TORCH_TPU_CHIP="v9", TORCH_TPU_FALLBACK="loud")
    assert r.returncode != 0
    assert "TORCH_TPU_CHIP='v9'" in r.stderr and "TORCH_TPU_FALLBACK='loud'" in r.stderr


def test_good_values_apply_and_empty_means_unset():
    r = run("""
        import torch, torch_tpu
        c = torch_tpu.config
        print(c.get("eager_mode"), c.get("check_nan"), c.get("cache_size"), c.get("chip"),
              torch.tpu.get_device_properties(0).total_memory)
        print((torch.ones(2, device="tpu") * 2).cpu().tolist())
    """, autoload=True, TORCH_TPU_EAGER_MODE="Fused", TORCH_TPU_CHECK_NAN="yes",
        TORCH_TPU_CACHE_SIZE="64", TORCH_TPU_CHIP="", TORCH_TPU_MEMORY_CAPACITY=1 << 24)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"fused 1 64 v6e {1 << 24}", "[2.0, 2.0]"]


@pytest.mark.parametrize("var,value,accepted", BAD)
def test_config_set_rejects_what_the_environment_rejects(var, value, accepted):
    name = var[len("TORCH_TPU_"):].lower()
    before = torch_tpu.config.get(name)
    with pytest.raises(ValueError) as info:
        torch_tpu.config.set(name, value)
    assert accepted in str(info.value) and f"got '{value}'" in str(info.value)
    assert torch_tpu.config.get(name) == before


def test_options_describe_what_they_accept():
    by_name = {o["name"]: o for o in torch_tpu.config.options()}
    assert by_name["num_devices"]["range"] == (1, 64)
    assert by_name["eager_mode"]["choices"] == ["strict", "debug", "fused"]
    assert torch_tpu.config.choices("fallback") == ("warn", "silent", "error")
    assert by_name["check_nan"]["accepted"].startswith("a boolean")
    assert "an integer in [1, 64]" in torch_tpu.config.describe()
