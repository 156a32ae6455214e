"""MPMD safety: ranks whose collectives diverge, a rank that never arrives, and a rank that is
killed -- every surviving rank ends with a clear error, well within the process group's timeout,
and no rank hangs (the harness kills any rank that has not reported in `timeout`)."""
from __future__ import annotations

import time

import pytest
import torch

from harness import run_ranks

PG_TIMEOUT = 30  # seconds; the errors below must come much sooner (or, for a lost rank, at it)


def _sync_error(fn):
    """Runs fn (collectives and a read of their result); returns (message, seconds) of the error it
    raised at the sync point."""
    start = time.monotonic()
    try:
        fn()
    except RuntimeError as e:
        return str(e), time.monotonic() - start
    return None, time.monotonic() - start


KINDS = ("op", "shape", "dtype")


def _diverge(rank, world):
    import torch.distributed as dist

    out = {}
    for kind in KINDS:  # each on a new group: a diverged group stays failed
        g = dist.new_group()
        t = torch.ones(4, device="tpu")
        dist.all_reduce(t, group=g)  # one agreed collective first: the next one is #2
        t.cpu()

        def body():
            if kind == "op":
                if rank == 0:
                    dist.all_reduce(t, group=g)
                else:
                    dist.broadcast(t, src=0, group=g)
            elif kind == "shape":
                x = torch.ones(4 + rank, device="tpu")
                dist.all_reduce(x, group=g)
                x.cpu()
            elif kind == "dtype":
                x = torch.ones(4, dtype=torch.float32 if rank == 0 else torch.bfloat16, device="tpu")
                dist.all_reduce(x, group=g)
                x.cpu()
            t.cpu()

        msg, sec = _sync_error(body)
        # The group is unusable afterwards, and says why at once; the device still works.
        later, later_sec = _sync_error(lambda: (dist.all_reduce(t, group=g), t.cpu()))
        y = (torch.arange(3, device="tpu") * 2).cpu().tolist()
        out[kind] = msg, sec, later, later_sec, y
    # The default group was not involved: it still works.
    t = torch.ones(2, device="tpu")
    dist.all_reduce(t)
    out["world"] = t.cpu().tolist()
    return out


def test_divergent_collectives_raise_on_every_rank():
    out = run_ranks(_diverge, 2, pg_timeout=PG_TIMEOUT, timeout=120)
    for rank in range(2):
        assert out[rank]["world"] == [2.0, 2.0]
        for kind in KINDS:
            msg, sec, later, later_sec, y = out[rank][kind]
            assert msg is not None, f"rank {rank} raised nothing ({kind})"
            assert "issued different collectives" in msg, msg
            assert sec < 10, (sec, msg)  # at once, not at the timeout
            if kind == "op":
                assert "rank 0: collective #2, all_reduce(float32[4], SUM) at " in msg, msg
                assert "rank 1: collective #2, broadcast(float32[4], src=0) at " in msg, msg
                assert "test_failures.py:" in msg, msg  # the user's lines
            elif kind == "shape":
                assert "all_reduce(float32[4], SUM)" in msg and "all_reduce(float32[5], SUM)" in msg, msg
            else:
                assert "all_reduce(float32[4], SUM)" in msg and "all_reduce(bfloat16[4], SUM)" in msg, msg
            assert later is not None and "issued different collectives" in later and later_sec < 5, later
            assert y == [0, 2, 4]


LOST_TIMEOUT = 5  # the process group's timeout in the next test


def _lost(rank, world):
    import torch.distributed as dist

    t = torch.ones(4, device="tpu")
    if rank == 1:
        time.sleep(LOST_TIMEOUT + 3)  # never issues the collective; stays alive past the timeout
        return None
    return _sync_error(lambda: (dist.all_reduce(t, async_op=True).wait(), t.cpu()))


def test_rank_that_never_arrives_times_out():
    out = run_ranks(_lost, 2, pg_timeout=LOST_TIMEOUT, timeout=120)
    msg, sec = out[0]
    assert msg is not None and f"timed out after {LOST_TIMEOUT} s waiting for rank 1" in msg, msg
    assert "it has issued no collective on this process group yet" in msg, msg
    assert LOST_TIMEOUT - 1 < sec < LOST_TIMEOUT + 10, sec


def _lost_after_a_new_timeout(rank, world):
    """The group starts with a long timeout; torch.distributed's _set_pg_timeout (torchtitan's
    set_timeout) shortens it, and the lost rank is reported after the new one."""
    import datetime

    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _set_pg_timeout

    t = torch.ones(4, device="tpu")
    dist.all_reduce(t)
    t.cpu()
    _set_pg_timeout(datetime.timedelta(seconds=LOST_TIMEOUT))
    backend = dist.group.WORLD._get_backend(torch.device("tpu"))
    if rank == 1:
        time.sleep(LOST_TIMEOUT + 3)
        return backend.timeout, None
    return backend.timeout, _sync_error(lambda: (dist.all_reduce(t, async_op=True).wait(), t.cpu()))


def test_a_timeout_set_after_init_applies():
    out = run_ranks(_lost_after_a_new_timeout, 2, pg_timeout=120, timeout=120)
    assert out[1][0] == out[0][0] == LOST_TIMEOUT, out
    msg, sec = out[0][1]
    assert msg is not None and f"timed out after {LOST_TIMEOUT} s waiting for rank 1" in msg, msg
    assert LOST_TIMEOUT - 1 < sec < LOST_TIMEOUT + 10, sec


def _killed(rank, world):
    import os
    import signal

    import torch.distributed as dist

    t = torch.ones(4, device="tpu")
    dist.all_reduce(t)
    t.cpu()
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return _sync_error(lambda: (dist.all_reduce(t), t.cpu()))


@pytest.mark.parametrize("transport,world", [("shm", 3), ("gloo", 2)])
def test_killed_rank_makes_the_others_raise(transport, world):
    out = run_ranks(_killed, world, pg_timeout=PG_TIMEOUT, timeout=120, allow_errors=True,
                    env={"TORCH_TPU_DIST_TRANSPORT": transport})
    assert out[world - 1] == ("missing", None)
    for rank in range(world - 1):
        status, (msg, sec) = out[rank]
        assert status == "ok" and msg is not None, out[rank]
        if transport == "shm":
            assert f"rank {world - 1} (pid " in msg and "exited or was killed" in msg, msg
            assert "collective #1, all_reduce(float32[4], SUM)" in msg, msg  # the dead rank's last one
        else:  # Gloo sees the peer's connection close
            assert "collective #2, all_reduce(float32[4], SUM)" in msg and "failed in Gloo" in msg, msg
        assert sec < 10, (sec, msg)  # found within ~50 ms of polling, not at the timeout
