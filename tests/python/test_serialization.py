"""torch.save / torch.load (and pickle) of tpu tensors, state dicts and whole modules: bit-exact round
trips, map_location in every form, dtypes, and views that keep sharing their storage like CPU."""
from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch

import torch_tpu  # noqa: F401


def roundtrip(obj, legacy=False, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


DTYPE_CASES = {
    "float32": lambda: rand(3, 4),
    "bfloat16": lambda: rand(3, 4).bfloat16(),
    "float16": lambda: rand(5).half(),
    "float64": lambda: rand(2, 2).double(),
    "int64": lambda: torch.tensor([-(2 ** 62), -1, 0, 1, 2 ** 62 + 12345]),
    "int32": lambda: torch.tensor([-7, 2 ** 31 - 1], dtype=torch.int32),
    "uint8": lambda: torch.tensor([0, 255, 17], dtype=torch.uint8),
    "bool": lambda: torch.tensor([True, False, True]),
    "scalar": lambda: torch.tensor(3.25),
    "empty": lambda: torch.empty(0, 3),
    "specials": lambda: torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]),
}


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_tensor_roundtrip_bit_exact(name, legacy):
    x = DTYPE_CASES[name]()
    y = roundtrip(x.to("tpu"), legacy=legacy)
    assert y.device == torch.device("tpu:0")
    assert y.dtype == x.dtype and y.shape == x.shape
    # bit-exact: the raw bytes match (NaN payloads and -0.0 included)
    raw = lambda t: t.reshape(-1).view(torch.uint8)  # noqa: E731
    assert torch.equal(raw(y.cpu()), raw(x))


def test_state_dict_roundtrip():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2)).to("tpu")
    m.train()
    m(torch.randn(5, 4, device="tpu"))  # moves the batch-norm running statistics
    sd = roundtrip(m.state_dict())
    assert list(sd) == list(m.state_dict())
    for k, v in m.state_dict().items():
        assert sd[k].device == v.device and sd[k].dtype == v.dtype
        assert torch.equal(sd[k].cpu(), v.cpu()), k
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2)).to("tpu")
    fresh.load_state_dict(sd)
    x = torch.randn(2, 4, device="tpu")
    m.eval()
    fresh.eval()
    assert torch.equal(fresh(x).cpu(), m(x).cpu())


def test_whole_module_roundtrip():
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1)).to("tpu")
    m2 = roundtrip(m, weights_only=False)
    assert type(m2) is type(m) and isinstance(m2[1], torch.nn.ReLU)
    for p, q in zip(m.parameters(), m2.parameters()):
        assert q.device == torch.device("tpu:0") and q.requires_grad
        assert torch.equal(p.cpu(), q.cpu())
    x = torch.randn(4, 3, device="tpu")
    assert torch.equal(m2(x).cpu(), m(x).cpu())


def test_optimizer_state_roundtrip():
    p = torch.nn.Parameter(torch.randn(3, device="tpu"))
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = torch.ones(3, device="tpu")
    opt.step()
    sd = roundtrip(opt.state_dict())
    buf = sd["state"][0]["momentum_buffer"]
    assert buf.device == torch.device("tpu:0")
    assert torch.equal(buf.cpu(), opt.state_dict()["state"][0]["momentum_buffer"].cpu())


@pytest.mark.parametrize("loc", ["cpu", torch.device("cpu"), {"tpu:0": "cpu"},
                                 lambda storage, location: storage])
def test_map_location_to_cpu(loc):
    x = rand(4, 2)
    y = roundtrip({"w": x.to("tpu"), "n": 3}, map_location=loc)
    assert y["n"] == 3
    assert y["w"].device.type == "cpu"
    assert torch.equal(y["w"], x)


@pytest.mark.parametrize("loc", ["tpu", "tpu:0", torch.device("tpu:0"), {"cpu": "tpu:0"}])
def test_map_location_cpu_file_to_tpu(loc):
    x = rand(3, 3)
    y = roundtrip([x, x[1:]], map_location=loc)
    assert y[0].device == torch.device("tpu:0") and y[1].device == torch.device("tpu:0")
    assert torch.equal(y[0].cpu(), x) and torch.equal(y[1].cpu(), x[1:])
    # the view still shares the base's storage after loading
    assert y[1].untyped_storage().data_ptr() == y[0].untyped_storage().data_ptr()


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_views_keep_sharing_storage(legacy):
    def sequence(base):
        v = base[2:5]
        t = base.view(2, 5).t()
        b2, v2, t2 = roundtrip([base, v, t], legacy=legacy)
        v2.add_(100)  # writes through the loaded view into the loaded base
        t2[0].mul_(-1)
        return b2, v2, t2

    cpu = sequence(torch.arange(10.0))
    dev = sequence(torch.arange(10.0).to("tpu"))
    for c, d in zip(cpu, dev):
        assert d.device == torch.device("tpu:0")
        assert (d.shape, d.stride(), d.storage_offset()) == (c.shape, c.stride(), c.storage_offset())
        assert torch.equal(d.cpu(), c)
    assert dev[1].untyped_storage().data_ptr() == dev[0].untyped_storage().data_ptr()


def test_view_saved_alone_keeps_whole_storage():
    for dev in ("cpu", "tpu"):
        v = roundtrip(torch.arange(10.0, device=dev)[2:5])
        assert v.storage_offset() == 2 and v.untyped_storage().nbytes() == 40
        assert v.cpu().tolist() == [2.0, 3.0, 4.0]


def test_weights_only_load_of_tpu_tensors():
    x = rand(2, 3)
    y = roundtrip({"a": x.to("tpu"), "b": [x.to("tpu").bfloat16()]}, weights_only=True)
    assert y["a"].device == torch.device("tpu:0") and torch.equal(y["a"].cpu(), x)
    assert y["b"][0].dtype == torch.bfloat16


def test_save_to_file(tmp_path):
    x = rand(8)
    path = tmp_path / "t.pt"
    torch.save({"x": x.to("tpu")}, path)
    assert torch.equal(torch.load(path)["x"].cpu(), x)
    assert torch.load(path, map_location="cpu")["x"].device.type == "cpu"


def test_pickle_and_deepcopy():
    x = rand(3, 2)
    d = x.to("tpu")
    y = pickle.loads(pickle.dumps(d))
    assert y.device == torch.device("tpu:0") and torch.equal(y.cpu(), x)
    z = copy.deepcopy(d)
    assert z.device == d.device and z.data_ptr() != d.data_ptr() and torch.equal(z.cpu(), x)
    p = copy.deepcopy(torch.nn.Parameter(d.clone()))
    assert isinstance(p, torch.nn.Parameter) and torch.equal(p.detach().cpu(), x)


def test_storage_roundtrip():
    d = torch.arange(5, dtype=torch.int16).to("tpu")
    s = roundtrip(d.untyped_storage())
    assert s.device == torch.device("tpu:0") and s.nbytes() == 10
    assert s.cpu().tolist() == d.cpu().untyped_storage().tolist()
