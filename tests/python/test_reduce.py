"""Reductions (csrc/torch/lower/reduce.cc, reduce_stats.cc) against PyTorch's CPU results."""
import math

import pytest
import torch

import torch_tpu
from conftest import check_same, to_tpu

INF = float("inf")
NAN = float("nan")


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def randint(*shape, low=-5, high=6, dtype=torch.int64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def check_same_error(fn, *args, same_message=True):
    """fn raises on CPU; on the device it raises the same exception type (and message) at the call."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(type(cpu.value)) as dev:
        fn(*to_tpu(args))
    if same_message:
        assert str(dev.value).splitlines()[0] == str(cpu.value).splitlines()[0]


# Inputs: contiguous, transposed and sliced views.
LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.transpose(0, 2),
    "sliced": lambda x: x[:, 1:, ::2],
}
DIMS = [None, 0, -1, (0, 2), (-1, 1), ()]


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_float32(mode, no_fallback, layout, dim, keepdim):
    x = LAYOUTS[layout](rand(4, 5, 6))
    check_same(lambda t: torch.sum(t, dim=dim, keepdim=keepdim), x)
    check_same(lambda t: torch.mean(t, dim=dim, keepdim=keepdim), x)


@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
def test_sum_mean_amax_bfloat16(mode, no_fallback, dim):
    x = rand(7, 300, dtype=torch.bfloat16)  # long rows: one rounding at the end
    check_same(lambda t: torch.sum(t, dim=dim), x)
    check_same(lambda t: torch.mean(t, dim=dim), x)
    check_same(lambda t: torch.amax(t, dim=() if dim is None else dim), x)
    check_same(lambda t: torch.sum(t, dim=dim, dtype=torch.float32), x)
    check_same(lambda t: torch.mean(t.T, dim=dim), x)


def test_sum_long_rows_float32(mode, no_fallback):
    x = rand(3, 20000) + 3
    check_same(lambda t: t.sum(1), x)
    check_same(lambda t: t.sum(0), x)
    check_same(lambda t: t.mean(), x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool])
def test_sum_integer_and_bool_give_int64(mode, no_fallback, dtype):
    x = randint(4, 5, low=0 if dtype in (torch.uint8, torch.bool) else -5, high=2 if dtype == torch.bool else 6,
                dtype=dtype)
    r = check_same(lambda t: t.sum(), x)
    assert r.dtype == torch.int64
    check_same(lambda t: t.sum(-1, keepdim=True), x)
    check_same(lambda t: t.sum(0, dtype=torch.float32), x)
    check_same(lambda t: torch.prod(t), x)
    check_same(lambda t: torch.prod(t, 1), x)


def test_sum_int64_exact(mode, no_fallback):
    x = torch.tensor([[2**62, 2**61, -(2**60)], [1, 2, 3]])
    check_same(lambda t: t.sum(1), x)
    check_same(lambda t: t.sum(), x)


def test_sum_out_forms(mode, no_fallback):
    x = rand(4, 5)
    check_same(lambda t, o: torch.sum(t, 1, out=o), x, torch.empty(0))
    check_same(lambda t, o: torch.sum(t, (0, 1), keepdim=True, out=o), x, torch.empty(3))
    check_same(lambda t, o: torch.sum(t, 0, out=o), x, torch.empty(5, dtype=torch.float64))
    check_same(lambda t, o: torch.sum(t, 0, out=o), randint(4, 5), torch.empty(0, dtype=torch.int32))
    check_same(lambda t, o: torch.mean(t, 0, out=o), x, torch.empty(0))
    check_same(lambda t, o: torch.mean(t, out=o), x, torch.empty(0))
    check_same(lambda t, o: torch.prod(t, 1, out=o), x, torch.empty(0))
    # The out= tensor itself holds the result.
    out = torch.empty(0, device="tpu")
    r = torch.sum(x.to("tpu"), 1, out=out)
    assert r.data_ptr() == out.data_ptr() and out.shape == (4,)


def test_mean_dtype_and_zero_dim(mode, no_fallback):
    x = rand(4, 5)
    check_same(lambda t: t.mean(1, dtype=torch.float64), x)
    check_same(lambda t: torch.mean(t), torch.tensor(2.5))
    check_same(lambda t: torch.sum(t, 0), torch.tensor(2.5))
    check_same(lambda t: torch.sum(t, -1, keepdim=True), torch.tensor(2.5))


def test_prod(mode, no_fallback):
    x = rand(4, 6) * 0.5 + 1
    check_same(lambda t: torch.prod(t), x)
    check_same(lambda t: torch.prod(t, -1, keepdim=True), x)
    check_same(lambda t: torch.prod(t.T, 1), x)
    check_same(lambda t: torch.prod(t, 0, dtype=torch.float64), x)
    check_same(lambda t: torch.prod(t, 1), rand(3, 8, dtype=torch.bfloat16))


@pytest.mark.parametrize("dim", [(), 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_amax_amin(mode, no_fallback, dim, keepdim):
    x = rand(3, 4, 5)
    for f in (torch.amax, torch.amin):
        check_same(lambda t: f(t, dim, keepdim), x)
        check_same(lambda t: f(t.transpose(0, 2), dim, keepdim), x)
        check_same(lambda t: f(t, dim, keepdim), randint(3, 4, 5))
        check_same(lambda t: f(t, dim, keepdim), randint(3, 4, 5, low=0, high=2, dtype=torch.bool))


def test_amax_out(mode, no_fallback):
    check_same(lambda t, o: torch.amax(t, 1, out=o), rand(3, 4), torch.empty(0))
    check_same(lambda t, o: torch.amin(t, (0, 1), keepdim=True, out=o), rand(3, 4), torch.empty(0))


def test_int64_extremes(mode, no_fallback):
    big = torch.tensor([[2**63 - 1, 2**63 - 1], [-(2**63), 5]])
    check_same(lambda t: t.amin(1), big)
    check_same(lambda t: t.amax(1), big)
    check_same(lambda t: t.min(), big)
    check_same(lambda t: t.max(1), big)
    check_same(lambda t: t.argmin(1), big)


def test_max_min_full(mode, no_fallback):
    x = rand(5, 7)
    check_same(torch.max, x)
    check_same(torch.min, x)
    check_same(lambda t: t.T.max(), x)
    check_same(torch.max, randint(5, 7))
    check_same(torch.min, randint(5, dtype=torch.uint8, low=0))
    check_same(lambda t, o: torch.max(t, out=o), x, torch.empty(3))
    check_same(lambda t, o: torch.min(t, out=o), x, torch.empty(0, dtype=torch.float64))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim(mode, no_fallback, dim, keepdim):
    x = rand(4, 6, 5)
    for f in (torch.max, torch.min):
        check_same(lambda t: tuple(f(t, dim, keepdim)), x)
        check_same(lambda t: tuple(f(t.transpose(1, 2), dim, keepdim)), x)
        check_same(lambda t: tuple(f(t, dim, keepdim)), randint(4, 6, 5, low=0, high=3))
        check_same(lambda t: tuple(f(t, dim, keepdim)), rand(4, 6, 5, dtype=torch.bfloat16))


def test_max_dim_out_and_zero_dim(mode, no_fallback):
    x = rand(4, 6)
    check_same(lambda t, v, i: tuple(torch.max(t, 1, out=(v, i))), x, torch.empty(0),
               torch.empty(0, dtype=torch.long))
    check_same(lambda t, v, i: tuple(torch.min(t, 0, True, out=(v, i))), x, torch.empty(0),
               torch.empty(0, dtype=torch.long))
    check_same(lambda t: tuple(torch.max(t, 0)), torch.tensor(3.0))
    check_same(lambda t: tuple(torch.min(t, -1, True)), torch.tensor(3.0))


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(mode, no_fallback, dim, keepdim):
    x = rand(4, 6)
    for f in (torch.argmax, torch.argmin):
        check_same(lambda t: f(t, dim, keepdim), x)
        check_same(lambda t: f(t.T, dim, keepdim), x)
        check_same(lambda t: f(t, dim, keepdim), randint(4, 6, low=0, high=3))
        check_same(lambda t: f(t, dim, keepdim), rand(4, 6, dtype=torch.bfloat16))
    check_same(lambda t, o: torch.argmax(t, dim, keepdim, out=o), x, torch.empty(0, dtype=torch.long))
    check_same(lambda t: torch.argmax(t, dim, keepdim), torch.tensor(1.5) if dim in (None, 0, -1) else x)


def test_ties_take_first_index(mode, no_fallback):
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 2.0, 2.0], [-1.0, -4.0, 5.0, -4.0, 5.0]])
    for f in (torch.argmax, torch.argmin):
        check_same(lambda t: f(t, 1), x)
        check_same(lambda t: f(t), x)
        check_same(lambda t: f(t, 0), x.T.contiguous())
    check_same(lambda t: tuple(torch.max(t, 1)), x)
    check_same(lambda t: tuple(torch.min(t, 1)), x)
    check_same(lambda t: torch.argmax(t, 1), x.long())


@pytest.mark.parametrize("n", [1, 5, 63, 64, 65, 128, 200, 2047, 9000, 70001])
def test_float_arg_reductions_every_layout(mode, no_fallback, n):
    # float32 argmax/argmin run in vector lanes (Note [Vector arg reductions]): rows shorter than
    # four vectors, whole blocks and tails, rows long enough to be split between threads (9000,
    # 70001 with few rows), columns (dim 0, a middle dim) in blocks of 256 and a partial block.
    # Values from a small set make ties everywhere; NaNs (several per row, in some rows), signed
    # zeros and infinities decide by the first index, as on the CPU.
    g = torch.Generator().manual_seed(n)
    rows = max(1, min(37, 300000 // n))
    x = torch.randint(-3, 4, (rows, n), generator=g).float()
    x[torch.rand(rows, n, generator=g) < 0.05] = 0.0
    x[torch.rand(rows, n, generator=g) < 0.05] = -0.0
    x[torch.rand(rows, n, generator=g) < 0.01] = INF
    x[torch.rand(rows, n, generator=g) < 0.01] = -INF
    y = x.clone()
    nan_rows = torch.rand(rows, generator=g) < 0.5
    y[nan_rows.unsqueeze(1) & (torch.rand(rows, n, generator=g) < 0.02)] = NAN
    y[0, n // 2] = NAN  # at least one NaN, in the middle of a row
    for t in (x, y):
        for f in (torch.argmax, torch.argmin):
            check_same(lambda t: f(t, 1), t)
            check_same(lambda t: f(t.T.contiguous(), 0), t)  # columns
            check_same(lambda t: f(t.reshape(rows, 1, n).expand(rows, 3, n).contiguous(), 1), t)  # middle dim, all tied
            check_same(lambda t: f(t.T, 1), t)  # rows read through strides
            check_same(lambda t: tuple(torch.max(t, 1)), t)
            check_same(lambda t: tuple(torch.min(t.T.contiguous(), 0)), t)
    # random values: one maximum per row, anywhere
    z = torch.randn(rows, n, generator=g)
    for f in (torch.argmax, torch.argmin):
        check_same(lambda t: f(t, 1), z)
        check_same(lambda t: f(t.T.contiguous(), 0), z)


def test_float_arg_reductions_down_long_rows(mode, no_fallback):
    # Long rows (>= 4 blocks of 256 columns), few outer positions and many rows: the rows are split
    # into ranges merged in order (reduce.cc ArgTyped). Ties across ranges take the first row, a
    # NaN the first NaN's row.
    g = torch.Generator().manual_seed(11)
    x = torch.randint(-2, 3, (2, 301, 1100), generator=g).float()
    x[torch.rand(x.shape, generator=g) < 0.002] = NAN
    x[:, :, 7] = 5.0  # every row ties in this column: row 0 wins
    x[1, 250:, 9] = 9.0  # a tie inside the last range only
    for f in (torch.argmax, torch.argmin):
        check_same(lambda t: f(t, 1), x)
        check_same(lambda t: f(t[0], 0), x)
        check_same(lambda t: tuple(torch.max(t, 1)), x)


@pytest.mark.parametrize("shape,dim", [((37, 3000), -1), ((5, 7, 130), (-2, -1)), ((64, 5), -1), ((3, 4100), 1)])
def test_var_over_trailing_dims(mode, no_fallback, shape, dim):
    # var / std / var_mean over trailing dims run their sums as one row step (row_match.cc
    # Variance): contiguous and strided inputs (a transposed view read as rows), corrections 0-2,
    # a large mean (cancellation), NaN and infinity in some rows; float64's results as reference
    # where float32 CPU rounds differently (Welford there, two sums here).
    g = torch.Generator().manual_seed(len(shape))
    x = torch.randn(shape, generator=g) * 3 + 100.0
    y = x.clone()
    y.view(-1, y.shape[-1])[1, 3] = NAN
    z = y.clone()
    z.view(-1, z.shape[-1])[2, 0] = INF
    for t in (x, y, z):
        for c in (0, 1, 2):
            check_same(lambda t: torch.var(t, dim, correction=c), t, rtol=1e-4, atol=1e-5)
            check_same(lambda t: torch.std(t, dim, correction=c, keepdim=True), t, rtol=1e-4, atol=1e-5)
    for t in (x, y):  # (with an infinity, CPU's var_mean gives a NaN mean, torch.mean inf; the device inf)
        check_same(lambda t: torch.var_mean(t, dim), t, rtol=1e-4, atol=1e-5)
    want = torch.var(x.double(), dim).float()
    got = torch.var(to_tpu(x), dim).cpu()
    torch.testing.assert_close(got, want, rtol=2e-5, atol=0)
    xt = x.reshape(-1, x.shape[-1]).T.contiguous().T  # rows with a stride: read through a copy
    torch.testing.assert_close(torch.var(to_tpu(xt), -1).cpu(), torch.var(xt.double(), -1).float(), rtol=2e-5, atol=0)


def test_nan_propagation(mode, no_fallback):
    x = torch.tensor([[1.0, NAN, 3.0, NAN], [1.0, 2.0, 3.0, 0.0], [NAN, -INF, INF, 2.0]])
    for f in (torch.amax, torch.amin):
        check_same(lambda t: f(t, 1), x)
        check_same(lambda t: f(t, 0), x)
    check_same(torch.max, x)
    check_same(torch.min, x)
    for f in (torch.max, torch.min):
        check_same(lambda t: tuple(f(t, 1)), x)
        check_same(lambda t: tuple(f(t, 0)), x)
    for f in (torch.argmax, torch.argmin):
        check_same(lambda t: f(t, 1), x)
        check_same(lambda t: f(t), x)
    check_same(lambda t: t.sum(1), x)
    check_same(lambda t: t.var(1), x)
    check_same(lambda t: torch.logsumexp(t, 1), x)
    check_same(lambda t: torch.linalg.vector_norm(t, INF, dim=1), x)
    check_same(lambda t: torch.linalg.vector_norm(t, -INF, dim=1), x)


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), ()])
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std(mode, no_fallback, dim, correction, keepdim):
    x = rand(4, 5, 6) * 3 + 10
    check_same(lambda t: torch.var(t, dim, correction=correction, keepdim=keepdim), x)
    check_same(lambda t: torch.std(t.transpose(0, 1), dim, correction=correction, keepdim=keepdim), x)
    check_same(lambda t: torch.var_mean(t, dim, correction=correction, keepdim=keepdim), x)
    check_same(lambda t: torch.std_mean(t, dim, correction=correction, keepdim=keepdim), x)


def test_var_std_edge_cases(mode, no_fallback):
    x = rand(3, 4)
    check_same(lambda t: torch.var(t, 1, correction=4), x)  # N - correction == 0: inf
    check_same(lambda t: torch.std(t, 1, correction=6), x)  # negative: clamped to 0
    check_same(lambda t: torch.var(t, 1, correction=4), torch.ones(3, 4))  # 0 / 0: nan
    check_same(lambda t: torch.var(t), torch.tensor(2.0))
    check_same(lambda t: torch.var(t, 0, correction=0.5), x)
    check_same(lambda t: torch.var(t, 1, unbiased=False), x)
    check_same(lambda t: torch.var(t, 1), rand(3, 50, dtype=torch.bfloat16))
    check_same(lambda t: torch.std_mean(t, 0), rand(40, 3, dtype=torch.bfloat16))
    check_same(lambda t, o: torch.var(t, 1, out=o), x, torch.empty(0))
    check_same(lambda t, o: torch.std(t, 0, keepdim=True, out=o), x, torch.empty(0, dtype=torch.float64))


@pytest.mark.parametrize("dim", [0, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp(mode, no_fallback, dim, keepdim):
    x = rand(5, 6) * 10
    check_same(lambda t: torch.logsumexp(t, dim, keepdim), x)
    check_same(lambda t: torch.logsumexp(t.T, dim, keepdim), x)
    check_same(lambda t: torch.logsumexp(t, dim, keepdim), randint(5, 6))
    check_same(lambda t: torch.logsumexp(t, dim, keepdim), rand(5, 6, dtype=torch.bfloat16))


def test_logsumexp_infinities_and_out(mode, no_fallback):
    x = torch.tensor([[-INF, -INF, -INF], [INF, 1.0, 2.0], [-INF, 0.0, 1.0], [1000.0, 1000.0, -1000.0]])
    check_same(lambda t: torch.logsumexp(t, 1), x)
    check_same(lambda t, o: torch.logsumexp(t, 1, out=o), x, torch.empty(0))
    check_same(lambda t, o: torch.logsumexp(t, 0, out=o), x, torch.empty(0, dtype=torch.float64))


ORDS = [2, 1, INF, -INF, 0, 3, 0.5, -1, 1.5]


@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_vector_norm(mode, no_fallback, ord, dim):
    x = rand(3, 4, 5)
    x[0, 0, :2] = 0
    check_same(lambda t: torch.linalg.vector_norm(t, ord, dim), x)
    check_same(lambda t: torch.linalg.vector_norm(t.transpose(0, 2), ord, dim, keepdim=True), x)
    check_same(lambda t: torch.linalg.vector_norm(t, ord, dim), rand(3, 4, 5, dtype=torch.bfloat16))


def test_vector_norm_dtype_out_and_size_one(mode, no_fallback):
    x = rand(3, 4)
    check_same(lambda t: torch.linalg.vector_norm(t, dtype=torch.float64), x)
    check_same(lambda t: torch.linalg.vector_norm(t, 2, 1, dtype=torch.float32), rand(3, 4, dtype=torch.bfloat16))
    check_same(lambda t, o: torch.linalg.vector_norm(t, 3, 1, out=o), x, torch.empty(0))
    # Reductions over size-1 dims are |x| exactly (even where x * x would overflow).
    big = torch.tensor([[1e30], [-3.0], [0.0]])
    for ord in (2, 3, INF, 0):
        check_same(lambda t: torch.linalg.vector_norm(t, ord, 1), big)
    check_same(lambda t: torch.linalg.vector_norm(t), torch.tensor(-2.5))


def test_norm_scalaropt_dim(mode, no_fallback):
    x = rand(3, 4)
    norm = torch.ops.aten.norm
    check_same(lambda t: norm.ScalarOpt_dim(t, 2, [1]), x)
    check_same(lambda t: norm.ScalarOpt_dim(t, None, [0], True), x)
    check_same(lambda t: norm.ScalarOpt_dim(t, 1, [-1]), x)
    check_same(lambda t: norm.ScalarOpt_dim_dtype(t, 3, [1], False, dtype=torch.float64), x)
    check_same(lambda t, o: norm.out(t, 2, [1], out=o), x, torch.empty(0))
    check_same(lambda t: t.norm(), x)
    check_same(lambda t: torch.norm(t, 1, dim=0), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.uint8])
def test_any_all(mode, no_fallback, dtype):
    x = randint(3, 4, 5, low=0, high=2).to(dtype)
    x[0] = 1  # a slice where all() holds
    for f in (torch.any, torch.all):
        check_same(f, x)
        check_same(lambda t: f(t, 1), x)
        check_same(lambda t: f(t, -1, keepdim=True), x)
        check_same(lambda t: f(t, (0, 2)), x)
        check_same(lambda t: f(t, ()), x)  # [] reduces nothing for any/all
        check_same(lambda t: f(t.transpose(0, 2), 0), x)
        check_same(lambda t, o: f(t, 1, out=o), x, torch.empty(0, dtype=torch.bool))
        check_same(lambda t, o: f(t, out=o), x, torch.empty(0, dtype=torch.bool))
        check_same(lambda t, o: f(t, (0, 1), out=o), x, torch.empty(0, dtype=torch.bool))


def test_any_all_nan_and_count_nonzero(mode, no_fallback):
    x = torch.tensor([[0.0, NAN], [0.0, 0.0], [-0.0, 1.0]])
    check_same(lambda t: torch.any(t, 1), x)
    check_same(lambda t: torch.all(t, 0), x)
    check_same(torch.count_nonzero, x)
    check_same(lambda t: torch.count_nonzero(t, 1), x)
    y = randint(3, 4, 5, low=0, high=2)
    check_same(lambda t: torch.count_nonzero(t, (0, -1)), y)
    check_same(lambda t: torch.count_nonzero(t.transpose(0, 1), ()), y)
    check_same(lambda t: torch.count_nonzero(t, 2), y.bool())


def test_empty_reductions(mode, no_fallback):
    e = torch.empty(0, 3)
    check_same(torch.sum, e)
    check_same(lambda t: t.sum(0), e)
    check_same(lambda t: t.sum(1), e)
    check_same(torch.sum, torch.empty(0, dtype=torch.int64))
    check_same(torch.prod, e)
    check_same(lambda t: t.prod(0), e)
    check_same(torch.mean, e)
    check_same(lambda t: t.var(0), e)
    check_same(lambda t: torch.var_mean(t, 0), e)
    check_same(lambda t: torch.logsumexp(t, 0), e)
    check_same(lambda t: torch.linalg.vector_norm(t), e)
    check_same(lambda t: torch.linalg.vector_norm(t, 1, 0), e)
    check_same(lambda t: torch.amax(t, 1), e)
    check_same(lambda t: tuple(torch.max(t, 1)), e)
    check_same(lambda t: torch.argmax(t, 1), e)
    check_same(torch.any, e)
    check_same(torch.all, e)
    check_same(torch.count_nonzero, e)


def test_errors(mode):
    e = torch.empty(0, 3)
    x = rand(3, 4)
    i = randint(3, 4)
    check_same_error(torch.max, e)
    check_same_error(torch.min, e)
    check_same_error(lambda t: torch.max(t, 0), e)
    check_same_error(lambda t: torch.amax(t), e)
    check_same_error(lambda t: torch.amin(t, 0), e)
    check_same_error(lambda t: torch.argmax(t), e)
    check_same_error(lambda t: torch.argmin(t, 0), e)
    check_same_error(lambda t: torch.linalg.vector_norm(t, INF), e)
    check_same_error(lambda t: torch.linalg.vector_norm(t, -1, 0), e)
    check_same_error(torch.mean, i)
    check_same_error(lambda t: torch.mean(t, 0), i)
    check_same_error(lambda t: torch.mean(t, dtype=torch.long), x)
    check_same_error(torch.var, i)
    check_same_error(lambda t: torch.std(t, 0), i)
    check_same_error(torch.var_mean, i)
    check_same_error(torch.std_mean, i)
    check_same_error(torch.linalg.vector_norm, i)
    check_same_error(lambda t: torch.linalg.vector_norm(t, dtype=torch.bfloat16), x)
    check_same_error(torch.argmax, torch.tensor([True, False]))
    check_same_error(lambda t: t.sum(2), x)
    check_same_error(lambda t: t.sum((0, -2)), x)
    check_same_error(lambda t: t.var((1, 1)), x)
    check_same_error(lambda t: t.amax(-3), x)
    check_same_error(lambda t: torch.count_nonzero(t, (0, 0)), x)
    check_same_error(lambda t: torch.argmax(t, 2), x)
    check_same_error(lambda t: torch.logsumexp(t, 5), x)
    check_same_error(lambda t, o: torch.sum(t, 0, dtype=torch.long, out=o), i, torch.empty(0, dtype=torch.int32))
    check_same_error(lambda t, o: torch.amax(t, 0, out=o), x, torch.empty(0, dtype=torch.float64))
    check_same_error(lambda t, o: torch.max(t, 0, out=o), x, (torch.empty(0), torch.empty(0)))
    check_same_error(lambda t, o: torch.var(t, 0, out=o), x, torch.empty(0, dtype=torch.long))
    check_same_error(lambda t, o: torch.logsumexp(t, 0, out=o), x, torch.empty(0, dtype=torch.long))
    check_same_error(lambda t, o: torch.all(t, 0, out=o), x, torch.empty(0, dtype=torch.long))
    check_same_error(lambda t, o: torch.max(t, out=o), x, torch.empty(0, dtype=torch.long), same_message=False)
    # The device stays usable after the errors.
    check_same(lambda t: t.sum(0), x)


# ---- gradients -----------------------------------------------------------------------------------
REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std",
              "var_mean", "std_mean", "logsumexp", "linalg_vector_norm", "norm", "any", "all",
              "count_nonzero"}


def grads_match(fn, x, rtol=None, atol=None):
    """fn's gradient w.r.t. x on CPU and on the device; the reductions themselves never fall back.

    Some backward formulas use ops of other families (scatter for max.dim, exp for logsumexp,
    masked_fill_ / sgn for norms) that may still run through the CPU fallback; this checks that
    every reduction (forward and backward) is native."""
    xc = x.clone().requires_grad_()
    fn(xc).backward()
    xt = x.to("tpu").requires_grad_()
    torch_tpu.metrics.reset()
    y = fn(xt)
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()
    y.backward()
    fb = torch_tpu.metrics.fallback_ops()
    assert not [k for k in fb if k.split("::")[-1].split(".")[0] in REDUCTIONS], fb
    torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=rtol, atol=atol)


GRAD_FNS = {
    "sum": lambda t: (t.sum(1) * torch.arange(4.0).to(t.device)).sum(),
    "sum_all": lambda t: t.sum() * 3,
    "mean": lambda t: (t.mean((0, 2), keepdim=True) ** 2).sum(),
    "amax": lambda t: (t.amax(1) * 2).sum(),
    "max_dim": lambda t: t.max(1).values.sum(),
    "min_dim_keepdim": lambda t: t.min(-1, keepdim=True)[0].sum(),
    "var": lambda t: t.var(1).sum(),
    "var_correction0": lambda t: t.var((0, 2), correction=0).sum(),
    "std": lambda t: t.std(-1).sum(),
    "logsumexp": lambda t: torch.logsumexp(t, 1).sum(),
    "norm2": lambda t: torch.linalg.vector_norm(t, dim=1).sum(),
    "norm_all": lambda t: torch.linalg.vector_norm(t),
    "norm3": lambda t: torch.linalg.vector_norm(t, 3, dim=(0, 2)).sum(),
    "norm_inf": lambda t: torch.linalg.vector_norm(t, INF, dim=1).sum(),
}


@pytest.mark.parametrize("name", list(GRAD_FNS))
def test_gradients(mode, name):
    grads_match(GRAD_FNS[name], rand(3, 5, 4))


def test_amax_gradient_splits_ties(mode):
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
    grads_match(lambda t: t.amax(1).sum(), x)


def test_clip_grad_norm(mode):
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    x = rand(4, 6)
    results = {}
    for device in ("cpu", "tpu"):
        m = torch.nn.Linear(6, 3).to(device)
        m.load_state_dict(model.state_dict())
        (m(x.to(device)) ** 2).sum().backward()
        for norm_type in (2.0, 1.0, INF):
            total = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5, norm_type=norm_type, foreach=False)
            results.setdefault(norm_type, []).append((total.cpu(), [p.grad.cpu().clone() for p in m.parameters()]))
    for (total_c, grads_c), (total_t, grads_t) in results.values():
        torch.testing.assert_close(total_t, total_c)
        torch.testing.assert_close(grads_t, grads_c)


def test_contiguous_integer_and_bool_rows(mode):
    # Rows reduced along their contiguous last dim take unswitched loops (bool all/any decided by
    # the first false / true byte): one differing element at every position, tails included.
    n = 67
    ones = torch.ones(n, n, dtype=torch.bool)
    ones[torch.arange(n), torch.arange(n)] = False  # row r: false at r
    zeros = ~ones  # row r: true at r only
    both = torch.cat([ones, zeros, torch.ones(1, n, dtype=torch.bool), torch.zeros(1, n, dtype=torch.bool)])
    for f in (lambda t: t.all(-1), lambda t: t.any(-1), lambda t: t.sum(-1), lambda t: t.all(-1, keepdim=True)):
        check_same(f, both)
    x = torch.randint(-2**62, 2**62, (5, 3, 130), generator=torch.Generator().manual_seed(0))
    for f in (lambda t: t.amax(-1), lambda t: t.amin(-1), lambda t: t.sum(-1), lambda t: t.prod(-1)):
        check_same(f, x)  # sums and products wrap as on the CPU
    y = torch.randint(-100, 100, (7, 300), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
    for f in (lambda t: t.amax(-1), lambda t: t.amin(-1), lambda t: t.sum(-1)):
        check_same(f, y)
