"""Runs PyTorch's OpInfo database (op_db) on CPU and on the tpu device and compares the results.

For one OpInfo and one dtype, check_op() draws the op's CPU sample inputs and runs each on CPU
and on the device (a copy with the same strides, offsets and aliasing), comparing values,
dtypes, shapes, aliasing, contiguity and the inputs after the call (an op must mutate exactly
what CPU mutates). The samples run through the function variant, again made non-contiguous,
through the in-place variant and with out=. In float32, differentiable ops also compare the
gradients of every input that requires grad (backward from a fixed random cotangent), and
OpInfo's error inputs must raise on the device as on CPU. Each (op, dtype) gets one status:

  native    every sample matched CPU and nothing ran through the CPU fallback
  fallback  every sample matched CPU, but some op ran through the CPU fallback
  fails     a sample mismatched, or raised on the device while CPU succeeded
  skipped   CPU itself fails on every sample, or the op has no CPU kernel for the dtype

A mismatch is never a pass: samples the harness cannot judge (random values) compare dtypes and
shapes only, and are counted as such (`values_checked`, `unverified_samples`). Each sample is
guarded by try/except (no timeouts); samples over MAX_SAMPLE_ELEMENTS are skipped.
"""
from __future__ import annotations

import dataclasses
import os
import time
import warnings

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402

import torch_tpu  # noqa: E402

from . import policy  # noqa: E402
from .compare import (  # noqa: E402
    Mismatch, check_layout, compare, float64_note, judge, judge_grads, same_up_to_ties, tensors_of)

DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64)
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.int64: "int64", torch.bool: "bool",
               torch.complex64: "complex64"}
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
    error_inputs: int = 0  # OpInfo error inputs that CPU rejects as declared (float32 row only)
    error_problems: list = dataclasses.field(default_factory=list)  # how the device differs
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------
# Moving a sample to the device


def _is_cpu_device(d) -> bool:
    return (isinstance(d, str) and d.split(":")[0] == "cpu") or (isinstance(d, torch.device) and d.type == "cpu")


def to_device(x):
    """A copy of a sample (argument) on the device: leaves keep requires_grad; strides, storage
    offsets and aliasing between its tensors are kept (an out= that overlaps an input must still
    overlap it); `device="cpu"` (a factory's argument) becomes the tpu device."""
    counts: dict = {}
    for t in tensors_of(x):
        if t.layout == torch.strided:
            counts[_storage_key(t)] = counts.get(_storage_key(t), 0) + 1
    shared = {k for k, n in counts.items() if n > 1}
    return _move(x, None, shared, {})


def _storage_key(t):
    return t.untyped_storage().data_ptr(), t.dtype


def _move(x, key, shared, storages):
    if isinstance(x, torch.Tensor):
        with torch.no_grad():
            t = _move_tensor(x.detach(), shared, storages)
        return t.requires_grad_(x.requires_grad) if x.requires_grad else t
    if key == "device" and _is_cpu_device(x):
        return torch.device(DEVICE) if isinstance(x, torch.device) else DEVICE
    if isinstance(x, torch.device) and x.type == "cpu":
        return torch.device(DEVICE)
    if isinstance(x, list):
        return [_move(v, None, shared, storages) for v in x]
    if isinstance(x, tuple):
        return tuple(_move(v, None, shared, storages) for v in x)
    if isinstance(x, dict):
        return {k: _move(v, k, shared, storages) for k, v in x.items()}
    return x


def _move_tensor(x, shared, storages):
    """x with its strides and storage offset, as a view of its whole storage moved once (.to()
    would make a non-dense tensor contiguous, drop the offset and separate aliases)."""
    if x.device.type != "cpu":
        return x  # a meta tensor (error inputs about devices) stays as it is
    if x.layout != torch.strided:
        return x.to(DEVICE)
    key = _storage_key(x)
    if key not in shared and x.is_contiguous() and x.storage_offset() == 0:
        return x.to(DEVICE)
    if key not in storages:
        n = x.untyped_storage().nbytes() // x.element_size()
        storages[key] = x.new_empty(0).set_(x.untyped_storage(), 0, (n,)).to(DEVICE)
    return storages[key].as_strided(x.shape, x.stride(), x.storage_offset())


def _names_device(x, kind) -> bool:
    """Whether a (moved) sample names a device of `kind` as an argument (`x.to("cpu")`)."""
    if isinstance(x, (list, tuple)):
        return any(_names_device(v, kind) for v in x)
    if isinstance(x, dict):
        return any(_names_device(v, kind) for v in x.values())
    if isinstance(x, str):
        return x.split(":")[0] == kind
    return isinstance(x, torch.device) and x.type == kind


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


def run_sample(op, sample, tol, judge_how, values, with_grad, seed, grad_fallbacks, fn=None):
    """Returns (values compared, gradients compared, gradient error). Raises _CpuFailed if CPU
    fails, Mismatch (or the device's exception) if the device does. The device copies are made
    before CPU runs (the op may mutate its inputs). Backward fallbacks go to `grad_fallbacks`.
    `fn` is what runs (a variant of the op; default the op itself)."""
    fn = fn or op
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
        expected = fn(sample.input, *sample.args, **sample.kwargs)
        if with_grad:
            targets = _grad_targets(expected, sample)
            cots = _cotangents(targets, seed)
            cpu_grads = (torch.autograd.grad(targets, cpu_leaves, cots, allow_unused=True)
                         if targets and cpu_leaves else None)
    except Exception as e:
        raise _CpuFailed(e) from None

    actual = fn(dev[0], *dev[1], **dev[2])
    actual_cpu = _to_cpu(actual)  # a sync point: errors queued by the op are raised here
    try:
        compare(actual_cpu, expected, tol, values=values)
    except Mismatch as e:
        ties = policy.tie_indices(op, sample) if values else None
        if ties:  # index results that may order equal elements differently
            why = same_up_to_ties(sample.input, actual_cpu, expected, *ties, tol)
        elif values and judge_how:
            why = judge(judge_how, op, sample, actual_cpu, expected)
        else:
            raise Mismatch(str(e) + float64_note(op, sample, actual_cpu, expected)) from None
        if why is not None:
            raise Mismatch(f"{e} [{'ties' if ties else judge_how}: {why}]") from None
    if values:
        # A call with no device tensor nor device argument (torch.arange(2)) makes CPU tensors.
        on_device = bool(dev_inputs) or _names_device(dev, DEVICE)
        check_layout(actual, expected, dev_inputs, cpu_inputs, to_cpu=not on_device or _names_device(dev, "cpu"))
        # Inputs the result aliases (an in-place op's self) were compared as the result.
        out_storages = {t.untyped_storage().data_ptr() for t in tensors_of(expected) if t.layout == torch.strided}
        kept = [i for i, t in enumerate(cpu_inputs)
                if t.layout != torch.strided or t.untyped_storage().data_ptr() not in out_storages]
        compare(_to_cpu([dev_inputs[i] for i in kept]), [cpu_inputs[i] for i in kept], tol,
                path="inputs after the call")
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


def wants_grad(op, dtype) -> bool:
    return (dtype == torch.float32 and op.supports_autograd
            and dtype in op.supported_backward_dtypes("cpu")
            and not policy.is_random(op))


VARIANT_DTYPES = DTYPES  # dtypes whose samples also run non-contiguous and in place


def _detached(x):
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_detached(v) for v in x) if not hasattr(x, "_fields") else [_detached(v) for v in x]
    if isinstance(x, dict):
        return {k: _detached(v) for k, v in x.items()}
    return x


def variants(op, samples):
    """(name, callable, samples) for the passes over one dtype's samples: the function variant
    (with gradients); the same samples made non-contiguous (strided views on both sides); the
    in-place variant (on copies: it mutates its input); and out= into empty tensors."""
    from torch.testing._internal.opinfo.core import SampleInput

    def plain(s):
        return SampleInput(_detached(s.input), args=_detached(s.args), kwargs=_detached(s.kwargs),
                           output_process_fn_grad=s.output_process_fn_grad)

    yield "", op, samples
    strided = [s for s in samples
               if all(t.layout == torch.strided for t in tensors_of([s.input, s.args, s.kwargs]))]
    yield "non-contiguous", op, [plain(s).noncontiguous() for s in strided]
    inplace = op.get_inplace() if hasattr(op, "get_inplace") else None
    if inplace is not None:
        yield "in-place", inplace, [plain(s) for s in samples if isinstance(s.input, torch.Tensor)]
    if getattr(op, "supports_out", False):
        yield "out=", _with_out(op), [plain(s) for s in samples]


def _with_out(op):
    """op(..., out=...) into empty tensors (that out= must resize), on the input's device; the
    functional call only gives the number, dtypes and devices of the results."""
    def fn(*args, **kwargs):
        with torch.no_grad():
            ref = op(*args, **kwargs)
        if isinstance(ref, torch.Tensor):
            out = ref.new_empty(0)
        elif isinstance(ref, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in ref):
            out = tuple(t.new_empty(0) for t in ref)
        else:
            raise _CpuFailed("no tensor result to write out= into")
        return op(*args, **kwargs, out=out)

    return fn


def check_op(op, dtype, max_samples=None, grad=True, with_variants=True, errors_too=None, progress=None) -> Result:
    """Compares `op` on CPU and the device for one dtype. with_variants: also the non-contiguous
    and in-place passes; errors_too (default: for float32): also OpInfo's error inputs."""
    name = op_id(op)
    errors_too = dtype == torch.float32 if errors_too is None else errors_too
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
        small = [s for s in samples if _numel(s) <= MAX_SAMPLE_ELEMENTS]
        res.skipped_samples = len(samples) - len(small)
        samples = small
        if max_samples is not None:
            samples = samples[:max_samples]
        passes = variants(op, samples) if with_variants and dtype in VARIANT_DTYPES else [("", op, samples)]
        for variant, fn, pass_samples in passes:
            prefix = f"{variant}: " if variant else ""
            for i, sample in enumerate(pass_samples):
                described = _describe(sample)  # before the op may mutate (or resize) its inputs
                before = torch_tpu.metrics.fallback_ops()
                sample_grad_fallbacks: dict[str, int] = {}
                try:
                    checked_values, checked, gerr = run_sample(
                        op, sample, tol, judge_how, values, with_grad and not variant, i,
                        sample_grad_fallbacks, fn=fn)
                except _CpuFailed:
                    res.skipped_samples += not variant
                    continue
                except Exception as e:
                    _drain()
                    res.samples += not variant
                    if not res.error:
                        res.error = f"{prefix}sample {i} ({described}): {_error_text(e)}"
                    continue
                finally:
                    _merge_fallbacks(fallbacks, before, exclude=sample_grad_fallbacks)
                    for k, v in sample_grad_fallbacks.items():
                        grad_fallbacks[k] = grad_fallbacks.get(k, 0) + v
                if progress is not None:
                    progress()  # a sample done: the walk is alive, however many samples an op has
                res.samples += not variant
                res.unverified_samples += not checked_values and not variant
                grad_checked += checked
                if gerr and not res.grad_error:
                    res.grad_error = f"sample {i} ({described}): {gerr}"
        if errors_too:
            check_error_inputs(op, res)
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


def check_error_inputs(op, res) -> None:
    """OpInfo's error inputs: where CPU raises the declared error, the device must raise the same
    exception type with a matching message (not necessarily at the call: strict mode may raise
    data-dependent errors at the next sync)."""
    import re

    try:
        errors = list(op.error_inputs("cpu"))
    except Exception:
        return
    for k, ei in enumerate(errors):
        s = ei.sample_input
        if _numel(s) > MAX_SAMPLE_ELEMENTS or any(t.is_complex() for t in tensors_of([s.input, s.args, s.kwargs])):
            continue  # the float32 row's error inputs; complex ops are judged by the complex64 samples
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                op(s.input, *s.args, **s.kwargs)
            continue  # CPU accepts it (the error is for another device)
        except Exception as e:
            if not (isinstance(e, ei.error_type) and re.search(ei.error_regex, str(e))):
                continue
        res.error_inputs += 1
        try:
            dev = to_device([s.input, s.args, s.kwargs])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _to_cpu(op(dev[0], *dev[1], **dev[2]))
                _sync()
        except Exception as e:
            _drain()
            if isinstance(e, ei.error_type) and re.search(ei.error_regex, str(e)):
                continue
            res.error_problems.append(f"error input {k} ({_describe(s)}): expected {ei.error_type.__name__} "
                                      f"matching {ei.error_regex!r}, got {_error_text(e)}")
            continue
        res.error_problems.append(f"error input {k} ({_describe(s)}): accepted; CPU raises "
                                  f"{ei.error_type.__name__} matching {ei.error_regex!r}")


def _merge_fallbacks(acc, before, exclude=None):
    """Adds the fallback calls since `before` to `acc` (less those already counted in `exclude`)."""
    after = torch_tpu.metrics.fallback_ops()
    for k, v in after.items():
        n = v - before.get(k, 0) - (exclude.get(k, 0) if exclude is not None else 0)
        if n > 0:
            acc[k] = acc.get(k, 0) + n
