"""Where the installed PJRT plugins are, for the pjrt backend (``TORCH_TPU_BACKEND=pjrt``).

The C++ core cannot ask Python where packages live, so the plugin candidates are computed here and
handed to it in the option ``pjrt_plugin_candidates`` before the backend is first created. The
core takes ``TORCH_TPU_PJRT_PLUGIN`` when it is set, else the first candidate that exists --
libtpu only where a TPU is present (README "PJRT backend").

This module only computes paths: it imports nothing of jax or of the plugin packages (libtpu's
own ``__init__`` would set ``TPU_LIBRARY_PATH``). Run as a script it prints the list:

    python torch_tpu/_backend.py      # ':'-separated, as the option takes it (scripts/test.sh)
"""
from __future__ import annotations

import importlib.util
import os

# (package, plugin file in it), preferred first.
_PLUGINS = (
    ("libtpu", "libtpu.so"),  # the TPU plugin
    ("lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so"),  # XLA's CPU plugin, PJRT C API 0.115
    ("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so"),  # an older CPU plugin (API 0.81)
)


def _package_dir(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)  # finds, does not run, a top-level package
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def plugin_candidates() -> list[str]:
    """The installed PJRT plugins, preferred first."""
    out = []
    for package, filename in _PLUGINS:
        d = _package_dir(package)
        if d and os.path.isfile(os.path.join(d, filename)):
            out.append(os.path.join(d, filename))
    return out


def configure(set_option) -> None:
    """Gives the core the candidates (``set_option`` is ``torch_tpu._C.set_option``), unless
    ``TORCH_TPU_PJRT_PLUGIN_CANDIDATES`` already says what they are. Call it before the backend
    is first created (before the first device is used)."""
    if "TORCH_TPU_PJRT_PLUGIN_CANDIDATES" not in os.environ:
        set_option("pjrt_plugin_candidates", ":".join(plugin_candidates()))


if __name__ == "__main__":
    print(":".join(plugin_candidates()))
