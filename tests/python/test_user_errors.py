"""Clear errors for what a new user hits first: a CPU nn.Module called with tpu inputs (the
message names the parameter still on the CPU and says model.to('tpu')), nn.DataParallel (CUDA
only: use DDP with the 'tpu' backend), and safetensors loading straight to the device (works)."""
import pytest
import torch

import torch_tpu


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, ids):
        return self.fc(self.norm(self.embed(ids)))


def device_still_works():
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]


@pytest.mark.parametrize("make, x, name", [
    (lambda: torch.nn.Linear(4, 3), lambda: torch.randn(2, 4), "weight|bias"),
    (lambda: torch.nn.Embedding(10, 4), lambda: torch.tensor([1, 2]), "weight"),
    (lambda: torch.nn.Conv2d(1, 2, 3), lambda: torch.randn(1, 1, 5, 5), "weight|bias"),
    (lambda: torch.nn.LayerNorm(4), lambda: torch.randn(2, 4), "weight|bias"),
    (lambda: torch.nn.BatchNorm1d(4), lambda: torch.randn(3, 4), "weight|bias|running_mean|running_var"),
])
def test_cpu_module_with_tpu_inputs_names_the_parameter(make, x, name, mode):
    module = make()
    with pytest.raises(RuntimeError) as e:
        module(x().to("tpu"))
    msg = str(e.value)
    assert "same device" in msg and "cpu" in msg
    assert "model.to('tpu')" in msg, msg
    assert f"of {type(module).__name__}" in msg, msg
    assert any(f"'{n}'" in msg for n in name.split("|")), msg
    device_still_works()


def test_nested_module_gives_the_qualified_name(mode):
    net = Net()
    net.embed.to("tpu")  # partly moved: the LayerNorm is the first CPU module met
    with pytest.raises(RuntimeError) as e:
        net(torch.tensor([[1, 2, 3]], device="tpu"))
    msg = str(e.value)
    assert "'norm.weight' of Net" in msg or "'norm.bias' of Net" in msg, msg
    net.to("tpu")
    assert net(torch.tensor([[1, 2, 3]], device="tpu")).device.type == "tpu"


def test_plain_cpu_tensor_gets_a_move_hint(mode):
    with pytest.raises(RuntimeError) as e:
        torch.ones(2, 3, device="tpu") @ torch.ones(3, 2)
    msg = str(e.value)
    assert "is on cpu" in msg and ".to('tpu')" in msg, msg
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, 3, device="tpu") + torch.ones(2, 3)
    device_still_works()


def test_data_parallel_explains_what_to_use():
    model = torch.nn.Linear(4, 3)
    with pytest.raises(RuntimeError, match="supports only CUDA") as e:
        torch.nn.DataParallel(model)
    assert "DistributedDataParallel" in str(e.value) and "backend='tpu'" in str(e.value)
    assert model.weight.device.type == "cpu"  # the model was not touched
    with pytest.raises(RuntimeError, match="supports only CUDA"):
        torch.nn.parallel.data_parallel(model, torch.randn(2, 4))


@pytest.mark.parametrize("device", ["tpu", "tpu:0", torch.device("tpu", 0)])
def test_safetensors_load_to_the_device(tmp_path, device, no_fallback):
    st = pytest.importorskip("safetensors.torch")
    tensors = {"w": torch.randn(3, 4), "ids": torch.arange(5), "h": torch.randn(2).bfloat16()}
    path = str(tmp_path / "t.safetensors")
    st.save_file(tensors, path)
    loaded = st.load_file(path, device=device)
    assert set(loaded) == set(tensors)
    for k, t in tensors.items():
        assert loaded[k].device == torch.device("tpu", 0) and loaded[k].dtype == t.dtype
        assert torch.equal(loaded[k].cpu(), t)
    model = torch.nn.Linear(4, 3)
    st.save_model(model, str(tmp_path / "m.safetensors"))
    target = torch.nn.Linear(4, 3).to("tpu")
    st.load_model(target, str(tmp_path / "m.safetensors"), device=device)
    assert torch.equal(target.weight.cpu(), model.weight.detach())
    assert st.load_file(path)["w"].device.type == "cpu"  # other devices keep safetensors' own path
