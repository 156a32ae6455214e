"""A benchmark's second process on another backend, driven call by call from the first.

The backend is chosen once per process (TORCH_TPU_BACKEND), so a benchmark that puts the pjrt
backend's figures beside the host executor's and PyTorch CPU's runs the pjrt side in a peer
process. The parent calls functions of a benchmark module in the peer one at a time
(`Peer.call("bench_models", "remote_step", ...)`) and waits for each result, so the two
processes never run at once: the configurations still take turns step by step, in one run, and a
load from other processes falls on all of them alike. The peer has the same thread count as the
parent. Its prints go to stderr; stdout carries one JSON line per call.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys


class PeerError(RuntimeError):
    pass


class Peer:
    def __init__(self, backend: str, threads: int):
        self.backend = backend
        env = dict(os.environ, TORCH_TPU_BACKEND=backend, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(threads)], env=env,
                                     cwd=os.path.dirname(os.path.abspath(__file__)), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def call(self, module: str, fn: str, *args):
        """`module.fn(*args)` in the peer (arguments and result: JSON values)."""
        try:
            self.proc.stdin.write(json.dumps([module, fn, list(args)]) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: readline says how
        line = self.proc.stdout.readline()
        if not line:
            raise PeerError(f"the {self.backend} peer process exited (status {self.proc.wait()}); "
                            f"its stderr above says why")
        out = json.loads(line)
        if "error" in out:
            raise PeerError(f"on the {self.backend} backend: {out['error']}")
        return out["result"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def serve(threads: int) -> None:
    channel, sys.stdout = sys.stdout, sys.stderr  # the module's prints must not reach the channel
    import torch

    import torch_tpu

    torch.set_num_threads(threads)
    torch_tpu._C._set_num_threads(threads)
    for line in sys.stdin:
        module, fn, args = json.loads(line)
        try:
            out = {"result": getattr(importlib.import_module(module), fn)(*args)}
        except Exception as e:  # reported to the parent, which raises it there
            out = {"error": f"{type(e).__name__}: {e}"}
        channel.write(json.dumps(out) + "\n")
        channel.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
