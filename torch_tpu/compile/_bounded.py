"""Bounded dynamic dims (Note [Bounded dims]): one program per bound instead of one per size.

Note [Bounded dims]
~~~~~~~~~~~~~~~~~~~
``torch._dynamo.mark_dynamic(t, dim, min=, max=)`` makes Dynamo trace a graph whose sizes are
symbols with a range (``s0`` in [2, 64]). Without a bound every new size is a new program. With
one, the graph runs *padded*: every dimension whose size is an expression ``e(s0)`` is laid out at
its upper bound ``e(64)``, the real sizes travel into the program as data (one small int64 tensor),
and the one program captured at the bound serves every size in the range.

A padded dimension holds the real values in its valid region and arbitrary values (garbage,
possibly inf or NaN) elsewhere. That is safe as long as no op lets the garbage reach the valid
region, which only ops that combine positions along a padded dimension can do. So before each such
op the plan masks its operands along that dimension with ``where`` (NaN-safe), to the op's neutral
value: 0 before a sum, a matmul's contraction or a gradient's accumulation, -inf before a softmax
or a max, ``ignore_index`` for the targets of an NLL loss; a mean divides by the real count.
Pointwise ops, views, layer norm over static dims, embedding lookups and the like need nothing.

Dimensions are tracked as *factors* (outer to inner): a view that merges (4, s0) into one dim of
size 4*s0 keeps the factors [4, s0], laid out as 4 rows of e(64), so a position is valid when each
symbolic factor's index is below its real size. A view that would split a symbolic factor, a
concatenation, sort or scatter along a padded dim, a random op over one, or an op this table does
not know makes the plan give up for that graph, with the reason; the graph then compiles once per
size, as without a bound.

At the graph's edges: inputs are copied into padded buffers (or, for an activation the padded
forward produced and the backward reads back, the padded buffer is reused, with no copy); outputs
are narrowed back to the real sizes, views where the layout allows, copies where a merged dim
needs one. Those copies run as queue copies, not programs, so a new size compiles nothing.

This module is the plan: layouts and masks, read from the graph's symbolic metadata. _padded.py
runs it: the edges, the interpreter that records the masked graph, the kept padding.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Dict, List, Optional, Sequence, Tuple

import sympy
import torch
import torch.fx

aten = torch.ops.aten

Factors = Tuple[sympy.Expr, ...]  # one dimension: its size as a product of factors, outer first
Layout = Tuple[Factors, ...]      # a tensor: one Factors per dimension


class Unsupported(Exception):
    """The graph cannot run padded; the message says why."""


class NotBounded(Unsupported):
    """The graph has no size with an upper bound: nothing to pad."""


# ---- sizes as expressions ------------------------------------------------------------------------

def _expr(x) -> sympy.Expr:
    if isinstance(x, torch.SymInt):
        return sympy.sympify(x.node.expr)
    if isinstance(x, (int, bool)):
        return sympy.Integer(int(x))
    raise Unsupported(f"a size of type {type(x).__name__}")


def _dynamic(e: sympy.Expr) -> bool:
    return bool(e.free_symbols)


def _canon(e: sympy.Expr) -> Factors:
    """A dimension of size e laid out the canonical way: its numeric coefficient, then each
    symbolic factor (4*s0 -> (4, s0); s0 - 1 -> (s0 - 1,))."""
    if not _dynamic(e):
        return (e,)
    coeff, rest = sympy.factor(e).as_coeff_Mul()
    parts = sorted(sympy.Mul.make_args(rest), key=str)
    return ((sympy.Integer(coeff),) if coeff != 1 else ()) + tuple(parts)


def _norm(f: Factors) -> Factors:
    """Factors compared for equality: adjacent numbers merged, 1s dropped."""
    out: List[sympy.Expr] = []
    for x in f:
        if x == 1:
            continue
        if out and not _dynamic(x) and not _dynamic(out[-1]):
            out[-1] = out[-1] * x
        else:
            out.append(x)
    return tuple(out)


def _is_dyn(f: Factors) -> bool:
    return any(_dynamic(x) for x in f)


def _layout_dynamic(layout) -> bool:
    """Whether a tensor's layout (a tuple), or any of an op's output layouts (a list), is padded."""
    if isinstance(layout, list):
        return any(_layout_dynamic(x) for x in layout)
    return isinstance(layout, tuple) and any(_is_dyn(d) for d in layout)


def _shape_layout(shape) -> Layout:
    return tuple(_canon(_expr(s)) for s in shape)


def _view(layout: Layout, out_shape: Sequence[sympy.Expr], what: str) -> Layout:
    flat = [x for d in layout for x in d if x != 1]
    out: List[Factors] = []
    i = 0
    for need in out_shape:
        if need == 1:
            out.append((sympy.Integer(1),))
            continue
        took: List[sympy.Expr] = []
        while need != 1:
            if i >= len(flat):
                raise Unsupported(f"{what} does not line up with the padded layout")
            f = flat[i]
            if not _dynamic(f):
                coeff = need.as_coeff_Mul()[0]
                g = math.gcd(int(coeff), int(f)) if coeff.is_Integer else 1
                if g == 1:
                    raise Unsupported(f"{what} splits a bounded dimension")
                took.append(sympy.Integer(g))
                need = sympy.cancel(need / g)
                if g == f:
                    i += 1
                else:
                    flat[i] = sympy.Integer(int(f) // g)
            else:
                q = sympy.cancel(need / f)
                if sympy.fraction(sympy.together(q))[1] != 1:
                    raise Unsupported(f"{what} splits a bounded dimension")
                took.append(f)
                need = q
                i += 1
        out.append(tuple(took))
    if any(x != 1 for x in flat[i:]):
        raise Unsupported(f"{what} does not line up with the padded layout")
    return tuple(out)


# ---- the plan --------------------------------------------------------------------------------

_NEG = "neg"   # fill kinds for masks: -inf (or the dtype's least), +inf, 0
_POS = "pos"
_ZERO = "zero"

_SAME = {aten.clone.default, aten._to_copy.default, aten.alias.default, aten.detach.default,
         aten.lift_fresh_copy.default, aten.contiguous.default}
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}
_SUMS = {aten.sum.dim_IntList, aten.sum.default, aten.mean.dim, aten.mean.default}
_MAXES = {aten.amax.default: _NEG, aten.amin.default: _POS}
_CREATE = {aten.full.default, aten.zeros.default, aten.ones.default, aten.empty.memory_format,
           aten.new_zeros.default, aten.new_ones.default, aten.new_full.default, aten.new_empty.default}


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def _out_layouts(node) -> Any:
    v = _val(node)
    if isinstance(v, torch.Tensor):
        return _shape_layout(v.shape)
    if isinstance(v, (tuple, list)):
        return [_shape_layout(t.shape) if isinstance(t, torch.Tensor) else None for t in v]
    return None


class Plan:
    """How one AOTAutograd graph runs padded. Built from the graph's symbolic metadata alone."""

    def __init__(self, gm: torch.fx.GraphModule, name: str, saved_from: Optional[int] = None):
        self.gm = gm
        self.name = name
        # A forward graph's outputs from this one on are saved for its backward (Note [Kept padding]).
        self.saved_from = saved_from
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.symbols, self.bounds, self.lower = self._bounds()
        self.layouts: Dict[torch.fx.Node, Any] = {}
        self.actions: Dict[torch.fx.Node, List[Tuple[int, Tuple[int, ...], str]]] = {}
        self.means: Dict[torch.fx.Node, Tuple[int, ...]] = {}
        self.values: Dict[torch.fx.Node, List[Tuple[int, int]]] = {}
        self.exprs: List[sympy.Expr] = []   # the factors whose real sizes the program reads
        self.bounds_id = tuple((str(k), v) for k, v in self.bounds.items())
        self._analyze()
        _padded.prepare_edges(self)
        self.kept_calls: List[List[tuple]] = []  # Note [Kept padding]: the last two calls' entries

    def prepare(self, args: list):
        """(padded arguments with the sizes tensor last, symbol values), or None when a size is
        outside its bound."""
        return _padded.prepare(self, args)

    def finish(self, outs: list, values) -> list:
        """The padded program's outputs at their real sizes."""
        return _padded.finish(self, outs, values)

    def run(self, *args):
        """The graph run at the bound (what a capture records); the sizes tensor comes last."""
        return _padded.Padded(self, args[-1]).run(*args[:-1])

    # ---- bounds -------------------------------------------------------------------------------
    def _bounds(self):
        shape_env = None
        symbols = set()
        for p in self.placeholders:
            v = _val(p)
            items = list(v.shape) if isinstance(v, torch.Tensor) else [v]
            for s in items:
                if isinstance(s, torch.SymInt):
                    shape_env = shape_env or s.node.shape_env
                    symbols |= sympy.sympify(s.node.expr).free_symbols
        if not symbols:
            raise NotBounded("no dynamic dimension")
        bounds, lower = {}, {}
        for sym in sorted(symbols, key=str):
            r = shape_env.var_to_range.get(sym) if shape_env is not None else None
            upper = getattr(r, "upper", None)
            hi = int(upper) if isinstance(upper, (int, sympy.Integer)) else None
            if hi is None or hi >= 1 << 31:
                raise NotBounded(f"{sym} has no upper bound (mark_dynamic(t, dim, min=, max=) gives one)")
            bounds[sym] = hi
            lower[sym] = int(r.lower) if isinstance(r.lower, (int, sympy.Integer)) else 0
        # Every symbol must be readable from an argument: a dim or a Python int that is the symbol itself.
        direct = set()
        for p in self.placeholders:
            v = _val(p)
            for s in (list(v.shape) if isinstance(v, torch.Tensor) else [v]):
                if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                    direct.add(s.node.expr)
        if symbols - direct:
            raise Unsupported(f"the size {sorted(map(str, symbols - direct))[0]} is not one of the arguments' sizes")
        return sorted(symbols, key=str), bounds, lower

    def padded(self, e: sympy.Expr) -> int:
        return int(e.subs(self.bounds)) if _dynamic(e) else int(e)

    def _slot(self, f: sympy.Expr) -> int:
        if f not in self.exprs:
            self.exprs.append(f)
        return self.exprs.index(f)

    # ---- analysis -----------------------------------------------------------------------------
    def _analyze(self):
        for node in self.gm.graph.nodes:
            try:
                self._visit(node)
            except Unsupported as e:
                where = f"{node.target}" if node.op == "call_function" else node.name
                raise Unsupported(f"{where}: {e}") from None

    def _L(self, a) -> Any:
        return self.layouts.get(a) if isinstance(a, torch.fx.Node) else None

    def _mask(self, node, arg_index: int, layout: Layout, dims, fill: str):
        dims = tuple(d for d in dims if _is_dyn(layout[d]))
        if not dims:
            return
        for d in dims:
            for f in layout[d]:
                if _dynamic(f):
                    self._slot(f)
        self.actions.setdefault(node, []).append((arg_index, dims, fill))

    def _visit(self, node):
        if node.op == "placeholder":
            self.layouts[node] = _out_layouts(node)
            return
        if node.op == "output":
            return
        if node.op == "get_attr":
            self.layouts[node] = _out_layouts(node)
            return
        if node.op != "call_function":
            raise Unsupported(f"{node.op} nodes")
        t = node.target
        args = node.args
        out = _out_layouts(node)
        ins = [self._L(a) for a in args]
        touches = any(_layout_dynamic(x) for x in ins) or _layout_dynamic(out)
        for a in list(args) + list(node.kwargs.values()):
            if isinstance(a, (list, tuple)) and any(_layout_dynamic(self._L(x)) for x in a):
                touches = True  # lists of tensors (cat, ...)
            v = _val(a) if isinstance(a, torch.fx.Node) else None
            if isinstance(v, (torch.SymInt, torch.SymFloat)) and _dynamic(sympy.sympify(v.node.expr)):
                touches = True  # a size as an argument: a shape, or a value (_pointwise)
        if t is operator.getitem:
            src = self._L(args[0])
            self.layouts[node] = src[args[1]] if isinstance(src, list) else out
            return
        if not isinstance(t, torch._ops.OpOverload):
            # SymInt arithmetic (operator.mul, ...) and other Python functions of sizes.
            if isinstance(_val(node), (torch.SymInt, int, float, bool, torch.SymFloat, torch.SymBool)) or _val(node) is None:
                self.layouts[node] = None
                return
            raise Unsupported(f"the function {getattr(t, '__name__', t)}")
        if not touches:
            self.layouts[node] = out
            return
        if torch.Tag.nondeterministic_seeded in t.tags:
            raise Unsupported("a random op over a bounded dimension draws other values padded than unpadded")
        if t in (aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int, aten.sym_storage_offset.default):
            self.layouts[node] = None
            return
        handler = _HANDLERS.get(t)
        if handler is not None:
            self.layouts[node] = handler(self, node, ins, out)
            return
        if torch.Tag.pointwise in t.tags:
            self.layouts[node] = self._pointwise(node, ins, out)
            return
        raise Unsupported("no padded rule for this op over a bounded dimension")

    def _pointwise(self, node, ins, out):
        # A size used as a value (a mean's backward divides by the count): the program reads the
        # real one from the sizes tensor.
        for i, a in enumerate(node.args):
            v = _val(a) if isinstance(a, torch.fx.Node) else None
            if isinstance(v, torch.SymFloat) and _dynamic(sympy.sympify(v.node.expr)):
                raise Unsupported("it uses a bounded size as a float value")
            if isinstance(v, torch.SymInt) and _dynamic(_expr(v)):
                self.values.setdefault(node, []).append((i, self._slot(_expr(v))))
        if any(isinstance(_val(a), (torch.SymInt, torch.SymFloat)) for a in node.kwargs.values()
               if isinstance(a, torch.fx.Node)):
            raise Unsupported("it uses a bounded size as a keyword value")
        return self._merge(ins, out)

    def _merge(self, ins, out):
        ndim = len(out)
        result = list(out)
        for j in range(ndim):
            seen = None
            for lay in ins:
                if not isinstance(lay, tuple):
                    continue
                k = j - (ndim - len(lay))
                if k < 0:
                    continue
                d = lay[k]
                if _is_dyn(d):
                    if seen is not None and _norm(seen) != _norm(d):
                        raise Unsupported("operands lay out a bounded dimension differently")
                    seen = d
            if seen is not None:
                result[j] = seen
        return tuple(result)


def _dim(d, n):
    return d + n if d < 0 else d


def _h_same(plan, node, ins, out):
    return ins[0]


def _h_view(plan, node, ins, out):
    return _view(ins[0], [_expr(s) for s in _val(node).shape], "the view")


def _h_expand(plan, node, ins, out):
    src = ins[0]
    lead = len(out) - len(src)
    res = list(out[:lead])
    for k, d in enumerate(src):
        o = out[lead + k]
        res.append(o if (_norm(d) == () and _norm(o) != ()) else d)
    return tuple(res)


def _h_permute(plan, node, ins, out):
    src = ins[0]
    perm = [_dim(d, len(src)) for d in node.args[1]]
    return tuple(src[p] for p in perm)


def _h_transpose(plan, node, ins, out):
    src = list(ins[0])
    if node.target is aten.t.default:
        return tuple(reversed(src)) if len(src) == 2 else tuple(src)
    a, b = _dim(node.args[1], len(src)), _dim(node.args[2], len(src))
    src[a], src[b] = src[b], src[a]
    return tuple(src)


def _h_unsqueeze(plan, node, ins, out):
    src = list(ins[0])
    d = _dim(node.args[1], len(src) + 1)
    src.insert(d, (sympy.Integer(1),))
    return tuple(src)


def _h_squeeze(plan, node, ins, out):
    src = ins[0]
    keep = [d for d in src]
    shape = _val(node.args[0]).shape
    if node.target is aten.squeeze.default:
        dims = [i for i, s in enumerate(shape) if s == 1]
    else:
        dims = node.args[1] if isinstance(node.args[1], (list, tuple)) else [node.args[1]]
        dims = [_dim(d, len(src)) for d in dims]
        dims = [d for d in dims if shape[d] == 1]
    return tuple(d for i, d in enumerate(keep) if i not in dims)


def _static_int(x, what):
    if isinstance(x, torch.fx.Node):
        x = _val(x)
    if isinstance(x, torch.SymInt):
        e = _expr(x)
        if _dynamic(e):
            raise Unsupported(f"{what} depends on a bounded size")
        return int(e)
    return x


def _h_slice(plan, node, ins, out):
    src = list(ins[0])
    args = list(node.args) + [None] * (5 - len(node.args))
    dim = _dim(args[1] if args[1] is not None else 0, len(src))
    start = _static_int(args[2], "the slice's start") if args[2] is not None else 0
    step = args[4] if args[4] is not None else 1
    if not _is_dyn(src[dim]) and not _is_dyn(out[dim]):
        src[dim] = out[dim]
        return tuple(src)
    if step != 1 or start is None or start < 0:
        raise Unsupported("a slice of a bounded dimension with a step or a start from its end")
    if _is_dyn(src[dim]) and len(_norm(src[dim])) > 1:
        raise Unsupported("a slice of a merged bounded dimension")
    src[dim] = out[dim]
    return tuple(src)


def _h_select(plan, node, ins, out):
    src = list(ins[0])
    dim = _dim(node.args[1], len(src))
    if _is_dyn(src[dim]):
        index = _static_int(node.args[2], "the index")
        if index < 0:
            raise Unsupported("an index from the end of a bounded dimension")
    del src[dim]
    return tuple(src)


def _h_split(plan, node, ins, out):
    src = ins[0]
    dim = _dim(node.args[2] if len(node.args) > 2 else 0, len(src))
    if _is_dyn(src[dim]):
        raise Unsupported("a split along a bounded dimension")
    return [tuple(o if i == dim else src[i] for i, o in enumerate(lay)) for lay in out]


def _h_cat(plan, node, ins, out):
    # cat skips 1-D empty tensors (the legacy rule a cache's first step relies on).
    tensors = [plan._L(a) for a in node.args[0] if tuple(_val(a).shape) != (0,)]
    dim = _dim(node.args[1] if len(node.args) > 1 else 0, len(out))
    # Along a bounded dim only the last piece may be padded: its valid prefix then ends the
    # output's valid prefix (static pieces first, as a cache's past before its new positions).
    if any(_is_dyn(t[dim]) for t in tensors[:-1]) or (_is_dyn(tensors[-1][dim]) and len(_norm(tensors[-1][dim])) > 1):
        raise Unsupported("a concatenation along a bounded dimension after a padded piece")
    res = list(plan._merge([tuple(d for i, d in enumerate(t) if i != dim) for t in tensors],
                           tuple(d for i, d in enumerate(out) if i != dim)))
    res.insert(dim, out[dim])
    return tuple(res)


def _h_mm(plan, node, ins, out):
    t = node.target
    if t is aten.addmm.default:
        a, b = ins[1], ins[2]
        ia, ib = 1, 2
    else:
        a, b = ins[0], ins[1]
        ia, ib = 0, 1
    ka, kb = len(a) - 1, len(b) - 2
    if _is_dyn(a[ka]) or _is_dyn(b[kb]):
        if _is_dyn(a[ka]) and _is_dyn(b[kb]) and _norm(a[ka]) != _norm(b[kb]):
            raise Unsupported("the operands lay out the contracted bounded dimension differently")
        plan._mask(node, ia, a, [ka], _ZERO)
        plan._mask(node, ib, b, [kb], _ZERO)
    res = list(out)
    res[-2], res[-1] = a[-2], b[-1]
    if len(out) == 3:
        batch = [x for x in (a[0], b[0]) if _is_dyn(x)]
        if len(batch) == 2 and _norm(batch[0]) != _norm(batch[1]):
            raise Unsupported("the operands lay out the batch dimension differently")
        res[0] = batch[0] if batch else out[0]
    if t is aten.addmm.default:
        return plan._merge([ins[0], tuple(res)], out)
    return tuple(res)


def _reduced_dims(node, ndim):
    t = node.target
    if t in (aten.sum.default, aten.mean.default):
        return list(range(ndim)), False
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return [_dim(d, ndim) for d in dims], bool(keep)


def _h_reduce(plan, node, ins, out):
    src = ins[0]
    dims, keep = _reduced_dims(node, len(src))
    fill = _MAXES.get(node.target, _ZERO)
    plan._mask(node, 0, src, dims, fill)
    if node.target in (aten.mean.dim, aten.mean.default) and any(_is_dyn(src[d]) for d in dims):
        plan.means[node] = tuple(dims)
    res = [(sympy.Integer(1),) if i in dims else d for i, d in enumerate(src)] if keep else \
        [d for i, d in enumerate(src) if i not in dims]
    return tuple(res)


def _h_softmax(plan, node, ins, out):
    src = ins[0]
    t = node.target
    forward = t in (aten._softmax.default, aten._log_softmax.default, aten._safe_softmax.default)
    d = _dim(node.args[1] if forward else node.args[2], len(src))
    if forward:
        plan._mask(node, 0, src, [d], _NEG)
    elif t is aten._softmax_backward_data.default:
        plan._mask(node, 0, src, [d], _ZERO)
        plan._mask(node, 1, ins[1], [d], _ZERO)
    else:  # _log_softmax_backward_data
        plan._mask(node, 0, src, [d], _ZERO)
    return plan._merge([x for x in ins[:2] if isinstance(x, tuple)], out)


def _h_layer_norm(plan, node, ins, out):
    x = ins[0]
    k = len(node.args[1])
    if any(_is_dyn(d) for d in x[len(x) - k:]):
        raise Unsupported("a layer norm over a bounded dimension")
    stat = tuple(x[:len(x) - k]) + tuple((sympy.Integer(1),) for _ in range(k))
    return [x, stat, stat]


def _h_layer_norm_backward(plan, node, ins, out):
    grad, x = ins[0], ins[1]
    k = len(node.args[2])
    lead = list(range(len(x) - k))
    if any(_is_dyn(d) for d in x[len(x) - k:]):
        raise Unsupported("a layer norm over a bounded dimension")
    # Weight and bias gradients sum over the leading dims: padded rows must add nothing.
    for i in (0, 1, 3, 4):
        if isinstance(ins[i], tuple):
            plan._mask(node, i, ins[i], lead, _ZERO)
    return [x] + list(out[1:])


def _h_embedding(plan, node, ins, out):
    w, idx = ins[0], ins[1]
    plan._mask(node, 1, idx, range(len(idx)), _ZERO)   # an index in padding must still be in range
    return tuple(idx) + (w[-1],)


def _h_embedding_backward(plan, node, ins, out):
    grad, idx = ins[0], ins[1]
    plan._mask(node, 1, idx, range(len(idx)), _ZERO)
    plan._mask(node, 0, grad, range(len(idx)), _ZERO)
    return out


def _h_nll(plan, node, ins, out):
    t = node.target
    if t is aten.nll_loss_forward.default:
        x, target, red_pos = ins[0], ins[1], 3
    else:
        x, target, red_pos = ins[1], ins[2], 4
    ti = 1 if t is aten.nll_loss_forward.default else 2
    if isinstance(target, tuple) and len(target) >= 1:
        plan._mask(node, ti, target, range(len(target)), "ignore")
        xi = 0 if t is aten.nll_loss_forward.default else 1
        # The input's dims are the target's with the classes' inserted at 1.
        plan._mask(node, xi, x, [0] + [d + 1 for d in range(1, len(target))], _ZERO)
        if t is not aten.nll_loss_forward.default and isinstance(ins[0], tuple) and len(ins[0]) == len(target):
            plan._mask(node, 0, ins[0], range(len(target)), _ZERO)
    if t is aten.nll_loss_forward.default:
        reduction = node.args[red_pos]
        first = tuple(target) if reduction == 0 else out[0]
        return [first, out[1]]
    return x


def _h_triangle(plan, node, ins, out):
    # Keeps element (i, j) by j - i: the same in the valid region of prefix-laid-out dims.
    src = ins[0]
    if any(len(_norm(d)) > 1 for d in src[-2:]):
        raise Unsupported("a triangle of a merged bounded dimension")
    _static_int(node.args[1] if len(node.args) > 1 else 0, "the diagonal")
    return src


def _h_pad(plan, node, ins, out):
    # Widths count from the start at the front (static, so the valid prefix shifts exactly) and
    # from the end at the back, where only padding is added or cropped -- but a positive back
    # width must read as the pad value past the real end: the input's padding is filled with it.
    src = list(ins[0])
    pads = [_static_int(p, "a pad width") for p in node.args[1]]
    dims = []
    for k in range(len(pads) // 2):
        d = len(src) - 1 - k
        if _is_dyn(src[d]):
            if len(_norm(src[d])) > 1:
                raise Unsupported("a pad of a merged bounded dimension")
            if pads[2 * k + 1] > 0:
                dims.append(d)
        src[d] = out[d]
    plan._mask(node, 0, ins[0], dims, "pad")
    return tuple(src)


def _h_slice_backward(plan, node, ins, out):
    # The gradient lands at [start, start + its size): its padding must add zeros there.
    grad = ins[0]
    dim = _dim(node.args[2], len(grad))
    if _is_dyn(grad[dim]) or _is_dyn(out[dim]):
        start = _static_int(node.args[3], "the slice's start")
        if node.args[5] != 1 or start < 0 or len(_norm(grad[dim])) > 1:
            raise Unsupported("the gradient of a strided or merged slice of a bounded dimension")
        plan._mask(node, 0, grad, [dim], _ZERO)
    res = list(grad)
    res[dim] = out[dim]
    return tuple(res)


def _h_create(plan, node, ins, out):
    # Sizes are shapes here; a bounded size as the fill value would be read at the bound.
    t = node.target
    value = {aten.scalar_tensor.default: 0, aten.full.default: 1, aten.new_full.default: 2}.get(t)
    if value is not None and value < len(node.args):
        v = _val(node.args[value])
        if isinstance(v, (torch.SymInt, torch.SymFloat)) and _dynamic(sympy.sympify(v.node.expr)):
            if t is not aten.scalar_tensor.default or isinstance(v, torch.SymFloat):
                raise Unsupported("it fills a tensor with a bounded size")
            plan.values[node] = [(0, plan._slot(_expr(v)))]  # the real size, from the sizes tensor
    return out


def _h_arange(plan, node, ins, out):
    if node.target is aten.arange.start:
        _static_int(node.args[0], "arange's start")
    return out


_HANDLERS = {
    **{op: _h_same for op in _SAME},
    **{op: _h_view for op in _VIEWS},
    aten.expand.default: _h_expand,
    aten.permute.default: _h_permute,
    aten.transpose.int: _h_transpose,
    aten.t.default: _h_transpose,
    aten.unsqueeze.default: _h_unsqueeze,
    aten.squeeze.dim: _h_squeeze,
    aten.squeeze.dims: _h_squeeze,
    aten.squeeze.default: _h_squeeze,
    aten.slice.Tensor: _h_slice,
    aten.select.int: _h_select,
    aten.split.Tensor: _h_split,
    aten.split_with_sizes.default: _h_split,
    aten.cat.default: _h_cat,
    aten.mm.default: _h_mm,
    aten.bmm.default: _h_mm,
    aten.addmm.default: _h_mm,
    **{op: _h_reduce for op in list(_SUMS) + list(_MAXES)},
    aten._softmax.default: _h_softmax,
    aten._log_softmax.default: _h_softmax,
    aten._safe_softmax.default: _h_softmax,
    aten._softmax_backward_data.default: _h_softmax,
    aten._log_softmax_backward_data.default: _h_softmax,
    aten.native_layer_norm.default: _h_layer_norm,
    aten.native_layer_norm_backward.default: _h_layer_norm_backward,
    aten.embedding.default: _h_embedding,
    aten.embedding_dense_backward.default: _h_embedding_backward,
    aten.nll_loss_forward.default: _h_nll,
    aten.nll_loss_backward.default: _h_nll,
    aten.tril.default: _h_triangle,
    aten.constant_pad_nd.default: _h_pad,
    aten.slice_backward.default: _h_slice_backward,
    aten.triu.default: _h_triangle,
    **{op: _h_create for op in _CREATE},
    aten.scalar_tensor.default: _h_create,
    aten.arange.default: _h_arange,
    aten.arange.start: _h_arange,
}


# The runtime half imports this module's names: imported last, once they exist.
from . import _padded  # noqa: E402
