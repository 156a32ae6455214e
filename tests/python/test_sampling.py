"""multinomial on the device (Philox generator). Its draws cannot equal CPU's (another random
stream), so these tests check what defines the op: determinism for a seed, frequencies against
the probabilities, no repeats without replacement, categories of probability 0 never drawn, and
CPU's errors for invalid probabilities.

Frequencies: a chi-square goodness-of-fit statistic over the categories of non-zero probability
must stay below its (1 - 1e-6) quantile, so a correct sampler fails a given check with
probability 1e-6 over seeds (and the seeds are fixed, so a passing test keeps passing). The
quantile is exact for even degrees of freedom: P(X > x) = exp(-x/2) sum_{i<k} (x/2)^i / i!.
"""
import math

import pytest
import torch

import torch_tpu

FALSE_FAILURE = 1e-6
P = torch.tensor([0.05, 0.0, 0.2, 0.3, 0.0, 0.15, 0.3])  # 5 non-zero categories: 4 degrees of freedom


def chi2_quantile(df, tail):
    assert df % 2 == 0
    k = df // 2

    def survival(x):
        return math.exp(-x / 2) * sum((x / 2) ** i / math.factorial(i) for i in range(k))

    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if survival(mid) > tail else (lo, mid)
    return hi


def check_frequencies(draws, p):
    counts = torch.bincount(draws.flatten().cpu(), minlength=len(p)).double()
    assert counts[p == 0].sum() == 0, f"a category of probability 0 was drawn: {counts}"
    n = counts.sum()
    expected = n * p.double() / p.sum()
    nz = p > 0
    stat = ((counts[nz] - expected[nz]) ** 2 / expected[nz]).sum().item()
    bound = chi2_quantile(int(nz.sum()) - 1, FALSE_FAILURE)
    assert stat < bound, f"chi-square {stat:.1f} >= {bound:.1f}: counts {counts.tolist()} for p {p.tolist()}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_with_replacement_frequencies(dtype, mode, no_fallback):
    p = (P * 7).to(dtype)  # unnormalized weights are allowed
    torch.tpu.manual_seed(0)
    draws = torch.multinomial(p.to("tpu"), 20000, replacement=True)
    assert draws.dtype == torch.int64 and draws.shape == (20000,) and draws.device.type == "tpu"
    check_frequencies(draws, p.float())


def test_single_draw_per_row_frequencies(mode, no_fallback):
    # One sample per row is the path generate() takes (the exponential race).
    torch.tpu.manual_seed(1)
    draws = torch.multinomial(P.repeat(20000, 1).to("tpu"), 1)
    assert draws.shape == (20000, 1)
    check_frequencies(draws, P)


def test_without_replacement(no_fallback):
    torch.tpu.manual_seed(2)
    draws = torch.multinomial(P.repeat(4000, 1).to("tpu"), 5).cpu()
    assert draws.shape == (4000, 5)
    for row in draws:
        assert len(set(row.tolist())) == 5  # no repeats
    # Five draws from five non-zero categories: every row is a permutation of them...
    assert set(draws.flatten().tolist()) == {0, 2, 3, 5, 6}
    # ...and the first draw of a row is a single draw from P.
    check_frequencies(draws[:, 0], P)
    # Asking for more than the non-zero categories takes the zeros last.
    tail = torch.multinomial(P.repeat(100, 1).to("tpu"), 7).cpu()[:, 5:]
    assert set(tail.flatten().tolist()) == {1, 4}


def test_deterministic_for_a_seed(no_fallback):
    p = P.to("tpu")
    torch.manual_seed(5)  # seeds the tpu generator too
    a = torch.multinomial(p, 50, replacement=True)
    b = torch.multinomial(p.repeat(3, 1), 2)
    torch.manual_seed(5)
    assert torch.equal(a.cpu(), torch.multinomial(p, 50, replacement=True).cpu())
    assert torch.equal(b.cpu(), torch.multinomial(p.repeat(3, 1), 2).cpu())
    g = torch.Generator(device="tpu").manual_seed(9)
    c = torch.multinomial(p, 50, replacement=True, generator=g)
    g.manual_seed(9)
    assert torch.equal(c.cpu(), torch.multinomial(p, 50, replacement=True, generator=g).cpu())
    assert not torch.equal(a.cpu(), c.cpu())


def test_out_and_one_sync(no_fallback):
    out = torch.empty(0, dtype=torch.long, device="tpu")
    torch.multinomial(P.to("tpu"), 3, out=out)
    assert out.shape == (3,)
    p = P.to("tpu")
    torch.tpu.synchronize()
    before = torch_tpu.metrics.counters().get("host_syncs", 0)
    torch.multinomial(p, 1)
    assert torch_tpu.metrics.counters().get("host_syncs", 0) - before == 1  # the validity check


INVALID = {
    "negative": torch.tensor([0.5, -0.1, 0.6]),
    "nan": torch.tensor([0.5, float("nan"), 0.6]),
    "inf": torch.tensor([0.5, float("inf"), 0.6]),
    "zero row": torch.tensor([[0.5, 0.5], [0.0, 0.0]]),
    "negative after inf": torch.tensor([[float("inf"), 1.0], [-1.0, 1.0]]),
}


@pytest.mark.parametrize("name", sorted(INVALID))
@pytest.mark.parametrize("replacement, n", [(False, 1), (True, 1), (True, 4), (False, 2)])
def test_invalid_probabilities_raise_as_on_cpu(name, replacement, n):
    p = INVALID[name]
    with pytest.raises(RuntimeError) as cpu:
        torch.multinomial(p, n, replacement=replacement)
    with pytest.raises(RuntimeError) as tpu:
        torch.multinomial(p.to("tpu"), n, replacement=replacement)
    assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]
    torch.multinomial(P.to("tpu"), 1).cpu()  # the device stays usable


@pytest.mark.parametrize("args", [
    (torch.ones(2, 2, 2), 1, False), (torch.ones(3, dtype=torch.long), 1, False), (torch.ones(3), 0, False),
    (torch.ones(3), 4, False), (torch.ones(0), 1, True)])
def test_argument_errors_match_cpu(args):
    x, n, rep = args
    with pytest.raises(RuntimeError) as cpu:
        torch.multinomial(x, n, replacement=rep)
    with pytest.raises(RuntimeError) as tpu:
        torch.multinomial(x.to("tpu"), n, replacement=rep)
    if x.numel() > 0:  # CPU's message for 0 categories comes from an inner max() of nothing
        assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]
