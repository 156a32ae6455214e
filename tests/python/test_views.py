"""Views and in-place semantics: every view shares the device buffer (storage offset and strides
as on CPU), in-place ops through views update the base, and copies/resize_/set_/as_strided behave
like the same sequence on CPU."""
from __future__ import annotations

import pytest
import torch

import torch_tpu
from conftest import check_same

VIEWS = {
    "slice": lambda a: a[1:, ::2],
    "slice_columns": lambda a: a[:, 1:3],
    "transpose": lambda a: a.transpose(0, 1),
    "t": lambda a: a.t(),
    "mT": lambda a: a.mT,
    "permute": lambda a: a.unsqueeze(0).permute(2, 0, 1),
    "expand": lambda a: a[:1].expand(3, 4),
    "select": lambda a: a.select(1, 2),
    "select_neg": lambda a: a[-1],
    "narrow": lambda a: a.narrow(1, 1, 2),
    "view": lambda a: a.view(12),
    "view_dtype": lambda a: a.view(torch.int32),
    "reshape": lambda a: a.reshape(2, 6),
    "flatten": lambda a: a.flatten(),
    "unflatten": lambda a: a.unflatten(1, (2, 2)),
    "unsqueeze": lambda a: a.unsqueeze(1),
    "squeeze": lambda a: a[:1].squeeze(0),
    "diagonal": lambda a: a.diagonal(),
    "diagonal_offset": lambda a: a.diagonal(1),
    "unfold": lambda a: a.unfold(1, 2, 1),
    "split": lambda a: a.split(2, 1)[1],
    "chunk": lambda a: a.chunk(3, 0)[2],
    "unbind": lambda a: a.unbind(1)[3],
    "movedim": lambda a: a.movedim(0, 1),
    "as_strided": lambda a: a.as_strided((2, 2), (1, 4), 1),
    "detach": lambda a: a.detach(),
    "alias": lambda a: torch.ops.aten.alias(a),
    "ellipsis_none": lambda a: a[..., None, 1:3],
}


def check_inplace(fn, *args):
    """check_same for functions that mutate their inputs: each side gets its own copy."""
    return check_same(lambda *a: fn(*[t.clone() for t in a]), *args)


@pytest.fixture
def base():
    x = torch.arange(12.0).reshape(3, 4)
    return x, x.to("tpu")


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_shares_storage(name, base, no_fallback):
    x, d = base
    fn = VIEWS[name]
    c, v = fn(x), fn(d)
    assert v.device == d.device
    assert v.shape == c.shape and v.stride() == c.stride()
    assert v.storage_offset() == c.storage_offset()
    assert v.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()
    assert v._base is d or v._base is d._base or name in ("detach", "alias")
    # data_ptr moves by the same number of bytes as on CPU
    assert v.data_ptr() - d.data_ptr() == c.data_ptr() - x.data_ptr()
    assert torch.equal(v.cpu(), c)


def test_view_of_view(base, no_fallback):
    x, d = base
    fn = lambda a: a.t()[1:, :2].unsqueeze(0).select(2, 1)  # noqa: E731
    c, v = fn(x), fn(d)
    assert (v.stride(), v.storage_offset()) == (c.stride(), c.storage_offset())
    assert torch.equal(v.cpu(), c)


def _inplace_through_views(a):
    a[:, 1].add_(1)
    a.t().mul_(2)
    a.diagonal().sub_(3)
    a[::2, ::2].zero_()
    a[1].fill_(-1.5)
    a.select(1, 3).div_(4)
    a[1:, 2:].pow_(2)
    a.view(-1)[5:7].mul_(10)
    return a


def test_inplace_through_views(mode, no_fallback):
    check_inplace(_inplace_through_views, torch.arange(12.0).reshape(3, 4))


def test_inplace_through_views_int(mode, no_fallback):
    def fn(a):
        a[:, ::2].add_(5)
        a.t()[1].mul_(-3)
        a.unsqueeze(0)[0, 2].sub_(a[0].clone())
        return a
    check_inplace(fn, torch.arange(12).reshape(3, 4))


def test_inplace_view_seen_by_other_views(mode, no_fallback):
    def fn(a):
        col = a[:, 2]
        row = a[1]
        col.add_(100)  # writes through one view ...
        return row.clone(), col.clone(), a.clone()  # ... are seen through the others
    check_inplace(fn, torch.zeros(3, 4))


def test_expanded_reads(mode, no_fallback):
    def fn(a):
        e = a[:1].expand(3, 4)
        return e + 1, e.t() * 2, (a[:, :1].expand(3, 4) - a)

    check_same(fn, torch.randn(3, 4))


def test_expanded_write_is_refused_like_cpu(mode):
    for dev in ("cpu", "tpu"):
        a = torch.zeros(4, device=dev)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            a[:1].expand(3).add_(1)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            a[:1].expand(3).copy_(torch.ones(3))
    # fill_ may write one element many times, as on CPU
    check_inplace(lambda a: (a[:1].expand(3).fill_(2.5), a)[1], torch.zeros(4))


def test_binary_op_views_as_inputs(mode, no_fallback):
    check_same(lambda a, b: a.t() + b[::2], torch.randn(5, 3), torch.randn(6, 5))
    check_same(lambda a: a[1:] * a[:-1], torch.randn(6, 2))
    check_same(lambda a: torch.where(a.t() > 0, a.t(), a[0]), torch.randn(4, 4))


def test_out_into_view(mode, no_fallback):
    def fn(a, b):
        out = torch.zeros(4, 6, device=a.device)
        torch.add(a, b, out=out[:, ::2])
        torch.mul(a, 2, out=out.t()[1::2].t())
        return out
    check_same(fn, torch.randn(4, 3), torch.randn(4, 3))


# ---- copies between views -----------------------------------------------------------------------
def test_copy_between_disjoint_views(mode, no_fallback):
    def fn(a):
        a[0].copy_(a[2])
        a[:, 0].copy_(a[:, 3])
        a[1, 1:3].copy_(a[2, 2:])
        return a
    check_inplace(fn, torch.randn(3, 4))


def test_copy_same_view_is_noop(mode, no_fallback):
    check_inplace(lambda a: a.copy_(a), torch.randn(5))
    check_inplace(lambda a: a[1:4].copy_(a[1:4]), torch.randn(5))


def test_copy_partial_overlap_refused_like_cpu(mode):
    for dev in ("cpu", "tpu"):
        a = torch.arange(10.0, device=dev)
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            a[2:8].copy_(a[0:6])
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            torch.add(a[0:5], 1, out=a[2:7])
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            a[1:].add_(a[:-1])
        assert torch.equal(a.cpu(), torch.arange(10.0))  # nothing was written


def test_copy_overlap_via_clone(mode, no_fallback):
    check_inplace(lambda a: a[1:].copy_(a[:-1].clone()), torch.arange(10.0))
    check_inplace(lambda a: a.t().copy_(a.clone()), torch.arange(16.0).reshape(4, 4))


def test_copy_with_dtype_and_broadcast(mode, no_fallback):
    def fn(a, b):
        a[:, 1:3].copy_(b)  # int -> float, broadcast (1, 2) -> (3, 2)
        return a
    check_inplace(fn, torch.zeros(3, 4), torch.tensor([[7, -2]]))


@pytest.mark.parametrize("make", [
    lambda d: d.t(),
    lambda d: d[:, 1::2],
    lambda d: d[1:, :3].t(),
    lambda d: d[:1].expand(5, 4),
    lambda d: d.unsqueeze(2).expand(3, 4, 2),
    lambda d: d.diagonal(),
])
def test_noncontiguous_to_cpu(make, no_fallback):
    x = torch.randn(3, 4)
    c, v = make(x), make(x.to("tpu"))
    got = v.cpu()
    assert torch.equal(got, c)
    # .cpu() keeps the layout for dense views (like torch.empty_like(preserve_format)) and is
    # contiguous otherwise — what PyTorch does for any device.
    assert got.stride() == torch.empty_like(c).stride()


def test_noncontiguous_from_cpu(mode, no_fallback):
    x = torch.randn(4, 6)
    d = torch.zeros(6, 4, device="tpu")
    d.t()[:, ::2].copy_(x[:, ::2])
    ref = torch.zeros(6, 4)
    ref.t()[:, ::2].copy_(x[:, ::2])
    assert torch.equal(d.cpu(), ref)
    assert torch.equal(x.t().to("tpu").cpu(), x.t())


# ---- resize_, set_, empty_strided, as_strided ---------------------------------------------------
def test_resize(mode):
    def fn(a):
        a.resize_(2, 3)
        first = a.clone()
        a.resize_(4, 4)  # grows: the first 6 elements are kept
        kept = a.view(-1)[:6].clone()
        a[2:].fill_(1)
        a.resize_(1)     # shrinks: the storage keeps its size
        return first, kept, a.clone(), torch.tensor(a.untyped_storage().nbytes())
    check_inplace(fn, torch.arange(6.0))


def test_resize_keeps_views_sharing(mode, no_fallback):
    x = torch.arange(4.0).to("tpu")
    x.resize_(8)
    x[4:].fill_(9)
    v = x[2:6]
    v.add_(1)
    assert x.cpu().tolist()[:6] == [0.0, 1.0, 3.0, 4.0, 10.0, 10.0]


def test_resize_channels_last():
    for dev in ("cpu", "tpu"):
        a = torch.empty(0, device=dev).resize_(2, 3, 4, 5, memory_format=torch.channels_last)
        assert a.stride() == (60, 1, 15, 3)


def test_set_storage(mode, no_fallback):
    def fn(a):
        b = torch.empty(0, device=a.device)
        b.set_(a.untyped_storage(), 2, (2, 2), (1, 2))
        b.add_(100)
        c = torch.empty(0, device=a.device).set_(a)
        c[0] = -1
        d = torch.empty(0, device=a.device).set_(a.untyped_storage())
        return a, b.clone(), torch.tensor([b.storage_offset(), c.storage_offset()]), d.clone()
    check_inplace(fn, torch.arange(6.0))


def test_set_empty():
    for dev in ("cpu", "tpu"):
        a = torch.ones(3, device=dev)
        a.set_()
        assert a.shape == (0,) and a.stride() == (1,) and a.untyped_storage().nbytes() == 0


def test_set_errors_like_cpu():
    for dev, other in (("cpu", "tpu"), ("tpu", "cpu")):
        storage = torch.ones(4, device=dev).untyped_storage()
        with pytest.raises(RuntimeError, match="invalid storage offset -1"):
            torch.empty(0, device=dev).set_(storage, -1, (2,), (1,))
        with pytest.raises(RuntimeError, match="unequal size length"):
            torch.empty(0, device=dev).set_(storage, 0, (2, 2), (1,))
        with pytest.raises(RuntimeError, match=f"to a storage on different device \"{other}"):
            torch.empty(0, device=dev).set_(torch.ones(2, device=other).untyped_storage())


def test_set_tensor_shares(mode, no_fallback):
    a = torch.arange(6.0).to("tpu")
    b = torch.empty(0, device="tpu").set_(a[1:])
    b.mul_(2)
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr() and b.storage_offset() == 1
    assert a.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_set_grows_storage():
    for dev in ("cpu", "tpu"):
        a = torch.arange(4.0, device=dev)
        b = torch.empty(0, device=dev).set_(a.untyped_storage(), 0, (8,), (1,))
        assert b.untyped_storage().nbytes() >= 32
        assert b[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_empty_strided(no_fallback):
    for size, stride in [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((4, 2, 3), (1, 12, 4)), ((2, 2), (0, 1))]:
        c = torch.empty_strided(size, stride)
        v = torch.empty_strided(size, stride, device="tpu")
        assert v.stride() == c.stride() and v.untyped_storage().nbytes() == c.untyped_storage().nbytes()
    t = torch.empty_strided((2, 3), (1, 2), device="tpu").copy_(torch.arange(6.0).view(2, 3))
    assert t.cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_as_strided(mode, no_fallback):
    def fn(a):
        w = a.as_strided((3, 3), (2, 1), 1)   # overlapping windows (read-only use)
        s = a.as_strided((2, 2), (4, 1), 5)
        s.mul_(-1)                            # in-place through as_strided writes the base
        return w + 0, a
    check_inplace(fn, torch.arange(12.0))
    d = torch.arange(12.0).to("tpu")
    assert d.as_strided((2,), (3,), 2).storage_offset() == 2


def test_unfold_view(mode, no_fallback):
    def fn(a):
        u = a.unfold(0, 3, 2)
        u[:, 0].add_(10)  # writes through the unfold view, as on CPU
        return u + 0, a
    check_inplace(fn, torch.arange(9.0))


def test_views_bfloat16_and_bool(mode, no_fallback):
    check_inplace(lambda a: (a.t()[1:].mul_(2), a)[1], torch.randn(4, 3).bfloat16())
    check_inplace(lambda a: (a[::2].logical_not_(), a)[1], torch.tensor([True, False, True, True]))


def test_view_gradients(mode):
    x = torch.randn(4, 3, requires_grad=True)
    d = x.detach().to("tpu").requires_grad_()
    for t in (x, d):
        y = t.t()[1:, :2] * t[:2, 1:].t()
        (y * 3 - t.unsqueeze(0).expand(2, 4, 3)[1].t()[1:, 1:3]).pow(2).mean().backward()
    torch.testing.assert_close(d.grad.cpu(), x.grad)


def test_storage_methods():
    d = torch.arange(6.0).to("tpu")
    s = d.untyped_storage()
    assert s.device == torch.device("tpu:0") and s.nbytes() == 24
    back = s.cpu()
    assert back.device.type == "cpu" and back.nbytes() == 24
    assert torch.equal(torch.empty(0).set_(back), torch.arange(6.0))
    u = torch.UntypedStorage(16).tpu()
    assert u.device == torch.device("tpu:0") and u.nbytes() == 16
    s2 = torch.ones(2, device="tpu").untyped_storage()
    s2.resize_(64)
    assert s2.nbytes() == 64
