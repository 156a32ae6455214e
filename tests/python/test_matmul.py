"""Matrix products (mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, vdot) and the composites that
must reach them natively (torch.matmul, nn.functional.linear), against PyTorch's CPU results.

Tolerances: for K <= 256 the host executor's oneDNN product and PyTorch's CPU product agree to the
bit here, and the float32 defaults (rtol 1.3e-6, atol 1e-5) hold with room. For longer
contractions the two libraries block the sum differently; test_long_contraction_float32 bounds the
difference element-wise by 2 * sqrt(K) * eps * (|A| @ |B|), the usual probabilistic bound for a
reordered float32 sum of K products. bfloat16 products accumulate in float32 and round once, so
they differ by at most one bfloat16 rounding (2^-8 relative) where summation order flips it,
inside bfloat16's default rtol of 1.6e-2.
"""
import pytest
import torch
import torch.nn.functional as F

from conftest import check_same, to_cpu

def rand(*shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(-5, 6, shape, dtype=dtype)


# ---- mm -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64,
                                   torch.int32, torch.int8])
def test_mm_dtypes(mode, no_fallback, dtype):
    a, b = rand(7, 9, dtype=dtype), rand(9, 5, dtype=dtype)
    check_same(torch.mm, a, b)


@pytest.mark.parametrize("layout", ["tt", "tn", "nt", "sliced", "expanded"])
def test_mm_strided_views(mode, no_fallback, layout):
    # Transposed, sliced and broadcast operands are bound as views, never copied by the lowering.
    a, b = rand(6, 8), rand(8, 4)
    if layout == "tt":
        fn = lambda x, y: x.t().contiguous().t() @ y.t().contiguous().t()  # noqa: E731
    elif layout == "tn":
        fn = lambda x, y: torch.mm(y.t(), x.t())  # noqa: E731
    elif layout == "nt":
        fn = lambda x, y: torch.mm(x, x.t())  # noqa: E731
    elif layout == "sliced":
        fn = lambda x, y: torch.mm(x[1:5, ::2], y[::2, 1:])  # noqa: E731
    else:
        fn = lambda x, y: torch.mm(x[:1].expand(3, 8), y)  # noqa: E731
    check_same(fn, a, b)


@pytest.mark.parametrize("k", [32, 33])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_mm_transposed_operands(mode, no_fallback, k, ta, tb):
    # Every transposition of both operands (bound as strided views), as mm and as a batched
    # product with a broadcast lhs: each layout is its own cached oneDNN primitive.
    a = rand(k, 32).t() if ta else rand(32, k)
    b = rand(32, k).t() if tb else rand(k, 32)
    check_same(torch.mm, a, b)
    check_same(torch.bmm, a.expand(3, -1, -1), b.expand(3, -1, -1).contiguous())


def test_mm_out_and_empty(mode, no_fallback):
    a, b = rand(3, 4), rand(4, 5)
    check_same(lambda x, y, o: torch.mm(x, y, out=o), a, b, torch.empty(0))
    check_same(lambda x, y, o: (torch.mm(x, y, out=o[:, 1:6]), o)[1], a, b, torch.zeros(3, 7))  # strided out=
    check_same(torch.mm, rand(0, 4), rand(4, 5))
    check_same(torch.mm, rand(3, 0), rand(0, 5))  # empty contraction: zeros


def test_long_contraction_float32(mode, no_fallback):
    k = 2048
    a, b = rand(16, k), rand(k, 24)
    actual = (a.to("tpu") @ b.to("tpu")).cpu()
    expected = a @ b
    bound = 2 * k ** 0.5 * torch.finfo(torch.float32).eps * (a.abs() @ b.abs())
    assert ((actual - expected).abs() <= bound).all()


# ---- addmm and friends -----------------------------------------------------------------------
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1), (0, -1.5)])
@pytest.mark.parametrize("bias_shape", [(4, 5), (5,), (4, 1), ()])
def test_addmm(mode, no_fallback, beta, alpha, bias_shape):
    check_same(lambda c, x, y: torch.addmm(c, x, y, beta=beta, alpha=alpha), rand(*bias_shape), rand(4, 3), rand(3, 5))


def test_addmm_beta_zero_ignores_nan(mode, no_fallback):
    bias = torch.full((2, 2), float("nan"))
    check_same(lambda c, x, y: torch.addmm(c, x, y, beta=0), bias, rand(2, 3), rand(3, 2))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64])
def test_addmm_dtypes(mode, no_fallback, dtype):
    check_same(lambda c, x, y: torch.addmm(c, x, y, beta=2, alpha=3), rand(5, dtype=dtype), rand(4, 3, dtype=dtype),
               rand(3, 5, dtype=dtype))


def test_addmm_inplace_and_out(mode, no_fallback):
    c, x, y = rand(4, 5), rand(4, 3), rand(3, 5)
    check_same(lambda c, x, y: c.clone().addmm_(x, y, beta=0.5, alpha=2), c, x, y)
    check_same(lambda c, x, y: c.t().contiguous().t().addmm_(x, y), c, x, y)  # in-place on a strided tensor
    check_same(lambda c, x, y, o: torch.addmm(c, x, y, out=o), c, x, y, torch.empty(4, 5))


def test_baddbmm_addbmm(mode, no_fallback):
    b1, b2 = rand(3, 4, 6), rand(3, 6, 5)
    check_same(lambda c, x, y: torch.baddbmm(c, x, y, beta=0.5, alpha=2), rand(4, 5), b1, b2)
    check_same(lambda c, x, y: c.clone().baddbmm_(x, y), rand(3, 4, 5), b1, b2)
    check_same(lambda c, x, y, o: torch.baddbmm(c, x, y, out=o), rand(1, 5), b1, b2, torch.empty(0))
    check_same(lambda c, x, y: torch.addbmm(c, x, y, beta=0.5, alpha=2), rand(4, 5), b1, b2)
    check_same(lambda c, x, y: torch.addbmm(c, x.transpose(1, 2), y.transpose(1, 2), beta=0), rand(6, 6),
               rand(3, 4, 6), rand(3, 6, 4))
    check_same(lambda c, x, y: c.clone().addbmm_(x, y), rand(4, 5), b1, b2)
    check_same(lambda c, x, y, o: torch.addbmm(c, x, y, out=o), rand(5), b1, b2, torch.empty(4, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_bmm(mode, no_fallback, dtype):
    a, b = rand(3, 4, 6, dtype=dtype), rand(3, 6, 5, dtype=dtype)
    check_same(torch.bmm, a, b)
    check_same(lambda x, y: torch.bmm(x.transpose(1, 2), y.transpose(1, 2)), b, a)  # transposed batches
    check_same(lambda x, y: torch.bmm(x.permute(1, 0, 2), y[:1].expand(3, 6, 5)), rand(4, 3, 6, dtype=dtype), b)
    check_same(lambda x, y, o: torch.bmm(x, y, out=o), a, b, torch.empty(0, dtype=dtype))


def test_mv_addmv_dot(mode, no_fallback):
    m, v, w = rand(4, 6), rand(6), rand(6)
    check_same(torch.mv, m, v)
    check_same(lambda m, v: torch.mv(m.t(), v[:4]), m, v)
    check_same(lambda c, m, v: torch.addmv(c, m, v, beta=0.5, alpha=-1), rand(4), m, v)
    check_same(lambda c, m, v: torch.addmv(c, m, v), rand(1), m, v)
    check_same(lambda c, m, v: c.clone().addmv_(m, v, alpha=2), rand(4), m, v)
    check_same(lambda m, v, o: torch.mv(m, v, out=o), m, v, torch.empty(4))
    check_same(torch.dot, v, w)
    check_same(lambda v, w: torch.dot(v[::2], w[1::2]), v, w)
    check_same(torch.vdot, v, w)
    check_same(lambda v, w, o: torch.dot(v, w, out=o), v, w, torch.empty(()))
    check_same(torch.dot, rand(6, dtype=torch.int64), rand(6, dtype=torch.int64))
    check_same(torch.dot, rand(0), rand(0))


# ---- composites: torch.matmul, nn.functional.linear ------------------------------------------
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                                    ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                                    ((2, 3, 4), (4,)), ((4,), (2, 4, 3))])
def test_matmul_composite_is_native(mode, no_fallback, shapes):
    check_same(torch.matmul, rand(*shapes[0]), rand(*shapes[1]))


@pytest.mark.parametrize("in_shape", [(5, 4), (2, 3, 4), (2, 2, 3, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_is_native(mode, no_fallback, in_shape, bias):
    w, b = rand(6, 4), rand(6) if bias else None
    check_same(lambda x, w, b: F.linear(x, w, b), rand(*in_shape), w, b)


def test_linear_bfloat16(mode, no_fallback):
    check_same(lambda x, w, b: F.linear(x, w, b), rand(2, 3, 8, dtype=torch.bfloat16), rand(5, 8, dtype=torch.bfloat16),
               rand(5, dtype=torch.bfloat16))


# ---- gradients -----------------------------------------------------------------------------------
def _grads(fn, *args):
    """Runs fn on CPU and tpu with requires_grad inputs; returns (cpu grads, tpu grads)."""
    out = []
    for dev in ("cpu", "tpu"):
        leaves = [a.detach().to(dev).requires_grad_(a.is_floating_point()) for a in args]
        y = fn(*leaves)
        y.backward(torch.full_like(y, 0.5))
        out.append([to_cpu(leaf.grad) for leaf in leaves])
    return out


@pytest.mark.parametrize("case", ["mm", "bmm", "addmm", "linear3d", "matmul_bcast", "mv", "dot"])
def test_gradients(mode, no_fallback, case):
    fns = {
        "mm": (lambda a, b: a @ b, (rand(4, 3), rand(3, 5))),
        "bmm": (torch.bmm, (rand(2, 4, 3), rand(2, 3, 5))),
        "addmm": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2), (rand(4, 5), rand(4, 3), rand(3, 5))),
        "linear3d": (F.linear, (rand(2, 4, 3), rand(5, 3), rand(5))),
        "matmul_bcast": (torch.matmul, (rand(2, 1, 4, 3), rand(3, 3, 2))),
        "mv": (torch.mv, (rand(4, 3), rand(3))),
        "dot": (torch.dot, (rand(5), rand(5))),
    }
    fn, args = fns[case]
    cpu, tpu = _grads(fn, *args)
    for c, t in zip(cpu, tpu):
        torch.testing.assert_close(t, c)


# ---- errors: PyTorch's messages, raised by the call itself -----------------------------------
# Each case takes r(*shape, dtype=...), which makes a random tensor on the device under test.
ERROR_CASES = [
    (lambda r: torch.mm(r(2, 3), r(4, 5)), r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda r: torch.mm(r(2, 3), r(3)), "mat2 must be a matrix"),
    (lambda r: torch.mm(r(2, 3), r(3, 2, dtype=torch.float64)), "expected m1 and m2 to have the same dtype"),
    (lambda r: torch.matmul(r(2, 3), r(4, 5)), r"shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda r: F.linear(r(2, 3), r(5, 4)), r"shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda r: torch.bmm(r(2, 3, 4), r(3, 4, 5)),
     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\] but got: \[3, 4\]."),
    (lambda r: torch.bmm(r(3, 4), r(2, 5, 5)), "batch1 must be a 3D tensor"),
    (lambda r: torch.addmm(r(3), r(2, 3), r(3, 4)), "The expanded size of the tensor"),
    (lambda r: torch.addmm(r(4), r(2, 3), r(3, 4, dtype=torch.float64)), "self and mat2 must have the same dtype"),
    (lambda r: r(2, 2).addmm_(r(2, 3), r(3, 4)), "Bad in-place call"),
    (lambda r: torch.addbmm(r(2, 4), r(1, 2, 3), r(2, 3, 4)), "batch1 and batch2 must have same number"),
    (lambda r: torch.mv(r(2, 3), r(4)), r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda r: torch.mv(r(2, 3), r(3, 1)), r"vector \+ matrix @ vector expected, got 1, 2, 2"),
    (lambda r: torch.dot(r(3), r(4)), r"inconsistent tensor size, expected tensor \[3\] and src \[4\]"),
    (lambda r: torch.dot(r(3), r(3, 1)), "1D tensors expected, but got 1D and 2D tensors"),
    (lambda r: torch.mm(r(2, 3), r(3, 2), out=r(2, 2, dtype=torch.float64)),
     "Expected out tensor to have dtype float, but got double instead"),
    (lambda r: r(1, 5).expand(4, 5).addmm_(r(4, 3), r(3, 5)), "more than one element of the written-to tensor"),
    (lambda r: torch.mm(r(4, 3), r(3, 5), out=r(1, 5).expand(4, 5)), "more than one element of the written-to"),
]


@pytest.mark.parametrize("case", range(len(ERROR_CASES)))
def test_errors(mode, case):
    fn, msg = ERROR_CASES[case]
    with pytest.raises(RuntimeError, match=msg):  # PyTorch's own message, checked on the CPU
        fn(rand)
    with pytest.raises(RuntimeError, match=msg):  # raised by the call, in strict mode too
        fn(lambda *s, dtype=torch.float32: rand(*s, dtype=dtype).to("tpu"))
    check_same(torch.mm, rand(2, 3), rand(3, 2))  # the device still works


def test_bool_not_implemented(mode):
    a = torch.ones(2, 2, dtype=torch.bool, device="tpu")
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        torch.mm(a, a)


# ---- reduced precision on CPUs without AVX-512 --------------------------------------------------
CAPPED_ISA_SCRIPT = r"""
import torch, torch_tpu
import torch.nn.functional as F

torch.manual_seed(0)
bf = torch.bfloat16


def same(name, fn, *args, rtol=1.6e-2, atol=1e-5):
    cpu = fn(*args)
    dev = fn(*[a.to("tpu") for a in args]).cpu()
    torch.testing.assert_close(dev, cpu, rtol=rtol, atol=atol)
    # At least as accurate as one rounding of the exact product of the bf16 inputs (float64).
    exact = fn(*[a.double() for a in args])
    err = (dev.double() - exact).abs()
    eps = 2.0 ** -8 if dev.dtype == bf else 2.0 ** -11
    assert (err <= exact.abs() * eps + 1e-3).all(), (name, err.max().item())
    print(name, "ok")


a, b = torch.randn(33, 65).to(bf), torch.randn(65, 17).to(bf)
same("mm", torch.mm, a, b)
same("mm_f16", torch.mm, a.half(), b.half(), rtol=1e-3, atol=1e-3)
same("mm_transposed", lambda x, y: x @ y.t(), a, b.t().contiguous())
same("bmm", torch.bmm, torch.randn(3, 9, 40).to(bf), torch.randn(3, 40, 11).to(bf))
same("linear", F.linear, torch.randn(4, 6, 32).to(bf), torch.randn(24, 32).to(bf), torch.randn(24).to(bf))
x, w = torch.randn(2, 3, 12, 12).to(bf), torch.randn(8, 3, 3, 3).to(bf)
cpu = F.conv2d(x, w, padding=1)
dev = F.conv2d(x.to("tpu"), w.to("tpu"), padding=1).cpu()
torch.testing.assert_close(dev, cpu, rtol=1.6e-2, atol=1e-2)
print("conv2d ok")


# torch.autocast("tpu"): forward and backward of a small conv + linear model, against CPU autocast.
def model_and_grads(device, autocast_device):
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    lin = torch.nn.Linear(4 * 8 * 8, 10)
    conv.to(device), lin.to(device)
    inp = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(2)).to(device)
    with torch.autocast(autocast_device, dtype=bf):
        h = F.relu(conv(inp))
        out = lin(h.flatten(1))
    assert out.dtype == bf
    loss = out.float().square().mean()
    loss.backward()
    return [t.detach().cpu() for t in (out, loss, conv.weight.grad, lin.weight.grad, lin.bias.grad)]


for cpu_t, dev_t in zip(model_and_grads("cpu", "cpu"), model_and_grads("tpu", "tpu")):
    torch.testing.assert_close(dev_t, cpu_t, rtol=2e-2, atol=2e-2)
print("autocast ok")
"""


def test_reduced_precision_without_avx512():
    # ONEDNN_MAX_CPU_ISA=AVX2 hides AVX-512 from oneDNN (read at its first use, so a fresh process):
    # it then has no bf16/f16 matmul kernel, and the host executor computes through float32.
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2])] +
                                        [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-c", CAPPED_ISA_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["mm", "ok", "mm_f16", "ok", "mm_transposed", "ok", "bmm", "ok",
                                "linear", "ok", "conv2d", "ok", "autocast", "ok"]
