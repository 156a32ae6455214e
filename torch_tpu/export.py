"""StableHLO export of a ``torch.export`` program.

    ep = torch.export.export(model.eval(), (x,))
    text = torch_tpu.export.to_stablehlo(ep)                      # weights as arguments
    text = torch_tpu.export.to_stablehlo(ep, weights="constants") # weights inlined

The program is the one the tpu device runs: the exported graph's ATen ops go through the device's
own lowerings, captured as one program (Note [Capture] in csrc/torch/deferred/capture.h) with every
tensor input a whole-tensor argument and views as ops, and printed by the IR printer as StableHLO
text that XLA compiles. Arguments, in order: with ``weights="args"`` every tensor input of the
graph in ``ep.graph_signature.input_specs`` order (parameters, buffers, constant tensors, then the
user's inputs, flattened); with ``weights="constants"`` only the user's inputs, the rest inlined as
dense constants. Results: the graph's outputs in ``output_specs`` order (buffer mutations first,
then the user's outputs, flattened). Python numbers the ops take are constants of the program.

Dynamic dims (``torch.export.Dim``) are not exported as such: the program is static, at the sizes of
the inputs it is lowered with, and a ``UserWarning`` names the dims that were fixed. (The IR has
StableHLO's bounded dims, Note [Bounded dims in the IR] in csrc/ir/types.h, but the ATen lowerings
build static programs.)
"""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence

import torch

from . import _C, _compat

__all__ = ["to_stablehlo"]

_WEIGHTS = ("args", "constants")


def _warn_dynamic_dims(ep, flat) -> None:
    """Warns when the exported graph's inputs have symbolic sizes: they are fixed at `flat`'s."""
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    fixed = []
    for i, (node, value) in enumerate(zip(placeholders, flat)):
        meta = node.meta.get("val")
        if not isinstance(meta, torch.Tensor) or not isinstance(value, torch.Tensor):
            continue
        for d, size in enumerate(meta.shape):
            if isinstance(size, torch.SymInt):
                sym = size.node.expr
                rng = ep.range_constraints.get(sym)
                where = f" in [{rng.lower}, {rng.upper}]" if rng is not None else ""
                fixed.append(f"{node.name} dim {d} ({sym}{where}) = {value.shape[d]}")
    if fixed:
        warnings.warn("torch_tpu.export.to_stablehlo: the program has dynamic dims; it is exported as a static "
                      "program at the sizes of the inputs it is lowered with: " + ", ".join(fixed) +
                      " (dynamic dims are not exported as StableHLO dynamism yet)", UserWarning, stacklevel=3)


def to_stablehlo(exported_program: "torch.export.ExportedProgram", weights: str = "args", *,
                 args: Optional[Sequence[Any]] = None, kwargs: Optional[dict] = None,
                 device: Any = None, name: str = "main") -> str:
    """The exported program as StableHLO text (see the module's docstring for its signature).

    `args`/`kwargs`: the user inputs to lower with (their shapes and dtypes are the program's;
    default: the program's example inputs). `device`: the tpu device that lowers it."""
    from torch.export.graph_signature import InputKind

    if weights not in _WEIGHTS:
        raise ValueError(f"torch_tpu.export.to_stablehlo: weights must be one of {_WEIGHTS}, got {weights!r}")
    ep = exported_program
    if args is None and kwargs is None:
        if ep.example_inputs is None:
            raise ValueError("torch_tpu.export.to_stablehlo: the program keeps no example inputs; pass args=")
        args, kwargs = ep.example_inputs
    flat, kinds = _compat.exported_flat_inputs(ep, tuple(args or ()), dict(kwargs or {}))
    _warn_dynamic_dims(ep, flat)
    device = torch.device("tpu", torch.tpu.current_device()) if device is None else torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"torch_tpu.export.to_stablehlo: device must be a tpu device, got {device}")
    weight_kinds = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    values, tensors, inline = [], [], []
    for i, (value, kind) in enumerate(zip(flat, kinds)):
        if isinstance(value, torch.Tensor):
            # Its own dense storage on the device: one argument per input, whatever its layout.
            t = torch.empty(value.shape, dtype=value.dtype, device=device)
            t.copy_(value.detach())
            values.append(t)
            tensors.append(t)
            inline.append(weights == "constants" and kind in weight_kinds)
        elif kind == InputKind.USER_INPUT or isinstance(value, (int, float, bool)):
            values.append(value)  # a Python number: a constant of the program
        else:
            raise NotImplementedError(f"torch_tpu.export.to_stablehlo: input {i} is a {type(value).__name__} "
                                      f"({kind}); only tensors and Python numbers can be exported")
    scope = _C._CaptureScope(device.index or 0, True)
    try:
        scope.bind_inputs(tensors)
        with torch.no_grad():
            outs = ep.graph_module(*values)
    except Exception as e:
        why = scope.break_reason()
        scope.discard()
        if why:
            raise RuntimeError(f"torch_tpu.export.to_stablehlo: the program cannot be one tpu program: {why}") from e
        raise
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            scope.discard()
            raise NotImplementedError(f"torch_tpu.export.to_stablehlo: output {i} is a {type(o).__name__}; only "
                                      f"tensor outputs can be exported")
    text, _ = scope.export(tensors, outs, inline, name)
    return text
