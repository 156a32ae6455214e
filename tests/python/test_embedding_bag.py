"""embedding_bag (sum / mean / max) forward and backward on the device vs PyTorch's CPU kernels:
padding_idx, per_sample_weights, include_last_offset, empty bags, 2-D input, int32 indices,
dtypes, strided inputs, no_grad (the forward-only op), and PyTorch's errors.

Where PyTorch 2.13's CPU kernel departs from the documented semantics the expected values are
built from CPU ops that follow the documentation instead: scale_grad_by_freq (pytorch#190063)
and indices after include_last_offset's terminal offset (its slow path folds them into the last
bag). Gradients use rtol 1e-5 (rows are summed in another order).
"""
import re

import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401

INDICES = torch.tensor([1, 2, 3, 4, 2, 7, 7, 0, 9, 5])
OFFSETS = torch.tensor([0, 2, 2, 4, 5])  # bag 1 is empty


def weight(dtype=torch.float32, rows=10, dim=3):
    return torch.randn(rows, dim, generator=torch.Generator().manual_seed(0)).to(dtype)


def run(device, w, indices, offsets=None, psw=None, **kw):
    """Output, weight gradient and per_sample_weights gradient for one embedding_bag call."""
    w = w.detach().clone().to(device).requires_grad_()
    if psw is not None:
        psw = psw.detach().clone().to(device).requires_grad_()
    out = F.embedding_bag(indices.to(device), w, None if offsets is None else offsets.to(device),
                          per_sample_weights=psw, **kw)
    # A non-uniform upstream gradient, so each bag's gradient is distinct.
    g = torch.linspace(-1, 2, out.numel()).view(out.shape).to(out.dtype)
    out.backward(g.to(device))
    return out.detach().cpu(), w.grad.cpu(), None if psw is None else psw.grad.cpu()


def compare(*args, rtol=1e-5, atol=1e-6, **kw):
    expected = run("cpu", *args, **kw)
    actual = run("tpu", *args, **kw)
    for a, e, what in zip(actual, expected, ("output", "weight.grad", "per_sample_weights.grad")):
        if e is None:
            continue
        torch.testing.assert_close(a, e, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("mode_name", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2, 7])
def test_bags_match_cpu(mode_name, padding_idx, mode, no_fallback):
    compare(weight(), INDICES, OFFSETS, mode=mode_name, padding_idx=padding_idx)


@pytest.mark.parametrize("mode_name", ["sum", "mean", "max"])
def test_include_last_offset(mode_name, no_fallback):
    offsets = torch.cat([OFFSETS, torch.tensor([len(INDICES)])])
    compare(weight(), INDICES, offsets, mode=mode_name, include_last_offset=True)


@pytest.mark.parametrize("n,bags", [(96, 40), (700, 240), (1, 3), (129, 2)])  # shifts: 7, 10, none, 8
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_many_bags_find_their_indices(n, bags, include_last_offset, no_fallback):
    """Each index finds its bag by a running maximum of the bag numbers scattered to their
    offsets (n of 1 and 129: no shift, and one more than a power of two): against CPU, empty bags
    (repeated offsets, offsets at the end) included."""
    g = torch.Generator().manual_seed(n)
    indices = torch.randint(0, 50, (n,), generator=g)
    offsets = torch.sort(torch.randint(0, n + 1, (bags,), generator=g)).values
    offsets[0] = 0
    if include_last_offset:
        offsets[-1] = n  # the terminal offset
    for mode_name in ("sum", "max"):
        compare(weight(rows=50), indices, offsets, mode=mode_name, include_last_offset=include_last_offset)


def test_indices_after_the_terminal_offset_belong_to_no_bag(no_fallback):
    w, offsets = weight(), torch.tensor([0, 2, 2, 4, 7])  # indices 7.. are in no bag
    actual = run("tpu", w, INDICES, offsets, mode="mean", include_last_offset=True)
    expected = run("cpu", w, INDICES[:7], offsets, mode="mean", include_last_offset=True)
    for a, e in zip(actual[:2], expected[:2]):
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize("padding_idx", [None, 7])
def test_per_sample_weights(padding_idx, mode, no_fallback):
    psw = torch.rand(len(INDICES), generator=torch.Generator().manual_seed(1))
    compare(weight(), INDICES, OFFSETS, psw=psw, mode="sum", padding_idx=padding_idx)


@pytest.mark.parametrize("mode_name", ["sum", "mean", "max"])
def test_2d_input_fixed_size_bags(mode_name, no_fallback):
    idx = torch.randint(0, 10, (6, 4), generator=torch.Generator().manual_seed(2))
    compare(weight(), idx, mode=mode_name)


def test_int32_indices_and_offsets(no_fallback):
    compare(weight(), INDICES.int(), OFFSETS.int(), mode="mean")


@pytest.mark.parametrize("mode_name", ["sum", "mean", "max"])
def test_bfloat16(mode_name, no_fallback):
    compare(weight(torch.bfloat16), INDICES, OFFSETS, mode=mode_name, rtol=1.6e-2, atol=1e-2)


def test_float64(no_fallback):
    compare(weight(torch.float64), INDICES, OFFSETS, mode="mean", rtol=1e-12, atol=1e-12)


def test_strided_weight_and_indices(no_fallback):
    base = weight(rows=3, dim=10)
    results = []
    for dev in ("cpu", "tpu"):
        leaf = base.detach().to(dev).requires_grad_()
        w = leaf.t()  # (10, 3), not contiguous
        idx = torch.arange(20).remainder(10).to(dev)[::2]  # a strided view
        assert not w.is_contiguous() and not idx.is_contiguous()
        out = F.embedding_bag(idx, w, OFFSETS.to(dev), mode="mean")
        out.backward(torch.linspace(-1, 1, out.numel()).view(out.shape).to(dev))
        results.append((out.detach().cpu(), leaf.grad.cpu()))
    torch.testing.assert_close(results[1], results[0])


def test_no_indices_gives_empty_bags(no_fallback):
    empty = torch.tensor([], dtype=torch.long)
    compare(weight(), empty, torch.tensor([0, 0, 0]), mode="mean")
    compare(weight(), empty, torch.tensor([0, 0]), mode="max")


def test_no_bags(no_fallback):
    out = F.embedding_bag(INDICES.to("tpu"), weight().to("tpu"), torch.tensor([], dtype=torch.long, device="tpu"))
    assert out.shape == (0, 3)


def test_forward_only_under_no_grad(no_fallback):
    with torch.no_grad():
        expected = F.embedding_bag(INDICES, weight(), OFFSETS, mode="max")
        actual = F.embedding_bag(INDICES.to("tpu"), weight().to("tpu"), OFFSETS.to("tpu"), mode="max")
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("mode_name", ["sum", "mean"])
def test_scale_grad_by_freq(mode_name, no_fallback):
    # Documented: each row's gradient is divided by how often its index occurs in the batch.
    _, plain_grad, _ = run("cpu", weight(), INDICES, OFFSETS, mode=mode_name)
    counts = torch.bincount(INDICES, minlength=10).clamp(min=1).unsqueeze(1)
    out, grad, _ = run("tpu", weight(), INDICES, OFFSETS, mode=mode_name, scale_grad_by_freq=True)
    torch.testing.assert_close(grad, plain_grad / counts)
    torch.testing.assert_close(out, F.embedding_bag(INDICES, weight(), OFFSETS, mode=mode_name))


def test_nn_embedding_bag_module_trains(no_fallback):
    torch.manual_seed(0)
    cpu = torch.nn.EmbeddingBag(10, 4, mode="mean")
    dev = torch.nn.EmbeddingBag(10, 4, mode="mean", _weight=cpu.weight.detach().clone()).to("tpu")
    for m, d in ((cpu, "cpu"), (dev, "tpu")):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for _ in range(3):
            loss = m(INDICES.to(d), OFFSETS.to(d)).square().sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    torch.testing.assert_close(dev.weight.detach().cpu(), cpu.weight.detach(), rtol=1e-5, atol=1e-6)


# ---- errors --------------------------------------------------------------------------------------

def errors_match(fn, *args):
    def first_line(e):
        line = str(e).split("\n")[0].split("  (Could this error message be improved?")[0]
        # ATen names a tensor's type by its device: torch.FloatTensor / tpuFloatType
        return re.sub(r"torch\.(\w+)Tensor|tpu(\w+)Type", r"<\1\2>", line)

    with pytest.raises(Exception) as cpu_err:
        fn(*args)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(*[a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args])
    assert first_line(dev_err.value) == first_line(cpu_err.value)


def test_argument_errors_match_cpu():
    E = torch.ops.aten._embedding_bag
    w = weight()
    errors_match(lambda w, i, o: E(w, i, o), w, INDICES.float(), OFFSETS)
    errors_match(lambda w, i, o: E(w, i, o), w.long(), INDICES, OFFSETS)
    errors_match(lambda w, i, o: E(w, i, o), w[0], INDICES, OFFSETS)
    errors_match(lambda w, i, o: E(w, i, o), w, INDICES, OFFSETS.view(1, -1))
    errors_match(lambda w, i, o: E(w, i, o, False, 3), w, INDICES, OFFSETS)
    errors_match(lambda w, i, o, p: E(w, i, o, False, 1, False, p), w, INDICES, OFFSETS, torch.ones(10))
    errors_match(lambda w, i, o, p: E(w, i, o, False, 0, False, p), w, INDICES, OFFSETS, torch.ones(9))
    errors_match(lambda w, i, o, p: E(w, i, o, False, 0, False, p), w, INDICES, OFFSETS, torch.ones(10).double())
    errors_match(lambda w, i, o: E(w, i, o, False, 0, False, None, True), w, INDICES, OFFSETS[:0])


@pytest.mark.parametrize("bad", ["index", "offset_past_end", "first_offset"])
def test_data_errors_raise(bad, mode):
    idx, off = INDICES.clone(), OFFSETS.clone()
    if bad == "index":
        idx[3] = 10
    elif bad == "offset_past_end":
        off[-1] = 11
    else:
        off[0] = 1
    with pytest.raises(RuntimeError):  # CPU raises too (its messages differ)
        F.embedding_bag(idx, weight(), off)
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        F.embedding_bag(idx.to("tpu"), weight().to("tpu"), off.to("tpu")).cpu()
    # The device stays usable.
    assert F.embedding_bag(INDICES.to("tpu"), weight().to("tpu"), OFFSETS.to("tpu")).cpu().shape == (5, 3)


def test_sparse_gradients_are_refused():
    w = weight().to("tpu").requires_grad_()
    out = F.embedding_bag(INDICES.to("tpu"), w, OFFSETS.to("tpu"), sparse=True)
    with pytest.raises(NotImplementedError, match="sparse"):
        out.sum().backward()
