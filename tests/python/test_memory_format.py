"""Note [Memory formats] (csrc/torch/lower/context.h): results keep the channels-last layout that
PyTorch's CPU kernels give them -- elementwise ops follow their first full-size input (as
TensorIterator does), convolution its input or weight, batch and group norm their input, and the
gradients likewise -- so a model moved to `memory_format=torch.channels_last` stays channels-last
from layer to layer. Each case compares the device's strides with CPU's, and the values."""
import pytest
import torch

import torch_tpu  # noqa: F401

CL = torch.channels_last


def nchw(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


W = nchw(4, 8, 3, 3, seed=1)
BIAS = nchw(8, 1, 1, seed=2)

CASES = {
    "relu": torch.relu,
    "add_scalar": lambda x: x + 1,
    "mul_contiguous_second": lambda x: x * x.contiguous(),  # the first input decides
    "broadcast_first": lambda x: BIAS.to(x.device) + x,     # a broadcast input does not
    "gelu": torch.nn.functional.gelu,
    "silu": torch.nn.functional.silu,
    "clamp": lambda x: x.clamp(min=0),
    "where": lambda x: torch.where(x > 0, x, 0.1 * x),
    "conv": lambda x: torch.nn.functional.conv2d(x, W.to(x.device), padding=1),
    "batch_norm": lambda x: torch.nn.functional.batch_norm(x, None, None, training=True),
    "group_norm": lambda x: torch.nn.functional.group_norm(x, 2),
    "max_pool": lambda x: torch.nn.functional.max_pool2d(x, 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_layout_matches_cpu(name):
    x = nchw(2, 8, 6, 6).to(memory_format=CL)
    want = CASES[name](x)
    got = CASES[name](x.to("tpu"))
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["input", "weight", "neither"])
def test_convolution_gradients_keep_the_layout(layout):
    """Convolution, batch norm, group norm and where forward and backward: the input gradient,
    the weight gradient and the output have CPU's strides (channels-last when the input or the
    weight is)."""
    def run(dev):
        x = nchw(2, 8, 6, 6, seed=3)
        w = nchw(4, 8, 3, 3, seed=4)
        if layout == "input":
            x = x.to(memory_format=CL)
        if layout == "weight":
            w = w.to(memory_format=CL)
        x = x.to(dev).requires_grad_()
        w = w.to(dev).requires_grad_()
        y = torch.nn.functional.conv2d(x, w, padding=1)
        y = torch.nn.functional.batch_norm(y, None, None, training=True)
        y = torch.nn.functional.group_norm(torch.relu(y), 2)
        y = torch.where(y > 0, y, 0.1 * y)
        y.square().sum().backward()
        return y, x.grad, w.grad

    for want, got in zip(run("cpu"), run("tpu")):
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
