"""fork() after the device is initialised (Note [Fork]): the child is "in a bad fork" and device
use there raises a clear RuntimeError -- never a hang (the child has none of the parent's queue
or thread-pool threads). Each case runs in a fresh interpreter with a timeout, and waits for its
children with a timeout too, so a regression fails instead of hanging the suite."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_tpu

REPO = Path(__file__).resolve().parents[2]
MESSAGE = "cannot re-initialize the tpu device in a forked subprocess"


def run_script(tmp_path: Path, code: str) -> str:
    # A file, not -c: the 'spawn' case re-imports the main module in its workers.
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=240, cwd=tmp_path)
    assert r.returncode == 0, f"script failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_not_in_bad_fork_in_this_process():
    assert torch.tpu._is_in_bad_fork() is False
    torch.manual_seed(0)  # seeds the tpu generators too (torch asks _is_in_bad_fork first)


def test_os_fork_child_raises_instead_of_hanging(tmp_path):
    out = run_script(tmp_path, """
        import os, time
        import torch, torch_tpu

        x = torch.randn(512, 512, device="tpu")
        print("parent", (x @ x).sum().isfinite().item(), torch.tpu._is_in_bad_fork())
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            lines = [f"bad_fork {torch.tpu._is_in_bad_fork()}"]
            for name, work in [
                ("big_op", lambda: (torch.randn(512, 512, device="tpu") @ x).sum().item()),
                ("small_op", lambda: torch.ones(2, device="tpu") + 1),
                ("inherited_to_cpu", lambda: x.cpu()),
                ("synchronize", lambda: torch.tpu.synchronize()),
            ]:
                try:
                    work()
                    lines.append(f"{name} ran")
                except RuntimeError as e:
                    lines.append(f"{name} {type(e).__name__} {'spawn' in str(e)} {str(e)[:58]}")
            lines.append(f"cpu {torch.ones(3).sum().item()}")  # CPU work is fine in the child
            os.write(w, ("\\n".join(lines) + "\\n").encode())
            os._exit(0)
        os.close(w)
        deadline = time.time() + 60
        while time.time() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            print("child HUNG")
        print(os.read(r, 1 << 16).decode(), end="")
        # The parent's device is untouched by all this.
        print("parent after", (x @ x).sum().isfinite().item(), torch.tpu._is_in_bad_fork())
    """)
    lines = out.splitlines()
    assert lines[0] == "parent True False"
    assert "child HUNG" not in out
    assert lines[1] == "bad_fork True"
    for i, name in enumerate(["big_op", "small_op", "inherited_to_cpu", "synchronize"]):
        assert lines[2 + i] == f"{name} RuntimeError True {MESSAGE}", lines[2 + i]
    assert lines[6] == "cpu 3.0"
    assert lines[7] == "parent after True False"


DATASET = """
    import torch, torch_tpu

    class TpuDataset(torch.utils.data.Dataset):
        # Touches the device in __getitem__ (which runs in the workers): through a tpu tensor made
        # in the parent (inherited by forked workers), or one the worker makes itself.
        def __init__(self, from_parent):
            self.table = torch.arange(8.0, device="tpu") if from_parent else None

        def __len__(self):
            return 8

        def __getitem__(self, i):
            if self.table is None:
                self.table = torch.arange(8.0, device="tpu")
            return (self.table[i] * 2).cpu()
"""


def test_dataloader_fork_workers_raise_instead_of_hanging(tmp_path):
    out = run_script(tmp_path, DATASET + """
    x = torch.randn(256, 256, device="tpu")
    (x @ x).sum().item()
    loader = torch.utils.data.DataLoader(TpuDataset(from_parent=True), batch_size=2, num_workers=2,
                                         multiprocessing_context="fork", timeout=60)
    try:
        print(list(loader))
    except RuntimeError as e:
        print("raised", "DataLoader worker" in str(e), "forked subprocess" in str(e), "spawn" in str(e))
    print("parent", (x @ x).sum().isfinite().item())
    """)
    assert out.splitlines() == ["raised True True True", "parent True"]


def test_dataloader_spawn_workers_use_the_device(tmp_path):
    # The recommended way: spawned workers import torch_tpu afresh and use their own device.
    out = run_script(tmp_path, DATASET + """
    if __name__ == "__main__":
        loader = torch.utils.data.DataLoader(TpuDataset(from_parent=False), batch_size=4, num_workers=1,
                                             multiprocessing_context="spawn", timeout=120)
        print([b.tolist() for b in loader])
    """)
    assert out.splitlines() == ["[[0.0, 2.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0]]"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_lazy_init_raises_in_bad_fork(tmp_path):
    out = run_script(tmp_path, """
        import os, torch, torch_tpu
        pid = os.fork()
        if pid == 0:
            try:
                torch.tpu._lazy_init()
                os._exit(1)
            except RuntimeError as e:
                os._exit(0 if "forked subprocess" in str(e) else 2)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    assert out.strip() == "0"
