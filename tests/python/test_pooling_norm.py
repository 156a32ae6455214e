"""Pooling and normalization on the device vs PyTorch's CPU: max_pool2d (values, indices, ties,
NaN, dilation, ceil_mode), max_pool1d, avg_pool2d (padding rules, divisor_override), adaptive
average and max pooling (uniform and uneven windows, upsampling; max: ties, NaN, out=), batch norm (training with running-stat
updates, momentum=None, evaluation, no affine / no running stats, mixed bfloat16 input with
float32 parameters, the _native_batch_norm_legit / _batch_norm_with_update ops) and group norm:
values and gradients, both eager modes, no CPU fallback.

Tolerances: max pooling picks elements, so values and indices compare exactly. Averages and
normalizations differ from CPU only by float32 summation order: rtol=1e-5, atol=1e-5. bfloat16
results round once from float32 on both sides: one bfloat16 ulp, rtol=1.6e-2, atol=1e-2
(values near zero after a normalization's subtraction).
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

EXACT = dict(rtol=0, atol=0)
F32 = dict(rtol=1e-5, atol=1e-5)
BF16 = dict(rtol=1.6e-2, atol=1e-2)


def check(fn, inputs, tol, grad=True, grad_tol=None):
    """fn(*inputs) (a tensor or a tuple of tensors) and the floating inputs' gradients of its first
    result, on CPU and on the device."""
    cpu = [t.detach().clone().requires_grad_(grad and t.is_floating_point()) for t in inputs]
    dev = [t.detach().to("tpu").requires_grad_(grad and t.is_floating_point()) for t in inputs]
    out_cpu, out_dev = fn(*cpu), fn(*dev)
    if not isinstance(out_cpu, tuple):
        out_cpu, out_dev = (out_cpu,), (out_dev,)
    for a, b in zip(out_cpu, out_dev):
        torch.testing.assert_close(b.cpu(), a, **tol, equal_nan=True)
    if not grad:
        return
    g = torch.randn(out_cpu[0].shape, generator=torch.Generator().manual_seed(11)).to(out_cpu[0].dtype)
    out_cpu[0].backward(g)
    out_dev[0].backward(g.to("tpu"))
    for i, (a, b) in enumerate(zip(cpu, dev)):
        if a.requires_grad:
            torch.testing.assert_close(b.grad.cpu(), a.grad, **(grad_tol or tol), msg=f"grad of input {i}")


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# --- max pooling -------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 2, 1, 2, True),
    ((3, 2), (2, 1), (1, 0), 1, True),
])
def test_max_pool2d(mode, no_fallback, kernel, stride, padding, dilation, ceil_mode):
    fn = lambda x: F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)  # noqa: E731
    check(fn, [randn(2, 3, 9, 8)], EXACT, grad_tol=F32)
    check(fn, [randn(3, 7, 6, seed=1)], EXACT, grad_tol=F32)  # unbatched


def test_max_pool2d_ties_and_nan(mode, no_fallback):
    # Small integers make ties everywhere: the first maximum in scan order wins, as on CPU;
    # a NaN wins its window.
    x = torch.randint(0, 3, (2, 2, 7, 7), generator=torch.Generator().manual_seed(2)).float()
    x[0, 0, 2, 3] = float("nan")
    x[1, 1, 0, 0] = float("nan")
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), [x], EXACT, grad_tol=F32)


def test_max_pool2d_integers_and_bfloat16(mode, no_fallback):
    x = torch.randint(-50, 50, (2, 3, 8, 8), generator=torch.Generator().manual_seed(3))
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), [x], EXACT, grad=False)
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), [randn(2, 3, 8, 8, dtype=torch.bfloat16)], EXACT,
          grad_tol=BF16)


def test_max_pool1d(mode, no_fallback):
    check(lambda x: F.max_pool1d(x, 3, 2, 1), [randn(2, 4, 11)], EXACT, grad_tol=F32)


def test_max_pool2d_out_variant(mode, no_fallback):
    x = randn(2, 3, 8, 8)
    out, idx = torch.empty(0), torch.empty(0, dtype=torch.long)
    out_d, idx_d = out.to("tpu"), idx.to("tpu")
    torch.ops.aten.max_pool2d_with_indices.out(x, [2, 2], [2, 2], [0, 0], [1, 1], False, out=out, indices=idx)
    torch.ops.aten.max_pool2d_with_indices.out(x.to("tpu"), [2, 2], [2, 2], [0, 0], [1, 1], False, out=out_d,
                                               indices=idx_d)
    torch.testing.assert_close(out_d.cpu(), out, **EXACT)
    torch.testing.assert_close(idx_d.cpu(), idx, **EXACT)


# --- average pooling ---------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor", [
    (2, None, 0, False, True, None),
    (3, 2, 1, False, True, None),
    (3, 2, 1, True, False, None),
    (3, 2, 1, True, True, None),  # the last window runs past the padding
    ((3, 2), (2, 3), (1, 1), False, True, 5),
])
def test_avg_pool2d(mode, no_fallback, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    fn = lambda x: F.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)  # noqa: E731
    check(fn, [randn(2, 3, 9, 8)], F32)
    check(fn, [randn(3, 7, 6, seed=1)], F32)


def test_avg_pool2d_integers_bfloat16_and_out(mode, no_fallback):
    x = torch.randint(-50, 50, (2, 3, 8, 8), generator=torch.Generator().manual_seed(4))
    check(lambda x: F.avg_pool2d(x, 3, 2, 1), [x], EXACT, grad=False)  # integer division
    check(lambda x: F.avg_pool2d(x, 3, 2, 1), [randn(2, 3, 8, 8, dtype=torch.bfloat16)], BF16)
    out, out_d = torch.empty(0), torch.empty(0, device="tpu")
    torch.ops.aten.avg_pool2d.out(randn(1, 2, 6, 6), [2, 2], [2, 2], [0, 0], out=out)
    torch.ops.aten.avg_pool2d.out(randn(1, 2, 6, 6).to("tpu"), [2, 2], [2, 2], [0, 0], out=out_d)
    torch.testing.assert_close(out_d.cpu(), out, **F32)


@pytest.mark.parametrize("size", [(1, 1), (3, 4), (4, 3), (10, 11), (1, 5)])
def test_adaptive_avg_pool2d(mode, no_fallback, size):
    check(lambda x: F.adaptive_avg_pool2d(x, size), [randn(2, 3, 9, 8)], F32)
    check(lambda x: F.adaptive_avg_pool2d(x, size), [randn(3, 9, 8, seed=1)], F32)


def test_adaptive_avg_pool2d_bfloat16(mode, no_fallback):
    check(lambda x: F.adaptive_avg_pool2d(x, (4, 3)), [randn(2, 3, 9, 8, dtype=torch.bfloat16)], BF16)


@pytest.mark.parametrize("size", [(1, 1), (3, 4), (4, 3), (10, 11), (1, 5), (9, 8)])
def test_adaptive_max_pool2d(mode, no_fallback, size):
    fn = lambda x: F.adaptive_max_pool2d(x, size, return_indices=True)  # noqa: E731
    check(fn, [randn(2, 3, 9, 8)], EXACT, grad_tol=F32)
    check(fn, [randn(3, 9, 8, seed=1)], EXACT, grad_tol=F32)
    check(lambda x: F.adaptive_max_pool1d(x, size[1], return_indices=True), [randn(2, 3, 8)], EXACT, grad_tol=F32)


def test_adaptive_max_pool2d_ties_nan_bfloat16_and_out(mode, no_fallback):
    # Ties: the first maximum in scan order; NaN: the last NaN of the window (CPU's rule).
    x = torch.randint(0, 3, (2, 2, 7, 9), generator=torch.Generator().manual_seed(2)).float()
    x[0, 0, 0, 2] = x[0, 0, 1, 0] = x[1, 1, 5, 5] = float("nan")
    x[1, 0, :3, :3] = -float("inf")
    for size in [(1, 1), (3, 4), (2, 2)]:
        check(lambda x: F.adaptive_max_pool2d(x, size, return_indices=True), [x], EXACT, grad_tol=F32)
    check(lambda x: F.adaptive_max_pool2d(x, (3, 5), return_indices=True),
          [randn(2, 3, 8, 8, dtype=torch.bfloat16)], EXACT, grad_tol=BF16)
    x, g = randn(2, 3, 9, 8), randn(2, 3, 4, 3, seed=1)
    results = []
    for dev in ("cpu", "tpu"):
        out, idx = torch.empty(0, device=dev), torch.empty(0, dtype=torch.long, device=dev)
        torch.ops.aten.adaptive_max_pool2d.out(x.to(dev), [4, 3], out=out, indices=idx)
        gi = torch.empty(0, device=dev)
        torch.ops.aten.adaptive_max_pool2d_backward.grad_input(g.to(dev), x.to(dev), idx, grad_input=gi)
        results.append((out.cpu(), idx.cpu(), gi.cpu()))
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, **EXACT)


def test_pooling_errors_match_cpu():
    x = randn(1, 1, 4, 4)
    for fn, args, err in [(F.max_pool2d, (x, 2, 2, 2), RuntimeError), (F.avg_pool2d, (x, 5), RuntimeError),
                          (F.adaptive_avg_pool2d, (x.long(), 2), NotImplementedError),
                          (F.adaptive_max_pool2d, (x.long(), 2), NotImplementedError),
                          (F.adaptive_max_pool2d, (x[:, :, :0], 2), RuntimeError)]:
        with pytest.raises(err) as cpu_err:
            fn(*args)
        with pytest.raises(err) as dev_err:
            fn(args[0].to("tpu"), *args[1:])
        assert str(dev_err.value) == str(cpu_err.value)


# --- batch norm --------------------------------------------------------------------------------

def _bn_pair(make):
    torch.manual_seed(0)
    cpu = make()
    with torch.no_grad():
        for p in cpu.parameters():
            p.uniform_(0.5, 1.5)
    dev = make().to("tpu")
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev


def _compare_modules(cpu, dev, tol):
    for (name, a), b in zip(cpu.state_dict().items(), dev.state_dict().values()):
        torch.testing.assert_close(b.cpu(), a, **tol, msg=name)


@pytest.mark.parametrize("make,shape", [
    (lambda: nn.BatchNorm2d(3), (4, 3, 5, 6)),
    (lambda: nn.BatchNorm2d(3, momentum=None), (4, 3, 5, 6)),  # cumulative average
    (lambda: nn.BatchNorm1d(5, affine=False), (6, 5)),
    (lambda: nn.BatchNorm1d(5), (3, 5, 7)),
    (lambda: nn.BatchNorm2d(3, track_running_stats=False), (2, 3, 4, 4)),
])
def test_batch_norm_training_and_eval(mode, no_fallback, make, shape):
    cpu, dev = _bn_pair(make)
    for step in range(2):
        x = randn(*shape, seed=step) * 2 + 0.5
        xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
        yc, yd = cpu(xc), dev(xd)
        torch.testing.assert_close(yd.cpu(), yc, **F32)
        g = randn(*shape, seed=10 + step)
        yc.backward(g)
        yd.backward(g.to("tpu"))
        torch.testing.assert_close(xd.grad.cpu(), xc.grad, **F32)
        for pc, pd in zip(cpu.parameters(), dev.parameters()):
            torch.testing.assert_close(pd.grad.cpu(), pc.grad, **F32)
        _compare_modules(cpu, dev, F32)  # running_mean, running_var, num_batches_tracked
    cpu.eval()
    dev.eval()
    check(lambda x: dev(x) if x.device.type == "tpu" else cpu(x), [randn(*shape, seed=5)], F32)


def test_batch_norm_bfloat16(mode, no_fallback):
    # bfloat16 input with float32 parameters and statistics (mixed, as under autocast), and a
    # module converted to bfloat16.
    cpu, dev = _bn_pair(lambda: nn.BatchNorm2d(3))
    x = randn(4, 3, 5, 6, dtype=torch.bfloat16)
    check(lambda x: dev(x) if x.device.type == "tpu" else cpu(x), [x], BF16)
    _compare_modules(cpu, dev, F32)
    cpu, dev = cpu.bfloat16(), dev.bfloat16()
    check(lambda x: dev(x) if x.device.type == "tpu" else cpu(x), [x], BF16)
    _compare_modules(cpu, dev, BF16)


def test_batch_norm_aten_variants(mode, no_fallback):
    x, w, b = randn(3, 4, 5, 2), randn(4, seed=1), randn(4, seed=2)
    rm, rv = randn(4, seed=3), randn(4, seed=4).abs() + 0.5
    gy = randn(3, 4, 5, 2, seed=5)

    def run(device):
        t = [v.to(device) for v in (x, w, b, rm.clone(), rv.clone(), gy)]
        x_, w_, b_, rm_, rv_, gy_ = t
        outs = list(torch.ops.aten._native_batch_norm_legit(x_, w_, b_, rm_, rv_, True, 0.2, 1e-3))
        outs += list(torch.ops.aten._native_batch_norm_legit.no_stats(x_, w_, b_, True, 0.2, 1e-3))
        outs += list(torch.ops.aten._native_batch_norm_legit_no_training(x_, w_, b_, rm_, rv_, 0.2, 1e-3))
        upd = torch.ops.aten._batch_norm_with_update(x_, w_, b_, rm_, rv_, 0.2, 1e-3)
        outs += list(upd[:3])
        outs += list(torch.ops.aten.batch_norm_backward(gy_, x_, w_, rm_, rv_, upd[1], upd[2], True, 1e-3,
                                                        [True, True, True], upd[3]))
        outs += list(torch.ops.aten.native_batch_norm_backward(gy_, x_, w_, rm_, rv_, None, None, False, 1e-3,
                                                               [True, True, True]))
        return [o.cpu() for o in outs] + [rm_.cpu(), rv_.cpu()]

    for a, c in zip(run("tpu"), run("cpu")):
        torch.testing.assert_close(a, c, **F32)


def test_batch_norm_out_variants_update_running_stats(mode, no_fallback):
    # The schema does not mark running_mean/var mutable, but CPU updates them in place.
    x, w, b = randn(3, 4, 5), randn(4, seed=1), randn(4, seed=2)
    rm, rv = randn(4, seed=3), randn(4, seed=4).abs() + 0.5

    def run(device):
        x_, w_, b_, rm_, rv_ = (v.to(device) for v in (x, w, b, rm.clone(), rv.clone()))
        outs = [torch.empty(0, device=device) for _ in range(3)]
        torch.ops.aten.native_batch_norm.out(x_, w_, b_, rm_, rv_, True, 0.3, 1e-3, out=outs[0],
                                             save_mean=outs[1], save_invstd=outs[2])
        legit = [torch.empty(0, device=device) for _ in range(3)]
        torch.ops.aten._native_batch_norm_legit.out(x_, w_, b_, rm_, rv_, True, 0.3, 1e-3, out=legit[0],
                                                    save_mean=legit[1], save_invstd=legit[2])
        return [t.cpu() for t in outs + legit + [rm_, rv_]]

    for a, c in zip(run("tpu"), run("cpu")):
        torch.testing.assert_close(a, c, **F32)


@pytest.mark.parametrize("shape", [(5, 5, 5), (1, 25, 5), (3, 2, 3, 4)])
def test_batch_norm_bfloat16_accuracy(mode, no_fallback, shape):
    # CPU's bfloat16 kernels normalize with bfloat16-rounded statistics on some shapes and layouts
    # (and round every step when the input is not contiguous); ours normalizes in float32 and
    # rounds once: never further from the float64 result than CPU's, plus one bfloat16 ulp.
    x = (randn(*shape) * 0.3 + 2).bfloat16()  # a mean large against the spread
    w, b = randn(shape[1], seed=1).bfloat16(), randn(shape[1], seed=2).bfloat16()
    ref = F.batch_norm(x.double(), None, None, w.double(), b.double(), training=True, eps=0.5)
    for xs in (x, x.transpose(0, 1).contiguous().transpose(0, 1)):
        cpu = F.batch_norm(xs, None, None, w, b, training=True, eps=0.5).double()
        dev = F.batch_norm(xs.to("tpu"), None, None, w.to("tpu"), b.to("tpu"), training=True, eps=0.5).cpu().double()
        ulp = ref.abs() * 2 ** -8 + 1e-5
        assert ((dev - ref).abs() <= (cpu - ref).abs() + ulp).all()


def test_batch_norm_errors_match_cpu():
    x = randn(2, 3).long()
    with pytest.raises(NotImplementedError) as cpu_err:
        F.batch_norm(x, None, None, training=True)
    with pytest.raises(NotImplementedError) as dev_err:
        F.batch_norm(x.to("tpu"), None, None, training=True)
    assert str(dev_err.value) == str(cpu_err.value)


# --- group norm --------------------------------------------------------------------------------

@pytest.mark.parametrize("groups,channels,shape,affine", [
    (2, 6, (3, 6, 5, 4), True),
    (6, 6, (2, 6, 7), True),  # instance-norm-like
    (1, 4, (2, 4, 3, 3), False),
])
def test_group_norm(mode, no_fallback, groups, channels, shape, affine):
    cpu, dev = _bn_pair(lambda: nn.GroupNorm(groups, channels, affine=affine))
    x = randn(*shape) * 3 - 1
    xc, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    yc, yd = cpu(xc), dev(xd)
    torch.testing.assert_close(yd.cpu(), yc, **F32)
    g = randn(*shape, seed=3)
    yc.backward(g)
    yd.backward(g.to("tpu"))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, **F32)
    for pc, pd in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, **F32)


def test_group_norm_bfloat16(mode, no_fallback):
    w, b = randn(6, seed=1), randn(6, seed=2)
    x = randn(2, 6, 4, 4, dtype=torch.bfloat16)
    check(lambda x, w, b: F.group_norm(x, 3, w, b), [x, w, b], BF16)  # mixed: float32 parameters
    check(lambda x, w, b: F.group_norm(x, 3, w, b), [x, w.bfloat16(), b.bfloat16()], BF16)
