"""torchtitan's own trainer (PyPI torchtitan 0.3.0, installed with --no-deps into a target
directory: README, "torchtitan") trains its debug models under torchrun on 2 ranks, with FSDP and
with tensor parallelism, on tpu (c10d backend "tpu") and on the CPU with Gloo, through
examples/torchtitan_tpu.py; the per-step losses must agree.

Both runs start from one seed checkpoint (torchtitan's --checkpoint.create_seed_checkpoint, made
once on the CPU): the tpu generator draws other numbers than the CPU's, so weights initialized on
each device would differ. Parameters stay float32 (--training.mixed_precision_param float32), so
the runs differ only by float32 rounding (seen: 1e-7
relative after 10 steps); rtol 1e-5 is asserted. A wrong collective, shard or gradient changes
the loss by 1e-3 or more from the second step on. The tokenizer and dataset are the local
stand-ins examples/torchtitan_assets.py writes.

Skipped when torchtitan is not installed in TORCH_TPU_TITAN_DIR (default
~/.cache/torch_tpu/titan).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
LAUNCHER = os.path.join(REPO, "examples", "torchtitan_tpu.py")
TITAN = os.environ.get("TORCH_TPU_TITAN_DIR", os.path.expanduser("~/.cache/torch_tpu/titan"))

pytestmark = pytest.mark.skipif(
    not os.path.isdir(os.path.join(TITAN, "torchtitan")),
    reason=f"torchtitan is not installed in {TITAN} (set TORCH_TPU_TITAN_DIR; README: torchtitan)")

STEPS, SEQ_LEN, BATCH = 3, 64, 2
RTOL = 1e-5
TIMEOUT = 300
# Ops torchtitan's models may run on the CPU fallback on tpu: none (rope's position bound check,
# _assert_async.msg, is a device check).
ALLOWED_FALLBACKS: set[str] = set()

sys.path.insert(0, os.path.join(REPO, "examples"))
import torchtitan_assets  # noqa: E402


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([TITAN, REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1")
    return env


def _torchtitan(tmp, nproc, device, module, args, loss_file=None):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", LAUNCHER,
           "--device", device, "--module", module, "--config", f"{module}_debugmodel",
           "--hf_assets_path", os.path.join(tmp, "assets", "tokenizer"),
           "--dataloader.dataset_path", os.path.join(tmp, "assets", "c4_test"),
           "--dump_folder", os.path.join(tmp, "dump"),
           # torch 2.13's fully_shard cannot take torchtitan's default "spmd_types" parameters.
           "--parallelism.spmd_backend", "partial_dtensor",
           "--debug.seed", "42", *args]
    if loss_file:
        cmd += ["--loss-file", loss_file]
    p = subprocess.run(cmd, cwd=tmp, env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode != 0:
        errors = [ln for ln in p.stdout.splitlines() + p.stderr.splitlines() if "Error" in ln and "lspci" not in ln]
        raise AssertionError(f"{device} {module} {' '.join(args)} failed (rc {p.returncode}):\n" +
                             "\n".join(errors[-5:]) + "\n--- output tail ---\n" + (p.stdout + p.stderr)[-4000:])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("torchtitan"))
    torchtitan_assets.make_assets(os.path.join(tmp, "assets"))
    return tmp


def _seed_checkpoint(workdir, module):
    path = os.path.join(workdir, f"seed_{module}")
    if not os.path.isdir(os.path.join(path, "step-0")):
        _torchtitan(workdir, 1, "cpu", module, ["--parallelism.data_parallel_shard_degree", "1", "--checkpoint.enable",
                                                "--checkpoint.create_seed_checkpoint", "--checkpoint.folder", path])
    return os.path.join(path, "step-0")


def _run(workdir, device, module, name, parallel):
    loss_file = os.path.join(workdir, f"{name}_{device}.jsonl")
    if os.path.exists(loss_file):
        os.remove(loss_file)
    args = [*parallel, "--training.seq_len", str(SEQ_LEN), "--training.local_batch_size", str(BATCH),
            "--training.steps", str(STEPS), "--training.mixed_precision_param", "float32",
            "--checkpoint.enable", "--checkpoint.load_only", "--checkpoint.folder",
            os.path.join(workdir, f"ckpt_{name}_{device}"),
            "--checkpoint.initial_load_path", _seed_checkpoint(workdir, module)]
    _torchtitan(workdir, 2, device, module, args, loss_file)
    with open(loss_file) as f:
        rows = [json.loads(ln) for ln in f]
    losses = [r["loss"] for r in rows if "step" in r]
    fallbacks = next((r["fallback_ops"] for r in rows if "fallback_ops" in r), {})
    return losses, fallbacks


FSDP = ["--parallelism.data_parallel_shard_degree", "2"]
TP = ["--parallelism.data_parallel_shard_degree", "1", "--parallelism.tensor_parallel_degree", "2"]

# torchtitan's own optimizer (fused AdamW: FSDP2's gradients reach it as views of one
# reduce-scatter buffer) and Llama 3's complex rotary cache (a gather of complex64) included.
CASES = [
    pytest.param("qwen3", "fsdp", FSDP, id="qwen3-fsdp2"),
    pytest.param("qwen3", "tp", TP, id="qwen3-tp2"),
    pytest.param("llama3", "fsdp", FSDP, id="llama3-fsdp2"),
    pytest.param("llama3", "tp", TP, id="llama3-tp2"),
]


@pytest.mark.parametrize("module,name,parallel", CASES)
def test_torchtitan_on_tpu_matches_cpu_gloo(workdir, module, name, parallel):
    tpu, fallbacks = _run(workdir, "tpu", module, name, parallel)
    cpu, _ = _run(workdir, "cpu", module, name, parallel)
    assert len(tpu) == len(cpu) == STEPS, (tpu, cpu)
    assert cpu[-1] < cpu[0], cpu  # it trains
    torch.testing.assert_close(torch.tensor(tpu, dtype=torch.float64), torch.tensor(cpu, dtype=torch.float64),
                               rtol=RTOL, atol=0, msg=lambda m: f"tpu losses {tpu} vs cpu/gloo {cpu}: {m}")
    assert set(fallbacks) <= ALLOWED_FALLBACKS, fallbacks
