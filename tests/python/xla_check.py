"""Helpers for tests that hand the programs an op compiled to XLA (jaxlib, CPU) and compare its
results with the device's: the printed IR must be StableHLO with the same meaning."""
import os

import pytest
import torch

import torch_tpu


def xla_backend():
    """XLA's CPU client, or a skip when jax is not installed."""
    # StableHLO's maximum is IEEE maximum (NaN wins); XLA's CPU default "fast" min/max is not.
    # The flag is read when the client starts, so it is set before jax is imported.
    if "jax" not in __import__("sys").modules:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_fast_min_max=false").strip()
    pytest.importorskip("jax")
    from jax.extend import backend as jax_backend
    return jax_backend.get_backend("cpu")


def programs(fn):
    """Runs fn() with the program log on (compile cache cleared, so every program is compiled and
    logged); returns (fn's result, {op name: StableHLO text})."""
    torch.tpu.synchronize()
    torch_tpu._C.clear_compile_cache()
    torch_tpu._C._take_program_log()
    torch_tpu._C._set_program_log(True)
    try:
        result = fn()
        torch.tpu.synchronize()
    finally:
        torch_tpu._C._set_program_log(False)
    return result, dict(torch_tpu._C._take_program_log())


def run_on_xla(xla, text, *args):
    """Compiles `text` with XLA and runs it on float32/int64 tensors given in parameter order."""
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)  # i64 parameters stay i64
    dev = xla.devices()[0]
    exe = xla.compile_and_load(text, xla.devices()[:1])
    outs = exe.execute([jax.device_put(np.ascontiguousarray(a.cpu().numpy()), dev) for a in args])
    return [torch.from_numpy(np.asarray(o).copy()) for o in outs]
