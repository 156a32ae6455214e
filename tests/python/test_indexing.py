"""index_select, gather, scatter*, advanced indexing (index / index_put_) and embedding backward:
CPU vs tpu in both eager modes, plus the data-dependent out-of-range errors."""
import pytest
import torch
import torch.nn.functional as F

from conftest import check_same, to_tpu

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def idx(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


# ---- index_select / embedding ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(mode, no_fallback, dtype, dim):
    x = make((5, 4, 3), dtype)
    i = idx([0, 2, 2, 1])
    check_same(lambda x, i: torch.index_select(x, dim, i), x, i)


def test_index_select_forms(mode, no_fallback):
    x = make((6, 5))
    check_same(lambda x, i: x.t().index_select(0, i), x, idx([4, 0], torch.int32))  # non-contiguous, int32
    check_same(lambda x, i: x.index_select(1, i), x, idx(3))  # 0-d index
    check_same(lambda x, i: x.index_select(0, i), x, idx([]))  # empty index
    check_same(lambda x, i: torch.index_select(x, 0, i, out=torch.empty(0, device=x.device)), x, idx([5, 1]))


def test_index_select_errors():
    x = make((5, 4)).to("tpu")
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        x.index_select(0, idx([[1]]).to("tpu"))
    with pytest.raises(RuntimeError, match="Expected dtype int32 or int64 for index"):
        x.index_select(0, torch.tensor([1.0]).to("tpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("padding_idx,scale", [(None, False), (2, False), (None, True), (0, True)])
def test_embedding_backward(mode, no_fallback, dtype, padding_idx, scale):
    w = make((7, 5), dtype)
    i = idx([[0, 2, 2], [6, 0, 2]])
    g = make((2, 3, 5), dtype, seed=1)

    def fn(w, i, g):
        w = w.clone().requires_grad_()
        F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=scale).backward(g)
        return w.grad

    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else {}
    check_same(fn, w, i, g, **tol)


@pytest.mark.parametrize("padding_idx", [-1, 5, 9])
def test_embedding_backward_padding_index_no_row_has(mode, no_fallback, padding_idx):
    # -1 (no padding), the table's size and past it: no index can be the padding row, and the
    # rows are added without a mask
    grad = make((4, 3))
    i = idx([1, 3, 1, 0])
    check_same(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 5, padding_idx, False), grad, i)


def test_embedding_backward_int32_indices(mode, no_fallback):
    grad = make((4, 3))
    i = idx([1, 3, 1, 0], torch.int32)
    check_same(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 5, -1, False), grad, i)


# ---- gather / scatter --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(mode, no_fallback, dtype, dim):
    x = make((4, 5, 3), dtype)
    size = x.size(dim)
    i = torch.randint(0, size, (3, 2, 2), generator=torch.Generator().manual_seed(2))  # smaller than x
    check_same(lambda x, i: torch.gather(x, dim, i), x, i)


def test_gather_forms_and_grad(mode, no_fallback):
    x = make((5, 4))
    i = idx([[3, 0], [1, 1], [0, 2]])
    check_same(lambda x, i: x.t().gather(0, i.t()), x, i)  # non-contiguous operands
    check_same(lambda x, i: torch.gather(x, 1, i, out=torch.empty(0, device=x.device)), x, i)
    check_same(lambda x, i: torch.take_along_dim(x, i, dim=1), x, idx([[3, 0], [1, 1], [0, 2], [2, 2], [1, 3]]))
    check_same(lambda x, i: torch.gather(x, 0, i), make(()), idx(0))  # 0-d

    def grad(x, i):
        x = x.clone().requires_grad_()
        torch.gather(x, 1, i).backward(torch.arange(6.0, device=x.device).view(3, 2))
        return x.grad

    check_same(grad, x, i)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_and_scatter_with_a_full_size_index(mode, no_fallback, dim):
    # An index as large as the operand in every other dim: those dims are batching dims of one
    # gather / scatter (index read as it is); sizes large enough to run threaded.
    x = make((24, 40, 33))
    i = torch.randint(0, x.size(dim), x.shape, generator=torch.Generator().manual_seed(dim))
    src = make(x.shape, seed=4)
    check_same(lambda x, i: torch.gather(x, dim, i), x, i)
    check_same(lambda x, i: torch.gather(x.transpose(0, 2), 2 - dim, i.transpose(0, 2)), x, i)
    check_same(lambda x, i, s: x.scatter_add(dim, i, s), x, i, src)
    check_same(lambda x, i, s: x.scatter_reduce(dim, i, s, "amax", include_self=False), x, i, src)
    check_same(lambda x, i: torch.zeros_like(x, dtype=torch.int64).scatter_add(dim, i, torch.ones_like(i)), x, i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.int8])
@pytest.mark.parametrize("shape,dim", [((1024, 96), 1), ((3, 150, 97), 1), ((70, 33, 130), 0), ((2, 5000, 20), 1)])
def test_gather_and_scatter_runs_of_pairs(mode, no_fallback, dtype, shape, dim):
    # The batched kernels walk (position, column block of up to 64) pairs in chunks that may start
    # inside a row of blocks: rows of one element (nll_loss's pick and its gradient's one-hot), 130
    # and 97 columns (partial blocks), and enough pairs to split across threads.
    x = make(shape, dtype)
    ishape = list(shape)
    ishape[dim] = 1 if shape == (1024, 96) else 3
    g = torch.Generator().manual_seed(7)
    i = torch.randint(0, shape[dim], ishape, generator=g)
    src = make(ishape, dtype, seed=3)
    check_same(lambda x, i: torch.gather(x, dim, i), x, i)
    if ishape[dim] == 1:  # replacements: one index a position, so no order between duplicates
        check_same(lambda x, i, s: x.scatter(dim, i, s), x, i, src)
    if dtype != torch.bfloat16 and dtype != torch.int8:
        check_same(lambda x, i, s: x.scatter_add(dim, i, s), x, i, src)
        check_same(lambda x, i, s: x.scatter_reduce(dim, i, s, "amax", include_self=False), x, i, src)
    bad = i.clone()
    bad.view(-1)[bad.numel() // 2] = shape[dim]  # one index past the end, in the middle
    with pytest.raises(RuntimeError, match=f"index {shape[dim]} is out of bounds for dimension {dim}"):
        torch.gather(to_tpu(x), dim, to_tpu(bad)).cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16])
@pytest.mark.parametrize("picks", [16, 37, 300])
def test_gather_along_the_last_dim_in_vectors(mode, no_fallback, dtype, picks):
    # 4-byte elements along a contiguous last dim are gathered a vector at a time (Note [Vector
    # gathers]): whole vectors and a tail, a transposed operand (read through strides: the scalar
    # path), and a bad index -- negative or past the end, in the middle of a vector -- named in the
    # error as on the CPU. (Which of several bad indices is named is not specified: PyTorch CPU
    # names the one its threads meet first, XLA another.)
    g = torch.Generator().manual_seed(picks)
    x = make((45, 300), dtype)
    i = torch.randint(0, 300, (45, picks), generator=g)
    check_same(lambda x, i: torch.gather(x, 1, i), x, i)
    check_same(lambda x, i: torch.gather(x.T.contiguous().T, 1, i), x, i)
    for value in (-1, 300):
        bad = i.clone()
        bad[20, picks // 2 + 3] = value
        with pytest.raises(RuntimeError, match=f"index {value} is out of bounds for dimension 1 with size 300"):
            torch.gather(to_tpu(x), 1, to_tpu(bad)).cpu()


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_scatter(mode, no_fallback, dtype):
    x = make((4, 5), dtype)
    src = make((4, 5), dtype, seed=3)
    i = idx([[1, 0, 3], [4, 2, 0]])  # distinct positions per row: order does not matter
    check_same(lambda x, i, s: x.scatter(1, i, s), x, i, src)
    check_same(lambda x, i, s: x.scatter(0, i.t()[:, :1], s), x, idx([[1, 0, 3], [2, 1, 0]]), src)
    check_same(lambda x, i: x.clone().scatter_(1, i, 1), x, i)
    check_same(lambda x, i, s: torch.scatter(x, 1, i, s, out=torch.empty_like(x)), x, i, src)


@pytest.mark.parametrize("dtype", DTYPES + [torch.int8])
def test_scatter_add(mode, no_fallback, dtype):
    x = make((4, 5), dtype)
    src = make((3, 6), dtype, seed=3)  # larger than index: only src[:2, :3] is used
    i = idx([[1, 1, 3], [0, 1, 1]])  # duplicates accumulate
    tol = dict(rtol=1.6e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    check_same(lambda x, i, s: x.scatter_add(1, i, s), x, i, src, **tol)
    check_same(lambda x, i, s: x.clone().scatter_add_(0, i, s), x, i, src, **tol)
    check_same(lambda x, i, s: x.t().scatter_add(0, i.t(), s.t()), x, i, src, **tol)


def test_scatter_reduce_legacy(mode, no_fallback):
    x = make((3, 4))
    src = make((3, 4), seed=4)
    i = idx([[0, 0, 2], [3, 1, 3]])
    check_same(lambda x, i, s: x.scatter(1, i, s, reduce="add"), x, i, src)
    check_same(lambda x, i, s: x.scatter(1, i, s, reduce="multiply"), x, i, src)
    check_same(lambda x, i: x.scatter(1, i, 2.5, reduce="multiply"), x, i)
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply"):
        to_tpu(x).scatter(1, to_tpu(i), to_tpu(src), reduce="max")


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce(mode, no_fallback, reduce, include_self, dtype):
    x = make((3, 5), dtype)
    src = make((3, 4), dtype, seed=5)
    i = idx([[0, 0, 2, 4], [1, 1, 1, 3], [4, 0, 4, 0]])
    check_same(lambda x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self), x, i, src)


def test_scatter_grads(mode, no_fallback):
    x = make((4, 5))
    i = idx([[0, 1, 2, 0, 1]] * 4)
    g = make((3, 5), seed=8)

    def scatter_add(x, i, g):
        x = x.clone().requires_grad_()
        torch.zeros(3, 5, device=x.device).scatter_add(0, i, x).backward(g)
        return x.grad

    def scatter_reduce(x, i, g):
        x = x.clone().requires_grad_()
        x.scatter_reduce(0, i[:3], x[:3] * 2, "sum").backward(g.repeat(2, 1)[:4])
        return x.grad

    check_same(scatter_add, x, i, g)
    check_same(scatter_reduce, x, i, g)


# ---- advanced indexing -------------------------------------------------------------------------
INDEXERS = {
    "single": lambda x, i, j: x[i],
    "negative": lambda x, i, j: x[i - 4],
    "second_dim": lambda x, i, j: x[:, j],
    "pair_adjacent": lambda x, i, j: x[i, j],
    "pair_split": lambda x, i, j: x[i, :, j],
    "broadcast": lambda x, i, j: x[i.view(-1, 1), j.view(1, -1)],
    "ellipsis": lambda x, i, j: x[..., j],
    "2d_index": lambda x, i, j: x[torch.stack([i, i])],
    "with_slice": lambda x, i, j: x[1:, j, ::2],
}


@pytest.mark.parametrize("name", list(INDEXERS))
def test_index(mode, no_fallback, name):
    x = make((4, 4, 5))
    check_same(INDEXERS[name], x, idx([0, 3, 1]), idx([2, 0, 3]))


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_index_dtypes(mode, no_fallback, dtype):
    x = make((5, 3), dtype)
    check_same(lambda x, i: x.t()[:, i], x, idx([4, -5, 0], torch.int32))


def test_index_cpu_index_and_out(mode, no_fallback):
    x = make((5, 3))
    i = idx([2, 4])
    torch.testing.assert_close(x.to("tpu")[i].cpu(), x[i])  # index tensor left on the CPU
    check_same(lambda x, i: torch.ops.aten.index.Tensor_out(x, [i], out=torch.empty(0, device=x.device)), x, i)


def test_index_bool_mask(mode, no_fallback):
    # nonzero() has a data-dependent shape: one host sync learns it (nonzero.cc), the gather
    # that follows is native.
    x = make((4, 5))
    check_same(lambda x: x[x > 0], x)
    check_same(lambda x, m: x[m], x, idx([True, False, True, True]).bool())
    check_same(lambda x, m: x[:, m], x, torch.tensor([True, False, False, True, True]))


def test_index_grad(mode, no_fallback):
    x = make((5, 3))
    i = idx([0, 3, 0, 4])

    def fn(x, i):
        x = x.clone().requires_grad_()
        x[i].backward(torch.arange(12.0, device=x.device).view(4, 3))
        return x.grad

    check_same(fn, x, i)


def test_index_put_grad(mode, no_fallback):
    def fn(x, i, g):
        x = x.clone().requires_grad_()
        base = torch.zeros(3, 5, device=x.device, requires_grad=True)
        base.index_put((i,), x, accumulate=True).backward(g)
        return x.grad, base.grad

    check_same(fn, make((4, 5)), idx([0, 2, 1, 1]), make((3, 5), seed=9))


# ---- index_put_ --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_index_put(mode, no_fallback, dtype):
    x = make((5, 4), dtype)
    v = make((2, 4), dtype, seed=6)
    check_same(lambda x, i, v: x.index_put((i,), v), x, idx([3, -1]), v)
    check_same(lambda x, i, v: x.clone().index_put_((i,), v[0]), x, idx([0, 2]), v)  # broadcast
    check_same(lambda x, i, j, v: x.clone().index_put_((i, j), v[0, :2]), x, idx([0, 2]), idx([3, 1]), v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int8])
def test_index_put_accumulate(mode, no_fallback, dtype):
    x = make((5, 4), dtype)
    v = make((4, 4), dtype, seed=7)
    tol = dict(rtol=1.6e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    # duplicate indices add up
    check_same(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, idx([1, 3, 1, 1]), v, **tol)
    check_same(lambda x, i, j, v: x.t().index_put((j, i), v[0], accumulate=True), x, idx([1, 1, 0, 4]),
               idx([0, 0, 2, 3]), v, **tol)


def test_setitem(mode, no_fallback):
    x = make((4, 6))

    def fn(x, i):
        y = x.clone()
        y[i] = 7.5
        y[:, i[:2]] = torch.tensor(-1.0)  # 0-d CPU value
        y[i[0], 1:3] = y[i[1], 3:5]
        return y

    check_same(fn, x, idx([2, 0, 3]))


def test_setitem_bool_mask(mode):
    x = make((4, 6))

    def fn(x):
        y = x.clone()
        y[y < 0] = 0.0
        return y

    check_same(fn, x)


def test_index_put_errors():
    x = make((5, 4)).to("tpu")
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        x.index_put_((idx([1]).to("tpu"),), torch.ones(4, dtype=torch.float64).to("tpu"))
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[idx([0]).to("tpu"), idx([0]).to("tpu"), idx([0]).to("tpu")]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[torch.tensor([1.0]).to("tpu")]
    with pytest.raises(IndexError, match="shape mismatch: indexing tensors could not be broadcast together"):
        x[idx([0, 1]).to("tpu"), idx([0, 1, 2]).to("tpu")]


# ---- data-dependent errors: out-of-range indices -----------------------------------------------
CASES = {
    "index": (lambda x, i: x[i], "aten::index", "index 10 is out of bounds for dimension 0 with size 5"),
    "index_negative": (lambda x, i: x[-i + 3], "aten::index", "index -7 is out of bounds for dimension 0 with size 5"),
    "index_select": (lambda x, i: x.index_select(1, i), "aten::index_select",
                     "index 10 is out of bounds for dimension 1 with size 4"),
    "gather": (lambda x, i: x.gather(0, i.view(1, 1)), "aten::gather",
               "index 10 is out of bounds for dimension 0 with size 5"),
    "scatter_add": (lambda x, i: x.scatter_add(1, i.view(1, 1), x), "aten::scatter_add",
                    "index 10 is out of bounds for dimension 1 with size 4"),
    "index_put": (lambda x, i: x.index_put_((i,), torch.tensor(1.0), accumulate=True), "aten::index_put_",
                  "index 10 is out of bounds for dimension 0 with size 5"),
}


# CPU's gather and scatter kernels raise RuntimeError for an index out of range (the others
# IndexError).
OUT_OF_RANGE_TYPE = {"gather": RuntimeError, "scatter_add": RuntimeError}


@pytest.mark.parametrize("case", list(CASES))
def test_out_of_range_debug_raises_at_op(case):
    fn, op, msg = CASES[case]
    line = fn.__code__.co_firstlineno  # the user's line: where the op was called
    import torch_tpu

    x = make((5, 4)).to("tpu")
    i = idx([10]).to("tpu")
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(OUT_OF_RANGE_TYPE.get(case, IndexError)) as e:
            fn(x, i)
    text = str(e.value)
    assert msg in text and op in text and f"test_indexing.py:{line}" in text, text
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)  # the device keeps working


@pytest.mark.parametrize("case", ["index", "gather", "index_put"])
def test_out_of_range_strict_raises_at_sync(case):
    fn, op, msg = CASES[case]
    line = fn.__code__.co_firstlineno  # the user's line: where the op was called
    import torch_tpu

    x = make((5, 4)).to("tpu")
    i = idx([10]).to("tpu")
    with torch_tpu.eager_mode("strict"):
        r = fn(x, i)  # returns: the error is found when the program runs
        with pytest.raises(OUT_OF_RANGE_TYPE.get(case, IndexError)) as e:
            r.cpu()
        text = str(e.value)
        assert msg in text and op in text and f"test_indexing.py:{line}" in text, text
        y = to_tpu(make((5, 4)))
        torch.testing.assert_close(y[idx([1, 2]).to("tpu")].cpu(), y.cpu()[[1, 2]])
