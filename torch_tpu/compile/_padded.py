"""Running a bounded graph's plan (Note [Bounded dims], _bounded.py): the graph's edges (inputs
padded, outputs cut back to their real sizes), the interpreter that records the graph at the bound
with its masks, and the padding kept from a forward for its backward (Note [Kept padding])."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import sympy
import torch
import torch.fx

from . import _bounded
from ._bounded import _NEG, _POS, _ZERO, Factors, Layout, _dynamic, _expr, _layout_dynamic, _norm, _val, aten

def _key(layout: Layout):
    return tuple(_norm(d) for d in layout)


def _copy(src: torch.Tensor, dst: torch.Tensor) -> None:
    """dst (a region of a padded buffer, or a fresh tensor) <- src, same sizes: queue copies of
    contiguous runs, so no program is compiled for the size (Note [Bounded dims])."""
    from .. import _C

    runs = getattr(_C, "_copy_runs", None)
    if runs is None or not runs(src, dst):
        dst.copy_(src)


# What an input's padding holds. Any value must do (the plan masks before every op that could let
# padding reach the real values); tests set `poison` to fill it with NaN and out-of-range indices.
poison = False


def _padding(dtype: torch.dtype):
    if not poison:
        return 0
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return 1 << 20 if dtype in (torch.int32, torch.int64) else 0


class _Edge:
    """One tensor at the graph's edge (an input or an output) with a padded layout."""

    def __init__(self, plan: "_bounded.Plan", layout: Layout):
        self.key = _key(layout)
        self.factors = [f for d in layout for f in d]
        self.rank = [len(d) for d in layout]
        self.padded_factors = [plan.padded(f) for f in self.factors]
        self.padded_dims = [math.prod(plan.padded(f) for f in d) for d in layout]
        self.real = sympy.lambdify(plan.symbols, list(self.factors), "math")
        # Narrowing each dim is enough (a view) unless a dim has several factors, one symbolic.
        self.simple = all(len(_norm(d)) <= 1 for d in layout)
        self.strides = []
        step = 1
        for n in reversed(self.padded_dims):
            self.strides.insert(0, step)
            step *= n
        self.span = sum((n - 1) * st for n, st in zip(self.padded_dims, self.strides)) + 1

    def as_padded(self, a: torch.Tensor) -> Optional[torch.Tensor]:
        """`a` seen at the padded shape in place, when its strides are those of a contiguous
        padded buffer (an output of a padded graph, narrowed) and its storage reaches that far;
        the elements past its real sizes are then padding, whatever they hold."""
        if not self.simple or any(n > 1 and a.stride(d) != st for d, (n, st) in enumerate(zip(a.shape, self.strides))):
            return None
        if (a.storage_offset() + self.span) * a.element_size() > a.untyped_storage().nbytes():
            return None
        return a.as_strided(self.padded_dims, self.strides)

    def real_factors(self, values) -> List[int]:
        return [int(x) for x in self.real(*values)]

    def real_dims(self, rf: List[int]) -> List[int]:
        out, i = [], 0
        for r in self.rank:
            out.append(math.prod(rf[i:i + r]))
            i += r
        return out


def _narrow(t: torch.Tensor, sizes: List[int]) -> torch.Tensor:
    for axis, n in enumerate(sizes):
        if t.shape[axis] != n:
            t = t.narrow(axis, 0, n)
    return t


class Padded(torch.fx.Interpreter):
    """Runs the graph at the bound, masking before each op the plan marked."""

    def __init__(self, plan: "_bounded.Plan", sizes: torch.Tensor):
        super().__init__(plan.gm, garbage_collect_values=True)
        self.plan = plan
        self.sizes = sizes
        self._masks: Dict[Any, torch.Tensor] = {}

    def _dim_mask(self, factors: Factors, device) -> torch.Tensor:
        m = self._masks.get(factors)
        if m is not None:
            return m
        pads = [self.plan.padded(f) for f in factors]
        m = None
        for j, f in enumerate(factors):
            if not _dynamic(f):
                continue
            shape = [1] * len(factors)
            shape[j] = pads[j]
            real = self.sizes[self.plan.exprs.index(f)]
            a = (torch.arange(pads[j], device=device) < real).view(shape)
            m = a if m is None else m & a
        m = m.expand(pads).reshape(math.prod(pads))
        self._masks[factors] = m
        return m

    def _mask(self, x: torch.Tensor, layout: Layout, dims, fill, node) -> torch.Tensor:
        m = None
        for d in dims:
            shape = [1] * x.dim()
            shape[d] = x.shape[d]
            md = self._dim_mask(layout[d], x.device).view(shape)
            m = md if m is None else m & md
        if fill == _ZERO:
            value = False if x.dtype == torch.bool else 0
        elif fill in (_NEG, _POS):
            if x.dtype.is_floating_point:
                value = float("-inf") if fill == _NEG else float("inf")
            else:
                info = torch.iinfo(x.dtype)
                value = info.min if fill == _NEG else info.max
        elif fill == "pad":  # constant_pad_nd's value
            value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0)
        else:  # "ignore": an NLL loss's ignore_index
            value = node.args[4] if node.target is aten.nll_loss_forward.default else node.args[5]
        return x.masked_fill(~m, value)

    def run_node(self, n):
        plan = self.plan
        acts = plan.actions.get(n)
        if acts is None and n not in plan.means and n not in plan.values:
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        args = list(args)
        if n in plan.values:
            for i, slot in plan.values[n]:
                args[i] = self.sizes[slot]
            if n.target is aten.scalar_tensor.default:
                return args[0].to(kwargs.get("dtype") or torch.get_default_dtype())
            # The .Scalar overloads take no tensor: let the packet pick the .Tensor one.
            return n.target.overloadpacket(*args, **kwargs)
        for i, dims, fill in acts or ():
            args[i] = self._mask(args[i], plan.layouts[n.args[i]], dims, fill, n)
        if n in plan.means:
            dims = plan.means[n]
            x = args[0]
            if n.target is aten.mean.default:
                keep, dtype = False, (args[1] if len(args) > 1 else kwargs.get("dtype"))
            else:
                keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
                dtype = args[3] if len(args) > 3 else kwargs.get("dtype")
            total = torch.sum(x, list(dims), keepdim=keep, dtype=dtype)
            count = None
            layout = plan.layouts[n.args[0]]
            for d in dims:
                for f in layout[d]:
                    c = self.sizes[plan.exprs.index(f)] if _dynamic(f) else int(f)
                    count = c if count is None else count * c
            return total / count.to(total.dtype)
        return n.target(*args, **kwargs)


def prepare_edges(plan: "_bounded.Plan"):
    plan.inputs = []
    for p in plan.placeholders:
        lay = plan.layouts.get(p)
        plan.inputs.append(_Edge(plan, lay) if _layout_dynamic(lay) else None)
    out_node = next(n for n in plan.gm.graph.nodes if n.op == "output")
    outs = out_node.args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    plan.outputs = []
    for o in outs:
        v = _val(o) if isinstance(o, torch.fx.Node) else None
        if isinstance(v, torch.SymInt):
            plan.outputs.append(("int", sympy.lambdify(plan.symbols, _expr(v), "math")))
        elif isinstance(o, torch.fx.Node) and _layout_dynamic(plan.layouts.get(o)):
            plan.outputs.append(("tensor", _Edge(plan, plan.layouts[o])))
        else:
            plan.outputs.append(None)
    # Inputs the graph writes must be the caller's own tensors, not padded copies.
    for n in plan.gm.graph.nodes:
        if n.op == "call_function" and n.target is aten.copy_.default and n.args[0] in plan.placeholders:
            if plan.inputs[plan.placeholders.index(n.args[0])] is not None:
                raise _bounded.Unsupported(f"{n.args[0].name}: the graph writes an input with a bounded dimension")
    plan.padded_ints = {i: plan.padded(_expr(_val(p))) for i, p in enumerate(plan.placeholders)
                        if isinstance(_val(p), torch.SymInt)}
    plan.real_sizes = sympy.lambdify(plan.symbols, list(plan.exprs) or [0], "math")
    plan.binders = []
    for i, p in enumerate(plan.placeholders):
        v = _val(p)
        if isinstance(v, torch.Tensor):
            for d, s in enumerate(v.shape):
                if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                    plan.binders.append((i, d, plan.symbols.index(s.node.expr)))
        elif isinstance(v, torch.SymInt) and isinstance(v.node.expr, sympy.Symbol):
            plan.binders.append((i, None, plan.symbols.index(v.node.expr)))


def prepare(plan: "_bounded.Plan", args: list):
    """Plan.prepare."""
    values: List[Optional[int]] = [None] * len(plan.symbols)
    for i, d, s in plan.binders:
        a = args[i]
        values[s] = int(a.shape[d]) if d is not None else int(a)
    for s, v in zip(plan.symbols, values):
        if v is None or v > plan.bounds[s] or v < plan.lower[s]:
            return None
    device = None
    padded = list(args)
    fresh = []
    taken: List[tuple] = []
    for i, edge in enumerate(plan.inputs):
        if i in plan.padded_ints:
            padded[i] = plan.padded_ints[i]
        if edge is None:
            continue
        a = args[i]
        device = a.device
        same = edge.as_padded(a) if edge.simple else _kept_padding(a, edge, plan, taken)
        if same is not None:
            padded[i] = same
            continue
        buf = torch.full(edge.padded_factors, _padding(a.dtype), dtype=a.dtype, device=a.device)
        fresh.append((i, edge, buf))
        padded[i] = buf.view(edge.padded_dims)
    for key in taken:
        _kept.pop(key, None)
    if fresh:
        from .. import _C

        if _C.get_option("eager_mode") == "fused":  # the copies below go to the queue directly
            _C._cut_windows("compiled_graph")
        for i, edge, buf in fresh:
            a = args[i]
            rf = edge.real_factors(values)
            try:
                src = a.view(rf)
            except RuntimeError:
                src = a.reshape(rf)
            _copy(src, _narrow(buf, rf))
    if device is None:
        device = next((a.device for a in args if isinstance(a, torch.Tensor) and a.device.type == "tpu"), None)
    sizes = torch.tensor([int(x) for x in plan.real_sizes(*values)], dtype=torch.int64).to(device)
    padded.append(sizes)
    return padded, values


def finish(plan: "_bounded.Plan", outs: list, values) -> list:
    if plan.saved_from is not None:
        _new_call(plan)
    result = []
    for k, (o, how) in enumerate(zip(outs, plan.outputs)):
        if how is None or o is None:
            result.append(o)
        elif how[0] == "int":
            result.append(int(how[1](*values)))
        else:
            edge = how[1]
            rf = edge.real_factors(values)
            if rf == edge.padded_factors:  # at the bound: nothing to cut
                out = o.view(o.shape)
            elif edge.simple:
                out = _narrow(o, edge.real_dims(rf))
            else:
                out = torch.empty(edge.real_dims(rf), dtype=o.dtype, device=o.device)
                _copy(_narrow(o.view(edge.padded_factors), rf), out.view(rf))
            if not edge.simple and plan.saved_from is not None and k >= plan.saved_from:
                _keep(plan, out, o, edge)
            result.append(out)
    return result


# Note [Kept padding]: a forward graph's outputs are mostly activations its backward reads back.
# One whose layout is plain narrowing is a view of the padded buffer, and the backward sees it at
# the padded shape in place (_Edge.as_padded). One with a merged dim is a copy; its padded buffer is
# kept here, keyed by the copy's memory (storage, offset, sizes, strides), so the backward takes
# it instead of padding the copy again. An entry holds the copy itself, so its memory cannot be
# reused by another tensor while the key stands; the backward drops the entries it used, and a
# forward keeps only the entries of its last two calls (a forward whose backward never runs).
_kept: Dict[tuple, Tuple[torch.Tensor, torch.Tensor, Any, int]] = {}


def _geometry(t: torch.Tensor) -> tuple:
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, t.device)


def _keep(plan: "_bounded.Plan", out: torch.Tensor, o: torch.Tensor, edge: _Edge) -> None:
    key = _geometry(out)
    # out.detach(): the same memory and version counter, without the autograd graph (which holds
    # the compiled graphs).
    _kept[key] = (out.detach(), o, (edge.key, plan.bounds_id), out._version)
    plan.kept_calls[-1].append(key)


def _new_call(plan: "_bounded.Plan") -> None:
    """A forward call starts: the entries of the calls before the last one are dropped."""
    plan.kept_calls.append([])
    while len(plan.kept_calls) > 2:
        for key in plan.kept_calls.pop(0):
            _kept.pop(key, None)


def _kept_padding(a: torch.Tensor, edge: _Edge, plan: "_bounded.Plan", taken: List[tuple]) -> Optional[torch.Tensor]:
    key = _geometry(a)
    entry = _kept.get(key)
    if entry is None:
        return None
    taken.append(key)  # two arguments may be one memory (x and x.detach()): dropped after both
    out, o, which, version = entry
    if which != (edge.key, plan.bounds_id) or out._version != version:
        return None
    return o
