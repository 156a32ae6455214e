"""Random ops on the tpu generator. Values differ from the CPU generator's (as CUDA's do), so the
tests check reproducibility (seeds, RNG state, explicit generators) and the distributions.

Statistical bounds are 6 standard errors of the statistic for the sample size used (a false
failure has probability ~1e-9 per check), so they fail on a wrong distribution, not on chance.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

N = 200_000


def se_bound(sd, n=N, k=6.0):
    return k * sd / math.sqrt(n) + 1e-12  # exact results (p = 0 or 1) have a zero bound


def draw(fn, seed=1234):
    torch.manual_seed(seed)
    return fn().cpu()


# ---- reproducibility ---------------------------------------------------------------------------
GENERATORS = {
    "rand": lambda: torch.rand(1000, device="tpu"),
    "randn": lambda: torch.randn(999, device="tpu"),  # odd: Box-Muller pairs are cut
    "randint": lambda: torch.randint(-5, 17, (1000,), device="tpu"),
    "bernoulli": lambda: torch.bernoulli(torch.full((1000,), 0.3, device="tpu")),
    "normal_tensor": lambda: torch.normal(torch.zeros(1000, device="tpu"), 2.0),
    "exponential": lambda: torch.empty(1000, device="tpu").exponential_(),
    "dropout": lambda: F.dropout(torch.ones(1000, device="tpu"), 0.4),
    "rand_f64": lambda: torch.rand(1000, dtype=torch.float64, device="tpu"),
}


@pytest.mark.parametrize("name", list(GENERATORS))
def test_seed_replays_and_draws_differ(mode, no_fallback, name):
    fn = GENERATORS[name]
    a = draw(fn)
    assert torch.equal(a, draw(fn)), "same seed, different values"
    torch.manual_seed(1234)
    first, second = fn().cpu(), fn().cpu()
    assert not torch.equal(first, second), "consecutive draws repeat"
    assert not torch.equal(a, draw(fn, seed=99)), "different seeds give the same values"


def test_same_values_in_both_modes(no_fallback):
    fn = GENERATORS["randn"]
    with torch_tpu.eager_mode("strict"):
        a = draw(fn)
    with torch_tpu.eager_mode("debug"):
        b = draw(fn)
    assert torch.equal(a, b)


def test_tpu_manual_seed_and_rng_state(mode, no_fallback):
    torch.tpu.manual_seed(7)
    a = torch.rand(500, device="tpu").cpu()
    torch.tpu.manual_seed(7)
    assert torch.equal(a, torch.rand(500, device="tpu").cpu())
    state = torch.tpu.get_rng_state()
    b = torch.randn(300, device="tpu").cpu()
    c = torch.randn(300, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(b, torch.randn(300, device="tpu").cpu())
    assert torch.equal(c, torch.randn(300, device="tpu").cpu())
    with torch.random.fork_rng(device_type="tpu"):
        torch.rand(10, device="tpu")
    assert not torch.equal(c, torch.randn(300, device="tpu").cpu())  # state moved on after fork_rng


def test_explicit_generator(mode, no_fallback):
    torch.manual_seed(0)
    before = torch.tpu.get_rng_state()
    g = torch.Generator(device="tpu").manual_seed(5)
    a = torch.rand(400, generator=g, device="tpu").cpu()
    b = torch.empty(400, device="tpu").normal_(generator=g).cpu()
    g2 = torch.Generator(device="tpu").manual_seed(5)
    assert torch.equal(a, torch.rand(400, generator=g2, device="tpu").cpu())
    assert torch.equal(b, torch.empty(400, device="tpu").normal_(generator=g2).cpu())
    assert torch.equal(before, torch.tpu.get_rng_state()), "the default generator advanced"
    with pytest.raises(RuntimeError, match="expected a tpu generator"):
        torch.rand(3, generator=torch.Generator(), device="tpu")


# ---- distributions -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_uniform(mode, no_fallback, dtype):
    torch.manual_seed(0)
    x = torch.empty(N, dtype=dtype, device="tpu").uniform_(-2.0, 3.0).cpu().double()
    assert x.min() >= -2.0 and x.max() < 3.0
    sd = 5 / math.sqrt(12)
    assert abs(x.mean() - 0.5) < se_bound(sd) + (0.02 if dtype == torch.bfloat16 else 0)
    assert abs(x.std() - sd) < se_bound(sd) + (0.02 if dtype == torch.bfloat16 else 0)
    # every tenth of the range gets its share
    counts = torch.histc(x, bins=10, min=-2.0, max=3.0)
    p = 0.1
    assert (counts / N - p).abs().max() < se_bound(math.sqrt(p * (1 - p))) + (0.02 if dtype == torch.bfloat16 else 0)
    y = torch.rand(3, 4, device="tpu").t()  # non-contiguous in-place target
    y.uniform_()
    y = y.cpu()
    assert ((y >= 0) & (y < 1)).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_normal(mode, no_fallback, dtype):
    torch.manual_seed(0)
    x = torch.empty(N, dtype=dtype, device="tpu").normal_(1.5, 2.0).cpu().double()
    slack = 0.02 if dtype == torch.bfloat16 else 0
    assert torch.isfinite(x).all()
    assert abs(x.mean() - 1.5) < se_bound(2.0) + slack
    assert abs(x.std() - 2.0) < se_bound(2.0 / math.sqrt(2)) + slack
    z = (x - 1.5) / 2.0
    for bound, p in [(1.0, 0.682689), (2.0, 0.954500)]:
        frac = (z.abs() < bound).double().mean()
        assert abs(frac - p) < se_bound(math.sqrt(p * (1 - p))) + slack


def test_normal_tensor_forms(mode, no_fallback):
    torch.manual_seed(0)
    mean = torch.tensor([-10.0, 0.0, 10.0], device="tpu").repeat(N // 3)
    std = torch.tensor([1.0, 2.0, 0.5], device="tpu").repeat(N // 3)
    for x, m, s in [(torch.normal(mean, 1.0), mean, torch.ones_like(mean)),
                    (torch.normal(3.0, std), torch.full_like(std, 3.0), std),
                    (torch.normal(mean, std), mean, std)]:
        z = ((x - m) / s).cpu().double()
        assert abs(z.mean()) < se_bound(1.0) and abs(z.std() - 1) < se_bound(1 / math.sqrt(2))
    out = torch.empty(0, device="tpu")
    torch.normal(mean[:6], std[:6], out=out)
    assert out.shape == (6,)
    assert torch.normal(torch.zeros(2, 1, device="tpu"), torch.ones(3, device="tpu")).shape == (2, 3)
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(0.0, torch.tensor([1.0, -1.0], device="tpu"))


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
def test_bernoulli_float(mode, no_fallback, p):
    torch.manual_seed(0)
    x = torch.empty(N, device="tpu").bernoulli_(p).cpu()
    assert set(x.unique().tolist()) <= {0.0, 1.0}
    assert abs(x.double().mean() - p) < se_bound(math.sqrt(p * (1 - p)))
    y = torch.empty(10, dtype=torch.bool, device="tpu").bernoulli_(p).cpu()
    assert y.dtype == torch.bool and (y.all() if p == 1 else True) and (not y.any() if p == 0 else True)


def test_bernoulli_tensor(mode, no_fallback):
    torch.manual_seed(0)
    p = torch.tensor([0.0, 0.25, 0.9, 1.0], device="tpu").repeat(N // 4)
    for x in [torch.bernoulli(p), torch.empty(N, dtype=torch.int64, device="tpu").bernoulli_(p),
              torch.empty(N // 4, 4, device="tpu").bernoulli_(p.view(-1, 4)[:1]).view(-1)]:
        means = x.cpu().double().view(-1, 4).mean(0)
        for m, q in zip(means.tolist(), [0.0, 0.25, 0.9, 1.0]):
            assert abs(m - q) < se_bound(math.sqrt(q * (1 - q)), n=N // 4)
    out = torch.empty(0, device="tpu")
    torch.bernoulli(p[:8], out=out)
    assert out.shape == (8,)


@pytest.mark.parametrize("dtype,low,high", [
    (torch.int64, -5, 17), (torch.int32, 0, 3), (torch.uint8, 10, 256), (torch.int8, -128, 127),
    (torch.float32, -100, 100), (torch.bfloat16, 0, 64), (torch.int64, 0, 2**40), (torch.int64, -2**62, 2**62),
])
def test_randint(mode, no_fallback, dtype, low, high):
    torch.manual_seed(0)
    x = torch.randint(low, high, (N,), dtype=dtype, device="tpu").cpu()
    assert x.dtype == dtype
    xd = x.double()
    assert xd.min() >= low and xd.max() < high
    assert (xd == xd.round()).all()
    span = high - low
    sd = span / math.sqrt(12)
    assert abs(xd.mean() - (low + high - 1) / 2) < se_bound(sd)
    if span <= 256:
        assert x.unique().numel() == span  # every value is drawn


@pytest.mark.parametrize("dtype,top", [
    (torch.uint8, 255), (torch.int8, 127), (torch.int16, 32767), (torch.int64, 2**63 - 1),
    (torch.float32, 2**24), (torch.bfloat16, 2**8), (torch.bool, 1),
])
def test_random_default_range(mode, no_fallback, dtype, top):
    torch.manual_seed(0)
    x = torch.empty(N, dtype=dtype, device="tpu").random_().cpu().double()
    assert x.min() >= 0 and x.max() <= top
    assert abs(x.mean() - top / 2) < se_bound(top / math.sqrt(12)) + 1e-3 * top


def test_random_forms(mode, no_fallback):
    torch.manual_seed(0)
    x = torch.empty(N, dtype=torch.int64, device="tpu").random_(7).cpu()
    assert x.min() == 0 and x.max() == 6
    y = torch.empty(N, dtype=torch.int64, device="tpu").random_(-2**63, None).cpu().double()
    assert (y < 0).any() and (y > 0).any() and abs(y.mean()) < se_bound(2**64 / math.sqrt(12))
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
        torch.empty(3, device="tpu").random_(5, 5)
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds"):
        torch.empty(3, dtype=torch.int8, device="tpu").random_(0, 200)


def test_exponential(mode, no_fallback):
    torch.manual_seed(0)
    x = torch.empty(N, device="tpu").exponential_(4.0).cpu().double()
    assert x.min() >= 0 and torch.isfinite(x).all()
    assert abs(x.mean() - 0.25) < se_bound(0.25)
    assert abs((x > 0.25).double().mean() - math.exp(-1)) < se_bound(0.5)
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0"):
        torch.empty(3, device="tpu").exponential_(0)


def test_argument_errors():
    x = torch.empty(3, device="tpu")
    with pytest.raises(RuntimeError, match=r"uniform_ expects to return a \[from, to\) range"):
        x.uniform_(1, 0)
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        x.normal_(0, -1)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        x.bernoulli_(1.5)
    with pytest.raises(NotImplementedError):
        torch.empty(3, dtype=torch.int64, device="tpu").uniform_()


# ---- dropout -----------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_keep_rate_and_scale(mode, no_fallback, p, dtype):
    torch.manual_seed(0)
    x = (torch.rand(N) + 0.5).to(dtype)
    y = F.dropout(x.to("tpu"), p, training=True).cpu()
    kept = y != 0
    assert abs(kept.double().mean() - (1 - p)) < se_bound(math.sqrt(p * (1 - p)))
    # kept values are x / (1 - p), rounded once as on the CPU
    expected = (x.float() * (1.0 / (1 - p))).to(dtype)
    assert torch.equal(y[kept], expected[kept])


def test_dropout_backward_uses_the_mask(mode, no_fallback):
    torch.manual_seed(0)
    x = (torch.rand(1000, device="tpu") + 0.5).requires_grad_()
    g = torch.rand(1000) + 0.5
    y = F.dropout(x, 0.3, training=True)
    y.backward(g.to("tpu"))
    kept = (y != 0).cpu()
    grad = x.grad.cpu()
    assert torch.equal(grad != 0, kept)
    torch.testing.assert_close(grad[kept], g[kept] / 0.7)


def test_dropout_edge_cases(mode, no_fallback):
    x = torch.rand(100, device="tpu") + 0.5
    assert torch.equal(F.dropout(x, 0.0, training=True).cpu(), x.cpu())
    assert (F.dropout(x, 1.0, training=True).cpu() == 0).all()
    assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), x.cpu())
    out, mask = torch.ops.aten.native_dropout(x, 0.5, False)
    assert torch.equal(out.cpu(), x.cpu()) and mask.dtype == torch.bool and mask.cpu().all()
    m = torch.nn.Dropout(0.25).to("tpu")
    torch.manual_seed(3)
    a = m(x).cpu()
    torch.manual_seed(3)
    assert torch.equal(a, m(x).cpu())
    m.eval()
    assert torch.equal(m(x).cpu(), x.cpu())
