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
