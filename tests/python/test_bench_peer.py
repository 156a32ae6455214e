"""benchmarks/_peer.py: the peer process that puts another backend's figures in the same benchmark
run (bench_models.py --pjrt, bench_eager.py --pjrt)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import _peer  # noqa: E402


def test_calls_run_in_the_peer_and_errors_come_back():
    peer = _peer.Peer("host", 1)
    try:
        assert peer.call("os.path", "basename", "/a/b") == "b"
        assert peer.call("os", "getpid") != os.getpid()
        with pytest.raises(_peer.PeerError, match="on the host backend: AttributeError"):
            peer.call("os.path", "no_such_function")
        assert peer.call("bench_models", "device_name").endswith("(host executor)")  # still serving
    finally:
        peer.close()


def test_a_peer_that_dies_is_reported():
    peer = _peer.Peer("host", 1)
    with pytest.raises(_peer.PeerError, match="exited"):
        peer.call("os", "_exit", 3)


def test_the_cpu_side_of_bench_models_runs_in_a_peer():
    """bench_models.py times PyTorch CPU in a peer process (README "Benchmarks" says why)."""
    import bench_models

    index = next(i for i, c in enumerate(bench_models.CASES) if c.name == "dlrm")
    peer = _peer.Peer("host", 1)
    try:
        peer.call("bench_models", "remote_build", index, "cpu")
        assert peer.call("bench_models", "remote_step", index, "cpu") > 0
        assert peer.call("bench_models", "remote_finish") == {}
    finally:
        peer.close()
