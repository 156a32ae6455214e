"""Runs a function on N ranks, each its own spawned process in a tpu process group (a file store
on loopback), and returns what each rank returned -- or its exception, with its traceback.

    results = run_ranks(worker, world=2, args=(...), timeout=60)

Every rank runs `worker(rank, world, *args)` after ``init_process_group("tpu", ...)``; results
must pickle (CPU tensors, numbers, strings); they travel as torch.save bytes, so a rank may exit
before the parent reads them (tensors through torch.multiprocessing's queue would share memory
with the rank that sent them). `env` is set for the children (TORCH_TPU_* options).
A rank that does not report within `timeout` seconds is killed and reported as hung: no test can
hang CI.
"""
from __future__ import annotations

import contextlib
import datetime
import io
import os
import queue as queue_mod
import tempfile
import time
import traceback

import torch
import torch.multiprocessing as mp


class RankFailure(AssertionError):
    pass


@contextlib.contextmanager
def _environ(env):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _child(fn, rank, world, init_file, pg_timeout, backend, results, args):
    try:
        os.environ["TPU_TEST_STORE"] = init_file  # for workers that initialize the group themselves
        import torch.distributed as dist

        import torch_tpu  # noqa: F401  (registers the device and the c10d backend)

        if backend:
            dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=pg_timeout))
        out = fn(rank, world, *args)
        buf = io.BytesIO()
        torch.save(out, buf)
        results.put((rank, "ok", buf.getvalue()))
        if backend:
            dist.destroy_process_group()
    except BaseException as e:  # reported to the parent, which raises it
        results.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def run_ranks(fn, world: int, args=(), timeout: float = 120, env=None, pg_timeout: float = 60,
              backend: str | None = "tpu", allow_errors: bool = False):
    """fn(rank, world, *args) on `world` ranks; returns the list of their results (rank order).
    With allow_errors, a rank that raised gives ("error", message) instead of failing the call,
    and a rank that died or hung gives ("missing", None)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp, _environ(env or {}):
        init_file = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_child, args=(fn, r, world, init_file, pg_timeout, backend, results, args),
                             daemon=True) for r in range(world)]
        for p in procs:
            p.start()
        got = {}
        deadline = time.monotonic() + timeout
        while len(got) < world and time.monotonic() < deadline:
            try:
                rank, status, payload = results.get(timeout=0.5)
                got[rank] = (status, payload)
            except queue_mod.Empty:
                if all(not p.is_alive() for p in procs) and results.empty():
                    break
        for p in procs:
            p.join(timeout=max(0.1, min(10, deadline - time.monotonic())))
            if p.is_alive():
                p.kill()
                p.join()
    out = []
    errors = []
    for r in range(world):
        status, payload = got.get(r, ("missing", None))
        if status == "ok":
            payload = torch.load(io.BytesIO(payload), weights_only=False)
            out.append(payload if not allow_errors else ("ok", payload))
        elif allow_errors:
            out.append((status, payload))
        else:
            errors.append(f"rank {r}: " + (payload if status == "error" else
                                          f"did not report within {timeout} s (hung or died)"))
    if errors:
        raise RankFailure("\n".join(errors))
    return out
