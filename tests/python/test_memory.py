"""torch.tpu.memory: the allocator's statistics and summary, the per-process memory fraction and
its OutOfMemoryError, the allocation history and snapshots read back by PyTorch's own memory
visualizer (torch.cuda._memory_viz), and tensor.record_stream."""
import gc
import pickle

import pytest
import torch
import torch.cuda._memory_viz as memory_viz

import torch_tpu
from conftest import restored_option


@pytest.fixture
def history():
    torch.tpu.synchronize()
    torch.tpu.memory._record_memory_history(max_entries=100000)
    try:
        yield
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)


def _this_file_frames(frames):
    return [f for f in frames if f["filename"].endswith("test_memory.py")]


def _segment_of(snapshot, address):
    for seg in snapshot["segments"]:
        if seg["address"] <= address < seg["address"] + seg["total_size"]:
            return seg
    return None


def test_out_of_memory_error_is_torchs():
    assert torch.tpu.OutOfMemoryError is torch.OutOfMemoryError
    assert torch.tpu.memory.OutOfMemoryError is torch.OutOfMemoryError


def test_memory_summary_reports_the_allocator():
    torch.tpu.synchronize()
    x = torch.empty(1 << 20, device="tpu")  # 4 MiB, memory attached at once in strict mode
    s = torch.tpu.memory_summary()
    assert "PyTorch tpu memory summary, device ID 0" in s
    assert "Allocated memory" in s and "Reserved memory" in s and "Allocations" in s
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] >= 4 << 20
    assert stats["allocated_bytes.all.allocated"] >= stats["allocated_bytes.all.freed"]
    del x
    assert "Live buffers" not in torch.tpu.memory_summary(abbreviated=True)


def test_per_process_memory_fraction_limits_allocations():
    torch.tpu.synchronize()
    torch.tpu.empty_cache()
    capacity = torch.tpu.get_device_properties().total_memory
    used = torch.tpu.memory_reserved()
    fraction = (used + (64 << 20)) / capacity
    torch.tpu.set_per_process_memory_fraction(fraction)
    try:
        assert abs(torch.tpu.get_per_process_memory_fraction() - fraction) < 1e-6
        ok = torch.empty(8 << 20, dtype=torch.uint8, device="tpu")  # fits the 64 MiB left
        with pytest.raises(torch.tpu.OutOfMemoryError, match="set_per_process_memory_fraction"):
            torch.empty(128 << 20, dtype=torch.uint8, device="tpu")
        del ok
        assert torch.tpu.memory_stats()["num_ooms"] >= 1
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    assert torch.tpu.get_per_process_memory_fraction() == 1.0
    big = torch.ones(128 << 20, dtype=torch.uint8, device="tpu")  # the device is usable again
    assert big.sum().item() == 128 << 20


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_memory_fraction_is_validated(bad):
    with pytest.raises(ValueError, match="Allowed range"):
        torch.tpu.set_per_process_memory_fraction(bad)


def _allocate_here():
    return torch.ones(1000, device="tpu")


def test_snapshot_has_live_blocks_with_their_stacks(history):
    x = _allocate_here()
    y = torch.ones(3000, device="tpu")
    y_addr = y.data_ptr()
    del y
    torch.tpu.synchronize()
    snap = torch.tpu.memory._snapshot()
    seg = _segment_of(snap, x.data_ptr())
    assert seg is not None, "x's memory is not in the snapshot"
    block = seg["blocks"][0]
    assert block["state"] == "active_allocated" and block["requested_size"] == 4000
    assert block["size"] >= 4000 and seg["total_size"] == block["size"]
    names = [f["name"] for f in _this_file_frames(block["frames"])]
    assert names[:2] == ["_allocate_here", "test_snapshot_has_live_blocks_with_their_stacks"], names
    assert _segment_of(snap, y_addr) is None or _segment_of(snap, y_addr)["blocks"][0]["state"] == "inactive"
    trace = snap["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc" and e["addr"] == y_addr]
    frees = [e for e in trace if e["action"] == "free_completed" and e["addr"] == y_addr]
    assert allocs and frees and allocs[-1]["size"] == frees[-1]["size"] >= 12000
    assert _this_file_frames(allocs[-1]["frames"])
    # The snapshot's segments are the memory reserved on the device.
    reserved = sum(s["total_size"] for s in snap["segments"] if s["device"] == 0)
    assert reserved == torch.tpu.memory_reserved()


def test_snapshot_round_trips_through_pytorchs_memory_viz(mode, history, tmp_path):
    keep = [torch.randn(256, 256, device="tpu") for _ in range(3)]
    scratch = torch.randn(1024, device="tpu") * 2
    del scratch
    (keep[0] @ keep[1]).sum().item()
    path = tmp_path / "snapshot.pickle"
    torch.tpu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        data = pickle.load(f)
    assert set(data) >= {"segments", "device_traces"}
    summary = memory_viz.segsum(data)  # checks that every segment's blocks add up
    assert "total_reserved" in summary and "segments:" in summary
    text = memory_viz.trace(data)
    assert "Device 0" in text and "del " in text
    flame = memory_viz.memory(data, format_flamegraph=lambda lines: lines)
    assert "test_snapshot_round_trips_through_pytorchs_memory_viz" in flame
    seg_flame = memory_viz.segments(data, format_flamegraph=lambda lines: lines)
    assert "active_allocated" in seg_flame
    assert "<html>" in memory_viz.trace_plot(data) and "<html>" in memory_viz.segment_plot(data)
    before = torch.tpu.memory_snapshot()
    extra = torch.empty(1 << 16, device="tpu")
    memory_viz.compare(before, torch.tpu.memory_snapshot(), format_flamegraph=lambda lines: lines)
    del extra, keep


def test_fused_mode_records_memory_when_a_value_first_needs_it(history):
    x = torch.randn(4096, device="tpu")
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        dead = x * 3  # never read after the window: never written, never given memory
        dead_addr = dead.data_ptr()
        del dead
        kept = x * 2
        kept_addr = kept.data_ptr()
        before = [e for e in torch.tpu.memory._snapshot()["device_traces"][0] if e["addr"] == kept_addr]
        assert not [e for e in before if e["action"] == "alloc"]
        kept.sum().item()  # cuts the window: its results take memory now
    trace = torch.tpu.memory._snapshot()["device_traces"][0]
    assert [e for e in trace if e["action"] == "alloc" and e["addr"] == kept_addr]
    assert not [e for e in trace if e["action"] == "alloc" and e["addr"] == dead_addr]


def test_history_off_records_nothing():
    torch.tpu.memory._record_memory_history(enabled=None)
    torch.ones(10, device="tpu")
    snap = torch.tpu.memory._snapshot()
    assert all(not t for t in snap["device_traces"])
    assert all(s["frames"] == [] for s in snap["segments"])


def test_history_arguments_are_validated():
    with pytest.raises(ValueError):
        torch.tpu.memory._record_memory_history(enabled="sometimes")
    with pytest.raises(ValueError):
        torch.tpu.memory._record_memory_history(context="everything")


def test_oom_is_in_the_trace(history):
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1 << 60, dtype=torch.uint8, device="tpu")
    ooms = [e for e in torch.tpu.memory._snapshot()["device_traces"][0] if e["action"] == "oom"]
    assert ooms and ooms[-1]["size"] == 1 << 60 and "device_free" in ooms[-1]
    assert "raise OutOfMemoryError" in memory_viz.trace(torch.tpu.memory._snapshot())


def test_record_stream(mode):
    s = torch.tpu.Stream()
    x = torch.randn(64, device="tpu")
    x.record_stream(s)
    x.record_stream(torch.tpu.current_stream())
    with pytest.raises(RuntimeError, match="expected a tpu stream"):
        x.record_stream(torch.Stream(device="cpu"))


def test_record_stream_memory_is_not_reused_while_queued_work_reads_it():
    # A tensor used by queued work on a side stream, then freed: its memory must not take new
    # values before that work has run (one in-order queue, and the task holds the buffer).
    with restored_option("inline_work") as set_inline_work:
        set_inline_work(0)  # every program goes through the queue worker
        a = torch.randn(1024, 1024, device="tpu")
        x = torch.randn(1024, 1024, device="tpu")
        expected = (a.cpu() @ x.cpu()).sum()
        s = torch.tpu.Stream()
        with torch.tpu.stream(s):
            for _ in range(3):
                a = a @ torch.eye(1024, device="tpu")  # keeps the queue busy
            y = a @ x
        x.record_stream(s)
        del x
        gc.collect()
        z = torch.full((1024, 1024), 7.0, device="tpu")  # may take x's freed block, after the matmul
        torch.testing.assert_close(y.sum().cpu(), expected, rtol=1e-3, atol=1e-1)
        assert z[0, 0].item() == 7.0



def test_a_loop_that_never_syncs_keeps_its_working_set_not_the_queues():
    # Note [Stream-ordered frees]: a tensor freed while queued work still reads it gives its
    # memory back at once, for work queued after that (the queue runs in order). Before, each
    # queued task kept its buffers until it had run: ~4096 tasks' worth of dead tensors.
    with restored_option("eager_mode") as set_mode, restored_option("inline_work") as set_inline_work:
        set_mode("strict")
        set_inline_work(0)  # every program goes through the queue worker
        torch.tpu.synchronize()
        torch.tpu.empty_cache()
        torch.tpu.reset_peak_memory_stats()
        base, base_reserved = torch.tpu.memory_allocated(), torch.tpu.memory_reserved()
        a = torch.randn(1024, 1024, device="tpu")
        eye = torch.eye(1024, device="tpu")
        for _ in range(4):
            a = a @ eye  # keeps the worker busy while the loop below is queued behind it
        sums = []
        n = 1 << 16  # 256 KiB tensors
        for i in range(600):
            x = torch.full((n,), float(i % 7), device="tpu")
            y = x * 2
            sums.append(y.sum())
            del x, y
        peak = torch.tpu.max_memory_allocated() - base
        torch.tpu.synchronize()
        # x and y; a (old and new) and eye; and the matmuls' scratch. Before: 336 MiB.
        working_set = 2 * n * 4 + 3 * 1024 * 1024 * 4
        assert peak <= 2 * working_set + (8 << 20), f"peak {peak >> 20} MiB for a {working_set >> 20} MiB working set"
        # The reused memory held the right values at every step.
        assert [s.item() for s in sums] == [float(2 * (i % 7) * n) for i in range(600)]
        assert torch.tpu.max_memory_reserved() - base_reserved <= 64 * 1024 * 1024
