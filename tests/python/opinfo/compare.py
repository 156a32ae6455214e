"""Comparing a device result with CPU's: values, dtypes, shapes, aliasing and contiguity; and, for
the few ops policy.JUDGE names, a second opinion from the op computed in float64."""
from __future__ import annotations

import torch

from . import policy


class Mismatch(AssertionError):
    """The device result differs from CPU's (values, dtype, shape, aliasing, layout)."""


def tensors_of(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors_of(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors_of(v)]
    return []


def compare(actual, expected, tol, path="out", values=True):
    """Device result (already on CPU) vs CPU result: raises Mismatch naming the first difference.
    values=False compares the structure, dtypes and shapes only."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{path}: expected a tensor, got {type(actual).__name__}")
        if actual.dtype != expected.dtype:
            raise Mismatch(f"{path}: dtype {actual.dtype} != CPU's {expected.dtype}")
        if actual.shape != expected.shape:
            raise Mismatch(f"{path}: shape {tuple(actual.shape)} != CPU's {tuple(expected.shape)}")
        if not values:
            return
        rtol, atol = tol.get(expected.dtype, (None, None))
        try:
            torch.testing.assert_close(actual.detach(), expected.detach(), rtol=rtol, atol=atol,
                                       equal_nan=True, check_device=False)
        except AssertionError as e:
            raise Mismatch(f"{path}: {' '.join(str(e).split())[:400]}") from None
    elif isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{path}: expected a sequence of {len(expected)}, got {type(actual).__name__}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, tol, f"{path}[{i}]", values)
    elif isinstance(expected, float) and isinstance(actual, float):
        if values and not (actual == expected or (actual != actual and expected != expected)):
            try:
                torch.testing.assert_close(actual, expected, equal_nan=True)
            except AssertionError as e:
                raise Mismatch(f"{path}: {' '.join(str(e).split())}") from None
    elif actual != expected:
        raise Mismatch(f"{path}: {actual!r} != CPU's {expected!r}")


def same_up_to_ties(x, actual, expected, dim, index_pos, keepdim, tol):
    """For policy.TIE_INDICES: outputs other than the indices must match; the indices must select
    elements of x equal to those CPU's select, each at most once along `dim`. None if so."""
    act = list(actual) if index_pos is not None else [actual]
    exp = list(expected) if index_pos is not None else [expected]
    k = index_pos or 0
    try:
        compare([a for i, a in enumerate(act) if i != k], [e for i, e in enumerate(exp) if i != k], tol)
        compare(act[k], exp[k], tol, values=False)
    except Mismatch as e:
        return str(e)
    a, e = act[k], exp[k]
    if x.dim() == 0:
        return None if torch.equal(a, e) else "indices of a 0-dim input differ"
    dim = dim % x.dim()
    if not keepdim:
        a, e = a.unsqueeze(dim), e.unsqueeze(dim)
    if a.numel() == 0:
        return None
    if a.min() < 0 or a.max() >= x.size(dim):
        return "an index is out of range"
    shape = list(a.shape)
    shape[dim] = x.size(dim)
    xs = x.detach().expand(shape) if x.dim() == a.dim() else x.detach()
    ga, ge = xs.gather(dim, a), xs.gather(dim, e)
    if not torch.equal(ga.isnan(), ge.isnan()) or not torch.equal(ga[~ga.isnan()], ge[~ge.isnan()]):
        return "the indices select other values than CPU's"
    s = a.sort(dim).values
    if (s.narrow(dim, 1, s.size(dim) - 1) == s.narrow(dim, 0, s.size(dim) - 1)).any():
        return "an index repeats along the dim"
    return None


def _aliases(out, inputs):
    """Index of the input whose storage `out` shares, or None."""
    if not isinstance(out, torch.Tensor) or out.numel() == 0:
        return None
    ptr = out.untyped_storage().data_ptr()
    for i, t in enumerate(inputs):
        if t.numel() and t.untyped_storage().data_ptr() == ptr:
            return i
    return None


def check_layout(dev_out, cpu_out, dev_inputs, cpu_inputs, to_cpu=False):
    """Results are on the device (unless the call asks for the CPU: `to_cpu`); views alias what
    CPU's alias (with the same strides and offset); contiguous inputs whose CPU result is
    contiguous give a contiguous result (what .view() and memory_format rely on)."""
    cpu_outs, dev_outs = tensors_of(cpu_out), tensors_of(dev_out)
    for i, (d, c) in enumerate(zip(dev_outs, cpu_outs)):
        if c.device.type == "cpu" and d.device.type != "tpu" and not to_cpu:
            raise Mismatch(f"out{i}: on {d.device}, not on the tpu device")
    if any(t.layout != torch.strided for t in tensors_of([cpu_out, cpu_inputs])):
        return  # sparse: no strides
    all_contiguous = all(t.is_contiguous() for t in cpu_inputs)
    for i, (d, c) in enumerate(zip(dev_outs, cpu_outs)):
        ca, da = _aliases(c, cpu_inputs), _aliases(d, dev_inputs)
        if ca != da:
            if ca is not None:
                raise Mismatch(f"out{i}: CPU's result is a view of input {ca}, the device's is not")
            raise Mismatch(f"out{i}: the device's result is a view of input {da}, CPU's is a copy")
        if ca is not None and (d.stride() != c.stride() or d.storage_offset() != c.storage_offset()):
            raise Mismatch(f"out{i}: view strides/offset {d.stride()}+{d.storage_offset()} != CPU's "
                           f"{c.stride()}+{c.storage_offset()}")
        if all_contiguous and c.is_contiguous() and not d.is_contiguous():
            raise Mismatch(f"out{i}: not contiguous (strides {d.stride()}) where CPU's result is")


# ---------------------------------------------------------------------------------------------
# The float64 reference


def _in_float64(x, magnitude=False):
    """A sample argument for the float64 reference; magnitude=True takes absolute values of
    floating tensors and Python floats (the sum of |terms| of a sum of products)."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.is_floating_point():
            t = t.double()
            return t.abs() if magnitude else t
        return t
    if isinstance(x, torch.dtype) and x.is_floating_point:
        return torch.float64
    if magnitude and isinstance(x, float):
        return abs(x)
    if isinstance(x, (list, tuple)):
        vals = [_in_float64(v, magnitude) for v in x]
        return vals if isinstance(x, list) or hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, dict):
        return {k: _in_float64(v, magnitude) for k, v in x.items()}
    return x


def reference(op, sample, magnitude=False):
    """The op on the sample in float64 (None when the op refuses float64)."""
    try:
        with torch.no_grad():
            return op(*_in_float64([sample.input, *sample.args], magnitude),
                      **_in_float64(sample.kwargs, magnitude))
    except Exception:
        return None


def _float_triples(actual, expected, ref):
    for a, e, r in zip(tensors_of(actual), tensors_of(expected), tensors_of(ref)):
        if e.is_floating_point() and r.is_floating_point() and a.shape == e.shape == r.shape:
            yield a.double(), e.double(), r, e.dtype


def float64_note(op, sample, actual, expected) -> str:
    """Which of the two is closer to the op computed in float64: a diagnostic for the report (a
    mismatch stays a mismatch)."""
    ref = reference(op, sample)
    if ref is None:
        return ""
    worst_cpu = worst_dev = 0.0
    for a, e, r, _ in _float_triples(actual, expected, ref):
        ok = torch.isfinite(r) & torch.isfinite(e) & torch.isfinite(a)
        if ok.any():
            worst_cpu = max(worst_cpu, (e - r)[ok].abs().max().item())
            worst_dev = max(worst_dev, (a - r)[ok].abs().max().item())
    return f" [vs float64: CPU max error {worst_cpu:.3g}, device {worst_dev:.3g}]"


def judge(how, op, sample, actual, expected) -> str | None:
    """For an op in policy.JUDGE whose values mismatch CPU's: None when the device result is
    acceptable by the op's criterion `how`, else why not. Non-float outputs must match exactly.

    accurate: elementwise, the device is at most twice as far from the float64 result as CPU,
              plus the dtype's usual tolerance: |dev - ref| <= 2|cpu - ref| + atol + rtol|ref|.
    bilinear: a sum of products, whose rounding scales with the sum of |terms| (M, the op on the
              absolute values): |dev - cpu| <= atol + rtol * M.
    """
    ref = reference(op, sample, magnitude=(how == "bilinear"))
    if ref is None:
        return "the op has no float64 reference"
    try:
        compare(actual, expected, {}, values=False)
    except Mismatch as e:
        return str(e)
    for i, (a, e, r, dtype) in enumerate(_float_triples(actual, expected, ref)):
        rtol, atol = policy.DEFAULT.get(dtype, policy.DEFAULT[torch.float32])
        same_special = (a == e) | (torch.isnan(a) & torch.isnan(e))
        finite = torch.isfinite(e) & torch.isfinite(r)
        if how == "accurate":
            err, bound = (a - r).abs(), 2 * (e - r).abs() + atol + rtol * r.abs()
        else:
            err, bound = (a - e).abs(), atol + rtol * r
        bad = ~same_special & (~finite | ~(err <= bound))
        if bad.any():
            k = bad.nonzero()[0].tolist()
            return (f"output {i} at {k}: device {a[tuple(k)].item():.6g}, CPU {e[tuple(k)].item():.6g}, "
                    f"float64 {r[tuple(k)].item():.6g}" if how == "accurate" else
                    f"output {i} at {k}: |device - CPU| = {err[tuple(k)].item():.3g} > {bound[tuple(k)].item():.3g}")
    n_float = len(list(_float_triples(actual, expected, ref)))
    n_all = len(tensors_of(expected))
    if n_float != n_all:  # integer/bool outputs take no second opinion
        for a, e in zip(tensors_of(actual), tensors_of(expected)):
            if not e.is_floating_point() and not torch.equal(a, e):
                return "a non-float output differs"
    return None


def grad_reference(op, sample, cotangents):
    """Gradients of the op computed in float64 with the same cotangents (None if impossible)."""
    inputs = _in_float64([sample.input, sample.args, sample.kwargs])
    cpu_leaves = [t for t in tensors_of([sample.input, sample.args, sample.kwargs])]
    leaves = []
    for c, t in zip(cpu_leaves, tensors_of(inputs)):
        if c.requires_grad:
            t.requires_grad_()
            leaves.append(t)
    try:
        out = op(inputs[0], *inputs[1], **inputs[2])
        if sample.output_process_fn_grad:
            out = sample.output_process_fn_grad(out)
        targets = [t for t in tensors_of(out) if t.requires_grad]
        if len(targets) != len(cotangents):
            return None
        return torch.autograd.grad(targets, leaves, [c.double() for c in cotangents], allow_unused=True)
    except Exception:
        return None


def judge_grads(op, sample, cotangents, actual, expected) -> str | None:
    """The "accurate" criterion for gradients (policy.JUDGE_GRAD), normwise: None if each
    gradient's largest error against the float64 gradient is at most twice CPU's largest error,
    plus the float32 tolerance of the largest element (gradients mix many roundings; which
    element gets the worst of them is chance)."""
    ref = grad_reference(op, sample, cotangents)
    if ref is None:
        return "no float64 reference for the gradients"
    rtol, atol = policy.DEFAULT[torch.float32]
    for i, (a, e, r) in enumerate(zip(actual, expected, ref)):
        if e is None or a is None or r is None:
            if not (e is None and a is None):
                return f"grad {i}: defined on one side only"
            continue
        a, e = a.double(), e.double()
        same = (a == e) | (torch.isnan(a) & torch.isnan(e))
        if same.all():
            continue
        if not (torch.isfinite(a) | same).all() or not torch.isfinite(r).all():
            return f"grad {i}: non-finite values differ"
        dev_err, cpu_err = (a - r).abs().max().item(), (e - r).abs().max().item()
        bound = 2 * cpu_err + atol + rtol * r.abs().max().item()
        if not dev_err <= bound:
            return f"grad {i}: device max error {dev_err:.3g} vs float64 > 2 x CPU's {cpu_err:.3g} + tolerance"
    return None
