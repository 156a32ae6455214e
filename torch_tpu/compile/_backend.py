"""The Dynamo backend "tpu": AOTAutograd turns each Dynamo graph into functionalized ATen graphs
(forward and backward, or one inference graph), and each becomes one captured program
(_graph.CompiledGraph). Code Dynamo does not put in a graph (a graph break) runs as ordinary eager
ops, in the user's eager mode."""
from __future__ import annotations

import warnings
from typing import Any, Dict, Optional

import torch

from .. import _compat
from . import _state
from ._graph import make_compiler

# torch.compile(mode=...): what each mode means here.
_MODES = {
    "default": None,
    # What CUDA graphs buy on a GPU (a graph replayed without per-op launch work) is how every
    # compiled graph runs here: one launch per call.
    "reduce-overhead": None,
}
# options={...} the tpu backend reads.
_OPTIONS = {
    "fallback": ("warn", "error"),  # a graph that cannot be one program: warn and run it eagerly, or raise
}


def _check(mode: Optional[str], options: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    settings = {"fallback": "warn"}
    if mode is not None and mode not in _MODES:
        warnings.warn(f"torch.compile(backend='tpu'): mode={mode!r} does not apply to the tpu backend (it compiles "
                      f"each graph one way: into one program); ignored", stacklevel=3)
    unknown = []
    for key, value in (options or {}).items():
        allowed = _OPTIONS.get(key)
        if allowed is None:
            unknown.append(key)
        elif value not in allowed:
            raise ValueError(f"torch.compile(backend='tpu'): options[{key!r}] must be one of {allowed}, got {value!r}")
        else:
            settings[key] = value
    if unknown:
        warnings.warn(f"torch.compile(backend='tpu'): options {sorted(unknown)} do not apply to the tpu backend "
                      f"(it reads {sorted(_OPTIONS)}); ignored", stacklevel=3)
    return settings


def _decompositions() -> dict:
    # None so far: the tpu lowers the ATen ops AOTAutograd emits itself (the same lowerings as
    # eager), and an op without a lowering makes its graph run eagerly, with a warning naming it.
    return {}


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, mode: Optional[str] = None,
                options: Optional[Dict[str, Any]] = None, **kwargs):
    """torch.compile(model, backend="tpu")."""
    from torch._dynamo.backends.common import aot_autograd

    settings = _check(mode, options)
    _state.note_dynamo_graph(_compat.dynamo_graph_name(), _compat.dynamo_recompile_reason())
    fallback = settings["fallback"]
    compiler = aot_autograd(
        fw_compiler=make_compiler("forward", fallback),
        bw_compiler=make_compiler("backward", fallback),
        inference_compiler=make_compiler("inference", fallback),
        decompositions=_decompositions(),
        # Inputs an inference graph writes (an optimizer's parameters and state, a KV cache) are
        # written by the program itself, not by copies after it.
        keep_inference_input_mutations=True,
    )
    return compiler(gm, example_inputs)


tpu_backend._torch_tpu = True


def on_tpu(gm: torch.fx.GraphModule, example_inputs) -> bool:
    """Whether a Dynamo graph computes on tpu tensors (its inputs or its constants)."""
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "tpu":
            return True
    for node in gm.graph.nodes:
        val = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(val, torch.Tensor) and val.device.type == "tpu":
            return True
    return False


def inductor_on_tpu(gm: torch.fx.GraphModule, example_inputs, config_patches: Optional[Dict[str, Any]]):
    """Plain torch.compile(model) (Inductor) on a graph of tpu tensors: the tpu backend compiles
    it (README "torch.compile"); Inductor settings are reported, not applied."""
    if config_patches:
        warnings.warn(f"torch.compile: the Inductor settings {sorted(config_patches)} (from mode= or options=) do not "
                      f"apply to tpu tensors, which compile with the tpu backend; ignored", stacklevel=2)
    return tpu_backend(gm, example_inputs)
