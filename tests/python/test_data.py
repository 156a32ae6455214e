"""torch_tpu.data.DeviceLoader: batches arrive on the device unchanged and in order, nested
structures are moved, the background thread stops on exhaustion / early break / errors, loader
errors reach the consumer, prefetching is bounded, and it works with DataLoader workers."""
import collections
import gc
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import torch_tpu
from torch_tpu.data import DeviceLoader, to_device


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((3,), float(i)), i * i


def loader_threads():
    return [t for t in threading.enumerate() if t.name == "tpu-device-loader"]


def wait_no_loader_threads(timeout=5.0):
    deadline = time.time() + timeout
    while loader_threads() and time.time() < deadline:
        time.sleep(0.01)
    return not loader_threads()


def test_batches_arrive_on_the_device_in_order():
    loader = DataLoader(Squares(10), batch_size=3)
    expected = list(loader)
    got = list(DeviceLoader(loader, "tpu"))
    assert len(got) == len(expected) == 4
    for (x, y), (ex, ey) in zip(got, expected):
        assert x.device.type == "tpu" and y.device.type == "tpu"
        assert torch.equal(x.cpu(), ex) and torch.equal(y.cpu(), ey)
    assert wait_no_loader_threads()


def test_with_dataloader_workers_order_is_kept():
    loader = DataLoader(Squares(24), batch_size=4, num_workers=2)
    got = [y.cpu().tolist() for _, y in DeviceLoader(loader, "tpu", prefetch=3)]
    assert got == [[i * i for i in range(k, k + 4)] for k in range(0, 24, 4)]


Pair = collections.namedtuple("Pair", "a b")


def test_nested_structures_are_moved():
    t = torch.arange(4.0)
    batch = {"x": t, "pair": Pair(t * 2, [t * 3, (t * 4, "tag")]), "n": 7, "s": "text", "none": None}
    moved = to_device(batch, "tpu")
    assert isinstance(moved, dict) and isinstance(moved["pair"], Pair)
    assert isinstance(moved["pair"].b, list) and isinstance(moved["pair"].b[1], tuple)
    assert moved["n"] == 7 and moved["s"] == "text" and moved["none"] is None
    for dev, host in ((moved["x"], t), (moved["pair"].a, t * 2), (moved["pair"].b[0], t * 3),
                      (moved["pair"].b[1][0], t * 4)):
        assert dev.device.type == "tpu" and torch.equal(dev.cpu(), host)
    ordered = to_device(collections.OrderedDict(a=t), "tpu")
    assert type(ordered) is collections.OrderedDict and ordered["a"].device.type == "tpu"


def test_len_is_the_loaders():
    assert len(DeviceLoader(DataLoader(Squares(10), batch_size=4))) == 3
    with pytest.raises(TypeError):
        len(DeviceLoader(iter([torch.zeros(1)])))
    assert DeviceLoader(DataLoader(Squares(10), batch_size=4)).batch_size == 4  # attributes pass through


def test_several_epochs():
    dl = DeviceLoader(DataLoader(Squares(5), batch_size=2))
    for _ in range(3):
        assert [y.cpu().tolist() for _, y in dl] == [[0, 1], [4, 9], [16]]


def test_early_break_stops_the_thread_and_closes_the_source():
    closed = threading.Event()

    def source():
        try:
            for i in range(1000):
                yield torch.tensor([i])
        finally:
            closed.set()

    class Source:
        def __iter__(self):
            return source()

    seen = []
    for x in DeviceLoader(Source(), "tpu", prefetch=2):
        seen.append(int(x.item()))
        if len(seen) == 3:
            break
    gc.collect()
    assert seen == [0, 1, 2]
    assert wait_no_loader_threads()
    assert closed.wait(5)


def test_loader_errors_are_raised_in_the_consumer_after_the_good_batches():
    def source():
        yield torch.tensor([1])
        yield torch.tensor([2])
        raise ValueError("bad record 3")

    class Source:
        def __iter__(self):
            return source()

    seen = []
    with pytest.raises(ValueError, match="bad record 3"):
        for x in DeviceLoader(Source(), "tpu"):
            seen.append(int(x.item()))
    assert seen == [1, 2]
    assert wait_no_loader_threads()


def test_dataset_errors_are_raised():
    class Broken(Squares):
        def __getitem__(self, i):
            if i == 5:
                raise KeyError("missing sample 5")
            return super().__getitem__(i)

    # (num_workers=0: after a worker error, PyTorch's own worker shutdown takes ~5 s)
    with pytest.raises(KeyError, match="missing sample 5"):
        for _ in DeviceLoader(DataLoader(Broken(8), batch_size=2), "tpu"):
            pass
    assert wait_no_loader_threads()


def test_an_error_in_the_loop_body_stops_the_thread():
    with pytest.raises(RuntimeError, match="step failed"):
        for i, _ in enumerate(DeviceLoader(DataLoader(Squares(50), batch_size=1), "tpu")):
            if i == 2:
                raise RuntimeError("step failed")
    gc.collect()
    assert wait_no_loader_threads()


def test_prefetch_is_bounded_and_runs_ahead():
    produced = []

    class Counting:
        def __iter__(self):
            for i in range(20):
                produced.append(i)
                yield torch.tensor([i])

    it = iter(DeviceLoader(Counting(), "tpu", prefetch=2))
    assert int(next(it).item()) == 0
    time.sleep(0.3)  # the producer fills the queue while the consumer is busy
    # Batch 0 was consumed; 2 wait in the queue and 1 more is held by the blocked producer.
    assert 3 <= len(produced) <= 4
    assert [int(next(it).item()) for _ in range(3)] == [1, 2, 3]
    it.close()
    assert wait_no_loader_threads()


def test_bad_prefetch():
    with pytest.raises(ValueError, match="prefetch"):
        DeviceLoader([], "tpu", prefetch=0)


def test_training_with_device_loader_runs_natively(no_fallback):
    torch.manual_seed(0)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    model = torch.nn.Linear(4, 1).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in DeviceLoader(data, "tpu"):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert len(losses) == 4 and all(map(torch.isfinite, torch.tensor(losses)))
    assert torch_tpu.data is not None  # reachable as an attribute of the package
