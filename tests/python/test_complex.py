"""complex64 / complex128 on the device (Note [Complex tensors] in csrc/torch/lower/complex_util.h):
storage and copies, view_as_real / view_as_complex / .real / .imag as views of one buffer, lazy
conjugates, elementwise arithmetic, polar / complex, sum / mean, Meta-style rotary embeddings
forward and backward, and the FFTs through the CPU fallback -- against PyTorch's CPU results in
every eager mode.

Tolerances: complex64 at torch.testing's defaults (rtol 1.3e-6, atol 1e-5), except the
transcendental functions (exp, log, sqrt, sgn, abs of large values), whose float32 formulas over
the parts differ from the CPU's complex kernels by a few ulp (rtol 1e-5); complex128 exact to
float64 defaults.
"""
import warnings

import pytest
import torch

import torch_tpu
from conftest import check_same

C64 = torch.complex64


def crand(*shape, dtype=C64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_storage_and_copies(mode, dtype):
    x = crand(3, 5, dtype=dtype)
    d = x.to("tpu")
    assert d.dtype == dtype and d.device.type == "tpu"
    torch.testing.assert_close(d.cpu(), x, rtol=0, atol=0)
    torch.testing.assert_close(d.clone().cpu(), x, rtol=0, atol=0)
    torch.testing.assert_close(d.t().contiguous().cpu(), x.t().contiguous(), rtol=0, atol=0)
    torch.testing.assert_close(d[1:, ::2].cpu(), x[1:, ::2], rtol=0, atol=0)
    other = torch.complex64 if dtype == torch.complex128 else torch.complex128
    torch.testing.assert_close(d.to(other).cpu(), x.to(other))
    r = torch.randn(4, 2)
    torch.testing.assert_close(r.to("tpu").to(dtype).cpu(), r.to(dtype), rtol=0, atol=0)
    empty = torch.zeros(2, 3, dtype=dtype, device="tpu")
    empty[0] = d[0, :3]
    torch.testing.assert_close(empty.cpu()[0], x[0, :3], rtol=0, atol=0)
    d.fill_(1 + 2j)
    assert torch.equal(d.cpu(), torch.full((3, 5), 1 + 2j, dtype=dtype))
    d.zero_()
    assert torch.equal(d.cpu(), torch.zeros(3, 5, dtype=dtype))


def test_complex_to_real_discards_the_imaginary_part(mode):
    x = crand(6)
    with warnings.catch_warnings():  # both warn once per process ("discards the imaginary part")
        warnings.simplefilter("ignore")
        expected = x.to(torch.float32)
        actual = x.to("tpu").to(torch.float32).cpu()
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_views_share_the_buffer(mode):
    x = crand(4, 3).to("tpu")
    r = torch.view_as_real(x)
    assert r.shape == (4, 3, 2) and r.dtype == torch.float32
    assert r.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert r.stride() == (6, 2, 1)
    r[0, 0, 1] = 7.0  # writes through the view
    assert x[0, 0].item().imag == 7.0
    back = torch.view_as_complex(r)
    assert back.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    x.real[1] = 0.5
    x.imag[2] = -0.25
    cpu = x.cpu()
    assert torch.all(cpu.real[1] == 0.5) and torch.all(cpu.imag[2] == -0.25)
    torch.testing.assert_close(x.real.cpu(), cpu.real)
    f = torch.randn(2, 5, 2).to("tpu")
    torch.testing.assert_close(torch.view_as_complex(f).cpu(), torch.view_as_complex(f.cpu()), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="stride"):
        torch.view_as_complex(torch.randn(2, 2, 5).to("tpu").transpose(1, 2))


def test_lazy_conjugates_are_resolved(mode):
    x = crand(5)
    check_same(lambda t: t.conj().clone(), x)
    check_same(lambda t: t.conj() * 2, x)
    check_same(lambda t: torch.conj_physical(t), x)
    check_same(lambda t: t.conj().resolve_conj(), x)
    assert x.to("tpu").conj().is_conj()
    torch.testing.assert_close(x.to("tpu").conj().cpu(), x.conj())


def test_conj_physical_in_place(mode, no_fallback):
    """conj_physical_ (ATen's runs a DispatchStub with no tpu kernel: an internal assert before),
    on a whole tensor, through a strided view of one, and on a real tensor (a no-op)."""
    def f(t):
        t = t.clone()
        t.conj_physical_()
        t[:, 1].conj_physical_()
        return t
    check_same(f, crand(4, 3))
    check_same(lambda t: t.clone().conj_physical_(), torch.randn(5))


BINARY = [torch.add, torch.sub, torch.mul, torch.div, torch.eq, torch.ne]


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
def test_binary(mode, no_fallback, op):
    a, b = crand(4, 6, seed=1), crand(4, 6, seed=2)
    check_same(op, a, b)
    check_same(op, a, b[:1])  # broadcast
    check_same(op, a, torch.randn(4, 6))  # real and complex
    check_same(op, torch.randn(6), a)
    check_same(lambda x: op(x, 2 - 0.5j), a)  # a Python complex number
    check_same(lambda x: op(x, 3), a)


def test_add_sub_alpha_and_inplace(mode, no_fallback):
    a, b = crand(7, seed=3), crand(7, seed=4)
    check_same(lambda x, y: torch.add(x, y, alpha=2), a, b)
    check_same(lambda x, y: torch.sub(x, y, alpha=1 - 1j), a, b)

    def inplace(x, y):
        x = x.clone()
        x.mul_(y)
        x.add_(y, alpha=0.5j)
        x.div_(2 + 1j)
        return x

    check_same(inplace, a, b)


def test_division_by_small_and_zero_divisors(mode):
    a = torch.tensor([1 + 1j, 1e30 + 1e30j, 0j, 1 + 0j, 3 - 4j], dtype=C64)
    b = torch.tensor([1e-30 + 1e-30j, 1e30 - 1e30j, 0j, 0j, 0 + 2j], dtype=C64)
    check_same(torch.div, a, b)


UNARY = [
    (torch.neg, {}), (torch.conj_physical, {}), (torch.reciprocal, {}), (torch.abs, {}),
    (torch.angle, {}), (torch.exp, dict(rtol=1e-5, atol=1e-5)), (torch.log, dict(rtol=1e-5, atol=1e-5)),
    (torch.sqrt, dict(rtol=1e-5, atol=1e-5)), (torch.sgn, dict(rtol=1e-5, atol=1e-5)),
]


@pytest.mark.parametrize("op,tol", UNARY, ids=lambda v: getattr(v, "__name__", ""))
def test_unary(mode, no_fallback, op, tol):
    x = crand(5, 4, seed=5)
    x[0, 0] = 0
    x[0, 1] = -2 + 0j  # the branch cut of sqrt and log
    x[0, 2] = 3e20 + 4e20j  # |x| past float32's sqrt(max): needs the scaled form
    check_same(op, x, **tol)
    check_same(op, x.to(torch.complex128))


def test_real_angle(mode, no_fallback):
    check_same(torch.angle, torch.tensor([-2.0, 0.0, 3.0, float("nan"), -0.0]))
    check_same(torch.angle, torch.tensor([-2, 0, 5]))


def test_polar_and_complex(mode, no_fallback):
    r, theta = torch.rand(3, 4), torch.randn(3, 4)
    check_same(torch.polar, r, theta)
    check_same(torch.complex, r, theta)
    check_same(torch.polar, r.double(), theta.double())
    check_same(lambda a, b: torch.complex(a, b[:1]), r, theta)
    with pytest.raises(RuntimeError, match="Expected both inputs to be"):
        torch.polar(torch.ones(3, 4, dtype=torch.int32, device="tpu"), theta.to("tpu"))


def test_sum_and_mean(mode, no_fallback):
    x = crand(3, 4, 5, seed=6)
    check_same(torch.sum, x)
    check_same(lambda t: t.sum(dim=1), x)
    check_same(lambda t: t.sum(dim=(0, 2), keepdim=True), x)
    check_same(lambda t: t.mean(dim=-1), x)
    check_same(lambda t: t.conj().sum(0), x)


def test_gather(mode, no_fallback):
    # What a complex rotary cache's lookup does (torchtitan's Llama 3): gather along a dim,
    # also of a lazy conjugate.
    x = crand(8, 4)
    idx = torch.tensor([3, 0, 5, 5]).view(4, 1).expand(4, 4)
    check_same(lambda t, i: torch.gather(t, 0, i), x, idx)
    check_same(lambda t, i: torch.gather(t.conj(), 1, i), x, torch.tensor([[1, 0], [3, 3], [2, 2]]))


def test_unsupported_op_says_so():
    x = crand(3).to("tpu")
    with pytest.raises(NotImplementedError, match="aten::tanh does not support complex"):
        torch.tanh(x)
    with pytest.raises(RuntimeError, match="torch.sgn"):
        torch.sign(x)


@pytest.mark.parametrize("op", [torch.all, torch.count_nonzero, torch.nonzero, torch.var,
                                torch.linalg.vector_norm], ids=lambda f: f.__name__)
def test_a_lowering_without_complex_support_refuses_by_name(op):
    """Lowerings that do not handle complex inputs refuse them with the op's name and dtype, never
    an internal error from a program built for real values (the OpInfo walk found 27 such)."""
    x = crand(4).to("tpu")
    with pytest.raises(NotImplementedError, match=r"aten::\w+: complex64 inputs are not supported by this op"):
        op(x)
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]


def test_fft_runs_through_the_fallback(mode):
    x = torch.randn(4, 16)
    check_same(torch.fft.fft, x, rtol=1e-5, atol=1e-5)
    check_same(torch.fft.rfft, x, rtol=1e-5, atol=1e-5)
    check_same(lambda t: torch.fft.ifft(torch.fft.fft(t)).real, x, rtol=1e-5, atol=1e-5)
    check_same(torch.fft.fftn, crand(4, 8), rtol=1e-5, atol=1e-5)


# ---- Meta-style rotary embeddings (Llama's apply_rotary_emb) --------------------------------------
def rope_frequencies(dim, seqlen, theta=10000.0, device=None):
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device)[: dim // 2].float() / dim))
    angles = torch.outer(torch.arange(seqlen, device=device, dtype=torch.float32), inv)
    return torch.polar(torch.ones_like(angles), angles)  # complex64 [seqlen, dim / 2]


def apply_rotary(xq, xk, freqs_cis):
    q = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    k = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs_cis.view(1, q.shape[1], 1, q.shape[-1])
    q_out = torch.view_as_real(q * f).flatten(3)
    k_out = torch.view_as_real(k * f).flatten(3)
    return q_out.type_as(xq), k_out.type_as(xk)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_embedding_forward_and_backward(mode, no_fallback, dtype):
    bsz, seqlen, heads, head_dim = 2, 6, 3, 8
    g = torch.Generator().manual_seed(7)
    xq = torch.randn(bsz, seqlen, heads, head_dim, generator=g).to(dtype)
    xk = torch.randn(bsz, seqlen, heads, head_dim, generator=g).to(dtype)
    w = torch.randn(bsz, seqlen, heads, head_dim, generator=g)

    def run(device):
        q = xq.clone().to(device).requires_grad_()
        k = xk.clone().to(device).requires_grad_()
        freqs = rope_frequencies(head_dim, seqlen * 2, device=device)[:seqlen]
        q_out, k_out = apply_rotary(q, k, freqs)
        loss = (q_out.float() * w.to(device)).sum() + (k_out.float() ** 2).sum()
        loss.backward()
        return q_out.detach().cpu(), k_out.detach().cpu(), q.grad.cpu(), k.grad.cpu(), freqs.cpu()

    expected = run("cpu")
    actual = run("tpu")
    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a, e, **tol)
