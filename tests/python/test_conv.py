"""Convolutions on the device vs PyTorch's CPU: conv1d/2d/3d and conv_transpose1d/2d, forward and
all three gradients, strides, padding (numbers and 'same'), dilation, groups (depthwise included),
non-contiguous operands, float32, bfloat16 and float64, both eager modes, no CPU fallback. (The
printed programs run on XLA in test_conv_xla.py.)

Tolerances: float32 runs oneDNN on both sides, but with different algorithms and summation
orders, so sums of products differ by float32 rounding of the terms' magnitudes: rtol=1e-5,
atol=1e-5 (values near zero come from cancellation). bfloat16 convolutions accumulate in float32
on both sides and round once; a result whose float32 sums straddle a rounding boundary differs
by one bfloat16 ulp (2**-8 relative): rtol=1.6e-2 with atol=2e-2 for near-zero values.
"""

import pytest
import torch
import torch.nn.functional as F

F32 = dict(rtol=1e-5, atol=1e-5)
BF16 = dict(rtol=1.6e-2, atol=2e-2)


def _randn(*shape, dtype=torch.float32, gen):
    return torch.randn(*shape, generator=gen).to(dtype)


def check_grads(fn, inputs, tol, dtype=torch.float32):
    """fn(*inputs) and the gradients of every floating input, on CPU and on the device."""
    cpu = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    dev = [t.detach().to("tpu").requires_grad_(t.is_floating_point()) for t in inputs]
    y_cpu, y_dev = fn(*cpu), fn(*dev)
    torch.testing.assert_close(y_dev.cpu(), y_cpu, **tol)
    g = torch.randn(y_cpu.shape, generator=torch.Generator().manual_seed(7)).to(y_cpu.dtype)
    y_cpu.backward(g)
    y_dev.backward(g.to("tpu"))
    for i, (a, b) in enumerate(zip(cpu, dev)):
        if a.requires_grad:
            torch.testing.assert_close(b.grad.cpu(), a.grad, **tol, msg=f"grad of input {i}")


CONV2D = [
    # stride, padding, dilation, groups, bias
    (1, 0, 1, 1, True),
    (1, 1, 1, 1, False),
    (2, 1, 1, 1, True),  # input rows no window reaches
    ((2, 1), (0, 2), (1, 2), 1, True),
    (1, 2, 2, 2, True),
    (2, 1, 1, 4, False),  # depthwise
    (1, 4, 1, 1, True),  # padding larger than the kernel's reach
]


@pytest.mark.parametrize("stride,padding,dilation,groups,bias", CONV2D)
def test_conv2d_matches_cpu(mode, no_fallback, stride, padding, dilation, groups, bias):
    g = torch.Generator().manual_seed(0)
    x = _randn(2, 4, 9, 8, gen=g)
    w = _randn(6 if groups != 4 else 4, 4 // groups, 3, 3, gen=g)
    b = _randn(w.shape[0], gen=g)
    inputs = [x, w, b] if bias else [x, w]
    check_grads(lambda *t: F.conv2d(*t, stride=stride, padding=padding, dilation=dilation, groups=groups),
                inputs, F32)


@pytest.mark.parametrize("dim", [1, 3])
def test_conv1d_and_conv3d(mode, no_fallback, dim):
    g = torch.Generator().manual_seed(1)
    spatial = (11,) if dim == 1 else (5, 6, 4)
    x = _randn(2, 4, *spatial, gen=g)
    w = _randn(6, 2, *((3,) * dim), gen=g)
    b = _randn(6, gen=g)
    conv = F.conv1d if dim == 1 else F.conv3d
    check_grads(lambda *t: conv(*t, stride=2, padding=1, dilation=1, groups=2), [x, w, b], F32)


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", [
    (2, 1, 1, 1, 1),
    (2, 0, 1, 1, 2),  # output_padding > padding: rows only the padding reaches
    (3, 2, 0, 2, 1),
    (1, 1, 0, 1, 3),
    (1, 0, 1, 2, 1),  # output_padding >= stride (allowed below the dilation)
])
def test_conv_transpose2d_matches_cpu(mode, no_fallback, stride, padding, output_padding, dilation, groups):
    g = torch.Generator().manual_seed(2)
    x = _randn(2, 6, 5, 4, gen=g)
    w = _randn(6, 2, 3, 3, gen=g)
    b = _randn(2 * groups, gen=g)
    check_grads(lambda *t: F.conv_transpose2d(*t, stride=stride, padding=padding, output_padding=output_padding,
                                              dilation=dilation, groups=groups), [x, w, b], F32)


def test_one_problem_from_programs_that_run_on_different_threads(mode, no_fallback):
    """The same oneDNN problem reached by a program the queue worker runs (conv + bias) and by one
    the submitting thread runs (no bias), alternately: a dilated transposed convolution takes
    oneDNN's GEMM kernels, whose scratchpad must be the running thread's (onednn_threads.h);
    before user scratchpads the second run failed or overran the heap."""
    g = torch.Generator().manual_seed(5)
    x, w, b = torch.randn(1, 1, 4, 5, generator=g), torch.randn(1, 1, 4, 3, generator=g), torch.randn(1, generator=g)
    kw = dict(stride=2, padding=1, output_padding=1, dilation=(2, 3))
    for bias in (b, None, b, None):
        args = [x, w] if bias is None else [x, w, bias]
        check_grads(lambda *t: F.conv_transpose2d(*t, **kw), args, F32)


def test_conv_transpose1d(mode, no_fallback):
    g = torch.Generator().manual_seed(3)
    x, w = _randn(2, 3, 7, gen=g), _randn(3, 5, 4, gen=g)
    check_grads(lambda *t: F.conv_transpose1d(*t, stride=3, padding=1, output_padding=2), [x, w], F32)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv_padding_same_and_valid(mode, no_fallback):
    g = torch.Generator().manual_seed(4)
    x, w = _randn(1, 3, 8, 7, gen=g), _randn(5, 3, 4, 3, gen=g)  # even kernel: asymmetric 'same'
    check_grads(lambda *t: F.conv2d(*t, padding="same", dilation=(1, 2)), [x, w], F32)
    check_grads(lambda *t: F.conv2d(*t, padding="valid"), [x, w], F32)


def test_non_contiguous_operands(mode, no_fallback):
    g = torch.Generator().manual_seed(5)
    x = _randn(2, 8, 10, 9, gen=g)
    w = _randn(3, 3, 6, 4, gen=g)  # used transposed: [6, 4, 3, 3]

    def fn(x, w, b):
        return F.conv2d(x[:, ::2, 1:, :], w.permute(2, 3, 0, 1), b[::2], padding=1)

    check_grads(fn, [x, w, _randn(12, gen=g)], F32)
    # channels_last input and weight
    x_cl, w_cl = x.to(memory_format=torch.channels_last), _randn(6, 8, 3, 3, gen=g).to(memory_format=torch.channels_last)
    check_grads(lambda x, w: F.conv2d(x, w, stride=2), [x_cl, w_cl], F32)


def test_conv_bfloat16(mode, no_fallback):
    g = torch.Generator().manual_seed(6)
    x = _randn(2, 4, 9, 8, dtype=torch.bfloat16, gen=g)
    w = _randn(6, 2, 3, 3, dtype=torch.bfloat16, gen=g)
    b = _randn(6, dtype=torch.bfloat16, gen=g)
    check_grads(lambda *t: F.conv2d(*t, stride=2, padding=1, groups=2), [x, w, b], BF16)
    check_grads(lambda *t: F.conv_transpose2d(*t[:2], stride=2, padding=1, output_padding=1),
                [_randn(2, 6, 4, 4, dtype=torch.bfloat16, gen=g), w], BF16)


def test_conv_float64_through_reference_loops(mode, no_fallback):
    g = torch.Generator().manual_seed(8)
    x, w = _randn(2, 3, 6, 5, dtype=torch.float64, gen=g), _randn(4, 3, 3, 2, dtype=torch.float64, gen=g)
    check_grads(lambda *t: F.conv2d(*t, stride=(1, 2), padding=1, dilation=(2, 1)), [x, w],
                dict(rtol=1e-12, atol=1e-12))


def test_conv_module_and_empty_batch(mode, no_fallback):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    dev = torch.nn.Conv2d(3, 4, 3, padding=1).to("tpu")
    dev.load_state_dict(conv.state_dict())
    x = torch.randn(0, 3, 5, 5)
    assert dev(x.to("tpu")).shape == conv(x).shape == (0, 4, 5, 5)
    x = torch.randn(1, 3, 5, 5)
    torch.testing.assert_close(dev(x.to("tpu")).cpu(), conv(x), **F32)


def _errors(fn, *args):
    with pytest.raises(RuntimeError) as cpu_err:
        fn(*args)
    with pytest.raises(RuntimeError) as dev_err:
        fn(*[a.to("tpu") for a in args])
    return str(cpu_err.value), str(dev_err.value)


def test_conv_errors_match_cpu():
    x, w = torch.randn(2, 5, 8, 8), torch.randn(4, 3, 3, 3)
    cpu, dev = _errors(F.conv2d, x, w)  # channel mismatch
    assert cpu == dev
    cpu, dev = _errors(F.conv2d, x[:, :3], w, torch.randn(4).double())
    assert cpu == dev == "Input type (float) and bias type (double) should be the same"
    # CPU's message for an input/weight mismatch depends on its kernel; ours names both types.
    _, dev = _errors(F.conv2d, x[:, :3].double(), w)
    assert dev == "Input type (double) and weight type (float) should be the same"
    cpu, dev = _errors(F.conv_transpose2d, x, w)
    assert cpu == dev
    cpu, dev = _errors(lambda x, w: F.conv_transpose2d(x, w, padding=2), torch.randn(1, 4, 1, 3), torch.randn(4, 2, 2, 2))
    assert cpu == dev  # an empty transposed output


def test_convolution_of_holed_views_and_complex_tensors():
    # ATen's complex convolution runs real convolutions on the real and imaginary parts of the
    # complex storage: float32 views with a hole after every element, which oneDNN failed on
    # (an internal error, heap corruption in a longer run) before they were copied to a plain
    # layout. Same arithmetic as the CPU's: the CPU's tolerance for float32.
    torch.manual_seed(0)
    kw = dict(stride=2, padding=1, output_padding=1, dilation=(2, 3))
    x = torch.randn(1, 2, 4, 5, dtype=torch.complex64)
    w = torch.randn(2, 3, 4, 3, dtype=torch.complex64)
    b = torch.randn(3, dtype=torch.complex64)
    ref = torch.nn.functional.conv_transpose2d(x, w, b, **kw)
    out = torch.nn.functional.conv_transpose2d(x.to("tpu"), w.to("tpu"), b.to("tpu"), **kw)
    torch.testing.assert_close(out.cpu(), ref)
    xd, wd = x.to("tpu"), w.to("tpu")
    real = torch.nn.functional.conv_transpose2d(xd.real, wd.imag, **kw)  # holed float32 views
    torch.testing.assert_close(real.cpu(), torch.nn.functional.conv_transpose2d(x.real, w.imag, **kw))
    fwd = torch.nn.functional.conv2d(xd.imag, wd.real.transpose(0, 1), padding=1)
    torch.testing.assert_close(fwd.cpu(), torch.nn.functional.conv2d(x.imag, w.real.transpose(0, 1), padding=1))
