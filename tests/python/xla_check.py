"""Runs a program our lowering logged on XLA (jaxlib, CPU) and compares it with the host executor
and PyTorch's CPU result. Used by test_stablehlo_xla.py; importing it skips the importing test
module when jax is not installed.
"""
from __future__ import annotations

import os
import re

import pytest
import torch

import torch_tpu
from conftest import to_tpu

# StableHLO's maximum/minimum are IEEE-754 maximum/minimum: a NaN operand gives NaN. XLA's CPU
# backend by default uses "fast" min/max that return the other operand when the NaN is on the
# right (maximum(0, NaN) = 0, and so a max-reduction skips NaNs); this flag restores the specified
# semantics. It is read when the XLA client starts, so it is set before jax is imported.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_fast_min_max=false").strip()
jax = pytest.importorskip("jax", reason="jax/jaxlib are needed to run our programs on XLA")
ml_dtypes = pytest.importorskip("ml_dtypes")
np = pytest.importorskip("numpy")
from jax.extend import backend as jax_backend  # noqa: E402

# 64-bit parameters must reach XLA as they are (jax would otherwise narrow i64 to i32).
jax.config.update("jax_enable_x64", True)

RTOL, ATOL = 1e-5, 1e-6

_NP_DTYPES = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
    "ui8": np.uint8, "ui32": np.uint32, "ui64": np.uint64, "i1": np.bool_,
}
_SIGNATURE = re.compile(r"func\.func public @\w+\((.*?)\) -> \((.*?)\) \{")


def xla_client():
    """XLA's CPU client (jaxlib)."""
    return jax_backend.get_backend("cpu")


def _parse_type(s):
    *dims, dtype = s.split("x")
    return tuple(int(d) for d in dims), _NP_DTYPES[dtype]


def signature(text):
    m = _SIGNATURE.search(text)
    assert m, text
    params = [_parse_type(t) for t in re.findall(r"%arg\d+: tensor<([^>]*)>", m.group(1))]
    results = [_parse_type(t) for t in re.findall(r"tensor<([^>]*)>", m.group(2))]
    return params, results


def _to_numpy(value, shape, dtype):
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        arr = t.float().numpy().astype(dtype) if t.dtype == torch.bfloat16 else t.numpy()
        assert arr.dtype == np.dtype(dtype), f"parameter dtype {arr.dtype}, program wants {np.dtype(dtype)}"
    else:
        arr = np.asarray(value, dtype=dtype)
    assert arr.shape == shape, f"parameter shape {arr.shape}, program wants {shape}"
    return np.ascontiguousarray(arr)


def _to_torch(arr):
    arr = np.asarray(arr)
    if arr.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(arr.copy())


# Note [Check op] (csrc/ir/graph.h): a check prints as a custom_call to "tpu.check", which each
# backend implements (the PJRT backend as an extra result: csrc/runtime/pjrt/compile.h, tested by
# PjrtQueueTest.ACheckOpFailsItsProgramWithItsMessage). Here, where the printed text goes to XLA
# as it is, a check becomes its data operand: what the program computes when the check holds.
_CHECK = re.compile(r'(%\S+) = "stablehlo\.custom_call"\((%[^,]+), %[^)]+\) \{[^}]*call_target_name = "tpu\.check"'
                    r'[^}]*\} : \(([^,]+), [^)]+\) -> (\S+)')


def without_checks(text):
    return _CHECK.sub(r'\1 = "stablehlo.reshape"(\2) : (\3) -> \4', text)


def run_on_xla(xla, text, params):
    """Compiles `text` with XLA and runs it on `params` (tensors or numbers, in program order)."""
    text = without_checks(text)
    sig_params, sig_results = signature(text)
    assert len(params) == len(sig_params), f"{len(params)} parameters given, program has {len(sig_params)}:\n{text}"
    dev = xla.devices()[0]
    args = [jax.device_put(_to_numpy(p, *s), dev) for p, s in zip(params, sig_params)]
    exe = xla.compile_and_load(text, xla.devices()[:1])
    outs = [_to_torch(o) for o in exe.execute(args)]
    assert [tuple(o.shape) for o in outs] == [s for s, _ in sig_results]
    return outs


def logged_program(op, fn, *args):
    """Runs fn(*args) with the program log on (compile cache cleared, so every program of the call
    is compiled and logged) and returns (fn's result, the text of the one program named `op`)."""
    torch.tpu.synchronize()
    torch_tpu._C.clear_compile_cache()
    torch_tpu._C._take_program_log()
    torch_tpu._C._set_program_log(True)
    try:
        torch_tpu.metrics.reset()
        result = fn(*args)
        torch.tpu.synchronize()
    finally:
        torch_tpu._C._set_program_log(False)
    progs = torch_tpu._C._take_program_log()
    fb = torch_tpu.metrics.fallback_ops()
    assert not fb, f"ops fell back to the CPU (no program to check): {fb}"
    texts = [t for name, t in progs if name == op]
    assert len(texts) == 1, f"expected one program named {op}, got {[n for n, _ in progs]}"
    return result, texts[0]


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    out = []
    for v in x:
        out += _flat(v)
    return out


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    return x


def check_xla(xla, op, fn, args, params, rtol=RTOL, atol=ATOL):
    """fn(*args) on tpu and on CPU; the program `op` of the tpu call runs on XLA with `params`.
    XLA's results (in program result order = fn's flattened results) must match both."""
    expected = _flat(fn(*_clone(args)))
    result, text = logged_program(op, fn, *to_tpu(_clone(args)))
    host = [t.cpu() for t in _flat(result)]
    got = run_on_xla(xla, text, params)
    assert len(got) == len(host) == len(expected), f"{len(got)} XLA results for {len(host)} outputs:\n{text}"
    for g, h, e in zip(got, host, expected):
        torch.testing.assert_close(g, h, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"XLA vs host executor: {m}\n{text}")
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"XLA vs PyTorch CPU: {m}\n{text}")
    return text


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)
