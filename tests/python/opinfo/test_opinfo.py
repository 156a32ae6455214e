"""OpInfo conformance, fast subset: ~60 ops that real models run most, float32, forward and
gradients against CPU (tests/python/opinfo/walker.py). The whole database, every dtype, is
`python -m tests.python.opinfo.report` (docs/ops.md)."""
from __future__ import annotations

import pytest
import torch

import torch_tpu

from . import walker
from .compare import Mismatch

# What transformers, CNN heads and training loops run most (conv/pool/batch norm are elsewhere).
SUBSET = [
    # elementwise arithmetic and math
    "add", "sub", "mul", "div.no_rounding_mode", "pow", "neg", "abs", "exp", "log", "sqrt", "rsqrt",
    "tanh", "sigmoid", "erf", "clamp", "where", "maximum", "minimum", "lerp", "addcmul", "addcdiv",
    "eq", "lt", "masked_fill", "nan_to_num",
    # reductions
    "sum", "mean", "amax", "argmax", "max.reduction_with_dim", "var", "std", "logsumexp", "cumsum",
    "norm",
    # linear algebra
    "mm", "bmm", "addmm", "baddbmm", "matmul", "nn.functional.linear",
    # activations, normalization, attention, losses
    "softmax", "log_softmax", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    "nn.functional.layer_norm", "nn.functional.rms_norm", "nn.functional.scaled_dot_product_attention",
    "nn.functional.cross_entropy", "nn.functional.nll_loss", "nn.functional.mse_loss",
    "nn.functional.embedding", "nn.functional.dropout",
    # shapes, views and indexing
    "view", "reshape", "permute", "transpose", "expand", "cat", "stack", "split", "narrow",
    "squeeze", "unsqueeze", "index_select", "gather", "scatter_add", "index_put", "triu", "topk",
    "sort", "arange", "full_like", "flip",
]


@pytest.fixture(scope="module")
def ops():
    with torch_tpu.eager_mode("strict"):
        yield dict(zip(SUBSET, walker.find_ops(SUBSET)))


# Known differences on the pjrt backend (XLA's CPU plugin), strict so that a fix removes them.
_PJRT_XFAIL = {
    # XLA's pow/log give the exponent's gradient (sum over a broadcast dim of g * x**y * log(x))
    # 2.8e-6 relative (1.4e-4 absolute on ~49) away from PyTorch CPU's float32, over the suite's
    # 1.3e-6; not yet judged against float64.
    "pow": "pow's exponent gradient differs from CPU float32 by 2.8e-6 relative (XLA's pow/log)",
}
_ON_PJRT = torch_tpu.config.get("backend") == "pjrt"


def _params():
    for name in SUBSET:
        marks = ()
        if _ON_PJRT and name in _PJRT_XFAIL:
            marks = pytest.mark.xfail(reason=f"pjrt backend: {_PJRT_XFAIL[name]}", strict=True)
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_float32_matches_cpu(ops, name):
    res = walker.check_op(ops[name], torch.float32)
    assert res.status in ("native", "fallback"), f"{name}: {res.status}: {res.error}"
    assert res.samples > 0
    assert res.grad != "fails", f"{name} gradients: {res.grad_error}"
    assert not res.error_problems, f"{name}: error inputs: {res.error_problems}"


# The harness itself must be able to fail: an op whose device result differs from CPU's in
# value, dtype, aliasing or contiguity is reported as failing, never as a pass.
class _FakeOp:
    """Stands in for an OpInfo: `fn` runs on both devices, `cpu_fn` on CPU only if given."""

    def __init__(self, fn, name="fake"):
        self.fn, self.name, self.variant_test_name = fn, name, ""
        self.supports_autograd, self.has_nondeterministic_output = True, False

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def supported_dtypes(self, device):
        return {torch.float32}

    def supported_backward_dtypes(self, device):
        return {torch.float32}

    def error_inputs(self, device):
        from torch.testing._internal.opinfo.core import ErrorInput, SampleInput

        return [ErrorInput(SampleInput(-torch.ones(3)), error_regex="all negative")]

    def sample_inputs(self, device, dtype, requires_grad=False):
        from torch.testing._internal.opinfo.core import SampleInput

        g = torch.Generator().manual_seed(0)
        x = torch.randn(4, 5, generator=g, dtype=dtype).requires_grad_(requires_grad)
        return [SampleInput(x)]


def _on_tpu(t):
    return t.device.type == "tpu"


@pytest.mark.parametrize("fn, why", [
    (lambda x: x * (1.001 if _on_tpu(x) else 1.0), "Tensor-likes are not close"),
    (lambda x: x.double() if _on_tpu(x) else x * 1, "dtype"),
    (lambda x: x.t().clone() if _on_tpu(x) else x.t(), "view of input"),
    (lambda x: x.t() if _on_tpu(x) else x.t().clone(), "view of input"),
    (lambda x: torch.empty_strided(x.shape, (1, 4), device=x.device).copy_(x) if _on_tpu(x) else x * 1,
     "not contiguous"),
    (lambda x: (x.exp(), x.detach().zero_())[0] if _on_tpu(x) else x.exp(), "inputs after the call"),
    (lambda x: x[:2] if _on_tpu(x) else x[:3], "shape"),
    (lambda x: (x * 2).cpu(), "not on the tpu device"),
])
def test_harness_reports_mismatches(fn, why):
    res = walker.check_op(_FakeOp(fn), torch.float32, grad=False)
    assert res.status == "fails" and why in res.error, res


def test_harness_reports_wrong_gradients():
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * (3 if _on_tpu(g) else 2)

    res = walker.check_op(_FakeOp(Scaled.apply), torch.float32)
    assert res.status == "native" and res.grad == "fails" and "grad" in res.grad_error, res


def test_harness_checks_indices_of_ties():
    # topk's indices may order equal elements freely, but must select the elements CPU's select.
    def shifted(x):
        v, i = torch.topk(x, 2)
        return (v, (i + 1) % x.shape[-1]) if _on_tpu(x) else (v, i)

    res = walker.check_op(_FakeOp(shifted, name="topk"), torch.float32, grad=False)
    assert res.status == "fails" and "ties: the indices select other values" in res.error, res


def test_harness_reports_missing_errors():
    def picky(x):  # CPU refuses an all-negative input, the "device" does not
        if not _on_tpu(x) and bool((x < 0).all()):
            raise RuntimeError("all negative")
        return x * 2

    res = walker.check_op(_FakeOp(picky), torch.float32, grad=False)
    assert res.status == "native" and res.error_inputs == 1, res
    assert len(res.error_problems) == 1 and "accepted" in res.error_problems[0], res


_LIB = torch.library.Library("opinfo_test", "DEF")
_LIB.define("twice(Tensor x) -> Tensor")
_LIB.impl("twice", lambda x: x * 2, "CPU")  # no tpu kernel: the device reaches it by the fallback


def test_harness_counts_fallbacks():
    res = walker.check_op(_FakeOp(torch.ops.opinfo_test.twice), torch.float32, grad=False)
    assert res.status == "fallback" and res.fallback_ops == ["opinfo_test::twice"], res


def test_mismatch_is_assertion_error():
    assert issubclass(Mismatch, AssertionError)
