"""Pinned host memory (Note [Pinned memory] in csrc/torch/pinned.cc): tensor.pin_memory() and
DataLoader(pin_memory=True) give page-locked tensors from the tpu's caching host allocator,
is_pinned() knows them, and a non-blocking copy from one to the device reads the pinned memory
when the queue runs it (no snapshot), with the block kept from reuse until then."""
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import torch_tpu
from conftest import restored_option


def _pinned_copies():
    return torch_tpu.metrics.counters().get("transfers_from_pinned", 0)


def test_pin_memory_gives_pinned_tensors():
    t = torch.randn(1000)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu"
    assert torch.equal(p, t)
    assert p[10:20].is_pinned()  # any address inside a pinned block
    assert not torch.randn(10).is_pinned()
    assert torch.empty(100, pin_memory=True).is_pinned()


def test_non_blocking_copy_from_pinned_memory_reads_it_on_the_queue(mode):
    src = torch.randn(4096).pin_memory()
    before = _pinned_copies()
    d = src.to("tpu", non_blocking=True)
    torch.testing.assert_close(d.cpu(), src, rtol=0, atol=0)
    assert _pinned_copies() == before + 1
    # Blocking copies, unpinned sources and conversions take the ordinary path.
    torch.testing.assert_close(src.to("tpu").cpu(), src, rtol=0, atol=0)
    torch.testing.assert_close(torch.randn(5).to("tpu", non_blocking=True).cpu().shape, torch.Size([5]))
    torch.testing.assert_close(src.to("tpu", torch.float64, non_blocking=True).cpu(), src.double())
    assert _pinned_copies() == before + 1


def test_a_freed_pinned_block_is_not_reused_before_the_device_read_it():
    with restored_option("inline_work") as set_inline_work:
        set_inline_work(0)
        a = torch.randn(1024, 1024, device="tpu")
        for _ in range(4):
            a = a @ a.T / 1024  # queued work ahead of the copy
        src = torch.full((1 << 20,), 3.0).pin_memory()
        d = src.to("tpu", non_blocking=True)
        del src  # the block goes back to the allocator, but must wait for the queued copy
        others = [torch.full((1 << 20,), -1.0).pin_memory() for _ in range(4)]
        assert all(o.is_pinned() for o in others)
        assert torch.all(d.cpu() == 3.0)
        a.sum().item()


def test_dataloader_pin_memory_batches_are_pinned():
    data = TensorDataset(torch.randn(64, 8), torch.arange(64))
    loader = DataLoader(data, batch_size=16, pin_memory=True)
    seen = 0
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned()
        dx, dy = x.to("tpu", non_blocking=True), y.to("tpu", non_blocking=True)
        torch.testing.assert_close(dx.cpu(), x, rtol=0, atol=0)
        assert torch.equal(dy.cpu(), y)
        seen += 1
    assert seen == 4


def test_empty_host_cache():
    p = torch.empty(1 << 16).pin_memory()
    del p
    torch.accelerator.memory.empty_host_cache()
    assert torch.empty(1 << 16).pin_memory().is_pinned()
