"""Runs PyTorch's OpInfo database (op_db) on CPU and on the tpu device and compares the results.

For one OpInfo and one dtype, check_op() draws the op's CPU sample inputs, runs each sample on CPU
and on the device (the sample moved with .to("tpu")), and compares values, dtypes, shapes,
aliasing, contiguity and the inputs after the call (an op must mutate exactly what CPU mutates).
In float32, differentiable ops also compare the gradients of every input that requires grad
(backward from a fixed random cotangent). Each (op, dtype) gets one status:

  native    every sample matched CPU and nothing ran through the CPU fallback
  fallback  every sample matched CPU, but some op ran through the CPU fallback
  fails     a sample mismatched, or raised on the device while CPU succeeded
  skipped   CPU itself fails on every sample, or the op has no CPU kernel for the dtype

A mismatch is never a pass: samples the harness cannot judge (random values) compare dtypes and
shapes only, and are counted as such (`values_checked`).
"""
from __future__ import annotations

import dataclasses
import os
import time
import traceback
import warnings

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402

import torch_tpu  # noqa: E402

from . import policy  # noqa: E402
from .compare import (  # noqa: E402
    Mismatch, check_layout, compare, float64_note, judge, judge_grads, tensors_of)

DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool)
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.int64: "int64", torch.bool: "bool"}
MAX_SAMPLE_ELEMENTS = 1_000_000
DEVICE = "tpu"


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


def op_id(op) -> str:
    """The name used in reports: `name` or `name.variant`."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def find_ops(ids):
    by_id = {op_id(op): op for op in op_db()}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise KeyError(f"not in op_db: {missing}")
    return [by_id[i] for i in ids]


@dataclasses.dataclass
class Result:
    op: str
    dtype: str
    status: str = "skipped"  # native | fallback | fails | skipped
    grad: str = "n/a"  # same statuses, or n/a (float32 only, differentiable ops only)
    samples: int = 0  # samples compared on the device
    skipped_samples: int = 0  # CPU raised, or over MAX_SAMPLE_ELEMENTS
    values_checked: bool = True  # False for random ops: dtypes and shapes only
    unverified_samples: int = 0  # samples compared by dtype and shape only (random values)
    fallback_ops: list = dataclasses.field(default_factory=list)  # of the forward calls
    grad_fallback_ops: list = dataclasses.field(default_factory=list)  # of the backward calls
    error: str = ""  # the first failure: which sample, and why
    grad_error: str = ""
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------
# Moving a sample to the device


def _is_cpu_device(d) -> bool:
    return (isinstance(d, str) and d.split(":")[0] == "cpu") or (isinstance(d, torch.device) and d.type == "cpu")


def to_device(x, key=None):
    """A copy of a sample argument on the device: leaves keep requires_grad; `device="cpu"` (a
    factory's argument) becomes the tpu device."""
    if isinstance(x, torch.Tensor):
        with torch.no_grad():
            t = _same_strides(x.detach())
        return t.requires_grad_(x.requires_grad) if x.requires_grad else t
    if key == "device" and _is_cpu_device(x):
        return torch.device(DEVICE) if isinstance(x, torch.device) else DEVICE
    if isinstance(x, torch.device) and x.type == "cpu":
        return torch.device(DEVICE)
    if isinstance(x, list):
        return [to_device(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_device(v) for v in x)
    if isinstance(x, dict):
        return {k: to_device(v, k) for k, v in x.items()}
    return x


def _same_strides(x):
    """x on the device with x's strides and storage offset (.to() would make a non-dense tensor
    contiguous and drop the offset, and then views and copies could not be compared)."""
    if x.layout != torch.strided or x.is_contiguous() and x.storage_offset() == 0:
        return x.to(DEVICE)
    storage = x.new_empty(0).set_(x.untyped_storage(), 0, (x.untyped_storage().nbytes() // x.element_size(),))
    return storage.to(DEVICE).as_strided(x.shape, x.stride(), x.storage_offset())


def _numel(sample) -> int:
    return sum(t.numel() for t in tensors_of([sample.input, sample.args, sample.kwargs]))


def _describe(sample) -> str:
    def d(x):
        if isinstance(x, torch.Tensor):
            s = f"T{list(x.shape)}:{str(x.dtype)[6:]}"
            if x.layout != torch.strided:
                return s + f":{x.layout}"
            return s if x.is_contiguous() else s + f"/strides{list(x.stride())}"
        if isinstance(x, (list, tuple)):
            inner = ", ".join(d(v) for v in x)
            return f"[{inner}]" if isinstance(x, list) else f"({inner})"
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k}={d(v)}" for k, v in x.items()) + "}"
        return repr(x)

    text = d(sample.input)
    if sample.args:
        text += ", " + ", ".join(d(a) for a in sample.args)
    if sample.kwargs:
        text += ", " + ", ".join(f"{k}={d(v)}" for k, v in sample.kwargs.items())
    return text[:300]


# ---------------------------------------------------------------------------------------------
# Running one sample


def _sync():
    torch_tpu.synchronize()


def _grad_targets(out, sample):
    outs = sample.output_process_fn_grad(out) if sample.output_process_fn_grad else out
    return [t for t in tensors_of(outs) if t.requires_grad and t.is_floating_point()]


def _cotangents(outs, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, generator=g, dtype=t.dtype) for t in outs]


def run_sample(op, sample, tol, judge_how, values, with_grad, seed, grad_fallbacks):
    """Returns (values compared, gradients compared, gradient error). Raises _CpuFailed if CPU
    fails, Mismatch (or the device's exception) if the device does. The device copies are made
    before CPU runs (the op may mutate its inputs). Backward fallbacks go to `grad_fallbacks`."""
    if op.name in policy.CPU_TENSOR_ARGS:
        dev = [to_device(sample.input), sample.args, sample.kwargs]
    else:
        dev = to_device([sample.input, sample.args, sample.kwargs])
    values = values and not policy.random_sample(op, sample)
    with_grad = with_grad and values
    cpu_inputs, dev_inputs = tensors_of([sample.input, sample.args, sample.kwargs]), tensors_of(dev)
    cpu_leaves = [t for t in cpu_inputs if t.requires_grad]
    dev_leaves = [t for t in dev_inputs if t.requires_grad]
    try:
        expected = op(sample.input, *sample.args, **sample.kwargs)
        if with_grad:
            targets = _grad_targets(expected, sample)
            cots = _cotangents(targets, seed)
            cpu_grads = (torch.autograd.grad(targets, cpu_leaves, cots, allow_unused=True)
                         if targets and cpu_leaves else None)
    except Exception as e:
        raise _CpuFailed(e) from None

    actual = op(dev[0], *dev[1], **dev[2])
    actual_cpu = _to_cpu(actual)  # a sync point: errors queued by the op are raised here
    try:
        compare(actual_cpu, expected, tol, values=values)
    except Mismatch as e:
        if not (values and judge_how):
            raise Mismatch(str(e) + float64_note(op, sample, actual_cpu, expected)) from None
        why = judge(judge_how, op, sample, actual_cpu, expected)
        if why is not None:
            raise Mismatch(f"{e} [{judge_how}: {why}]") from None
    if values:
        check_layout(actual, expected, dev_inputs, cpu_inputs)
        compare(_to_cpu(dev_inputs), cpu_inputs, tol, path="inputs after the call")
    if not with_grad or cpu_grads is None:
        return values, False, ""
    before = torch_tpu.metrics.fallback_ops()
    try:
        dev_targets = _grad_targets(actual, sample)
        if len(dev_targets) != len(targets):
            raise Mismatch(f"{len(dev_targets)} differentiable outputs, CPU has {len(targets)}")
        dev_cots = [c.to(t.device) for c, t in zip(cots, dev_targets)]
        dev_grads = torch.autograd.grad(dev_targets, dev_leaves, dev_cots, allow_unused=True)
        dev_grads = _to_cpu(list(dev_grads))
        try:
            compare(dev_grads, list(cpu_grads), policy.grad_tolerance(op), path="grad")
        except Mismatch as e:
            if not policy.judges_grads(op):
                raise
            why = judge_grads(op, sample, cots, dev_grads, list(cpu_grads))
            if why is not None:
                raise Mismatch(f"{e} [accurate: {why}]") from None
    except Exception as e:
        _drain()
        return values, True, _error_text(e)
    finally:
        _merge_fallbacks(grad_fallbacks, before)
    return values, True, ""


class _CpuFailed(Exception):
    pass


def _to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(_to_cpu(v) for v in x) if not hasattr(x, "_fields") else [_to_cpu(v) for v in x]
    return x


def _drain():
    """After a device error: wait for (and drop) whatever the failed op left queued."""
    try:
        _sync()
    except Exception:
        pass


def _error_text(e) -> str:
    if isinstance(e, Mismatch):
        return str(e)
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    return f"{type(e).__name__}: {first[:300]}"


# ---------------------------------------------------------------------------------------------
# One (op, dtype)


def supported_dtypes(op):
    cpu = op.supported_dtypes("cpu")
    return [d for d in DTYPES if d in cpu]


def wants_grad(op, dtype) -> bool:
    return (dtype == torch.float32 and op.supports_autograd
            and dtype in op.supported_backward_dtypes("cpu")
            and not policy.is_random(op))


def check_op(op, dtype, max_samples=None, grad=True) -> Result:
    name = op_id(op)
    res = Result(name, DTYPE_NAMES[dtype])
    if dtype not in op.supported_dtypes("cpu"):
        res.error = "no CPU kernel for this dtype"
        return res
    start = time.time()
    values = policy.values_comparable(op, dtype)
    res.values_checked = values
    with_grad = grad and wants_grad(op, dtype)
    tol = policy.tolerance(op)
    judge_how = policy.judge_criterion(op, dtype)
    fallbacks: dict[str, int] = {}
    grad_fallbacks: dict[str, int] = {}
    grad_checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=with_grad))
        except Exception as e:
            res.error = f"sample_inputs failed on CPU: {_error_text(e)}"
            res.seconds = time.time() - start
            return res
        for i, sample in enumerate(samples):
            if max_samples is not None and res.samples >= max_samples:
                break
            if _numel(sample) > MAX_SAMPLE_ELEMENTS:
                res.skipped_samples += 1
                continue
            before = torch_tpu.metrics.fallback_ops()
            sample_grad_fallbacks: dict[str, int] = {}
            try:
                checked_values, checked, gerr = run_sample(op, sample, tol, judge_how, values, with_grad, i,
                                                           sample_grad_fallbacks)
            except _CpuFailed:
                res.skipped_samples += 1
                continue
            except Exception as e:
                _drain()
                res.samples += 1
                if not res.error:
                    res.error = f"sample {i} ({_describe(sample)}): {_error_text(e)}"
                continue
            finally:
                _merge_fallbacks(fallbacks, before, exclude=sample_grad_fallbacks)
                for k, v in sample_grad_fallbacks.items():
                    grad_fallbacks[k] = grad_fallbacks.get(k, 0) + v
            res.samples += 1
            res.unverified_samples += not checked_values
            grad_checked += checked
            if gerr and not res.grad_error:
                res.grad_error = f"sample {i} ({_describe(sample)}): {gerr}"
    res.fallback_ops = sorted(fallbacks)
    if res.samples == 0:
        res.status = "skipped"
        res.error = res.error or "CPU failed on every sample (or none was small enough)"
    elif res.error:
        res.status = "fails"
    else:
        res.status = "fallback" if fallbacks else "native"
    if with_grad and grad_checked:
        res.grad = "fails" if res.grad_error else ("fallback" if fallbacks or grad_fallbacks else "native")
        res.grad_fallback_ops = sorted(grad_fallbacks)
    res.seconds = round(time.time() - start, 3)
    return res


def _merge_fallbacks(acc, before, exclude=None):
    """Adds the fallback calls since `before` to `acc` (less those already counted in `exclude`)."""
    after = torch_tpu.metrics.fallback_ops()
    for k, v in after.items():
        n = v - before.get(k, 0) - (exclude.get(k, 0) if exclude is not None else 0)
        if n > 0:
            acc[k] = acc.get(k, 0) + n


def format_traceback() -> str:
    return traceback.format_exc()
