"""torchrun, unchanged, on tpu: one node of 2 processes (shared-memory transport), and 2 nodes of
1 process each simulated on this machine (two torchrun agents on loopback, each its own
TORCH_TPU_DIST_HOST_ID: the Gloo transport). torchrun_worker.py is the user's script: the process
group from torchrun's environment with no backend named, an all-reduce, and 3 DDP steps, which
must follow one CPU process on the whole batch (float32 rounding: rtol 1e-5; a missing gradient
average changes the second loss by ~1e-1)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_worker.py")
WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(out_dir, *args, env=None):
    cmd = [sys.executable, "-m", "torch.distributed.run", *args, WORKER]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "TPU_TORCHRUN_OUT": str(out_dir),
                                 **(env or {})})


def _results(procs, out_dir):
    for p in procs:
        try:
            text, _ = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("torchrun did not finish within 240 s")
        assert p.returncode == 0, text[-4000:]
    out = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name)) as f:
            out.append(json.load(f))
    return sorted(out, key=lambda r: r["rank"])


def _reference():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(3):
        data = torch.randn(4 * WORLD, 8, generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), data.sum(1, keepdim=True))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model[0].weight.detach().flatten()


def _check(results, transport):
    assert [r["rank"] for r in results] == list(range(WORLD)), results
    losses, weight = _reference()
    for r in results:
        assert r["world"] == WORLD and r["config"] == "tpu:tpu" and r["transport"] == transport, r
        assert r["all_reduce"] == [float(sum(range(1, WORLD + 1)))] * 4, r["all_reduce"]
        torch.testing.assert_close(torch.tensor(r["losses"]), torch.tensor(losses), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(torch.tensor(r["weight"]), weight, rtol=1e-5, atol=1e-6)


def test_one_node_two_processes(tmp_path):
    p = _torchrun(tmp_path, "--standalone", f"--nproc_per_node={WORLD}")
    _check(_results([p], tmp_path), "shm")


def test_two_nodes_simulated_on_one_machine(tmp_path):
    port = _free_port()
    procs = [_torchrun(tmp_path, f"--nnodes={WORLD}", f"--node_rank={n}", "--nproc_per_node=1",
                       "--master_addr=127.0.0.1", f"--master_port={port}", env={"TORCH_TPU_DIST_HOST_ID": f"node{n}"})
             for n in range(WORLD)]
    _check(_results(procs, tmp_path), "gloo")
