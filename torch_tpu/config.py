"""torch_tpu options: one registry (C++), readable from TORCH_TPU_* variables, settable here.

    torch_tpu.config.set("fallback", "error")
    torch_tpu.config.get("chip")
    print(torch_tpu.config.describe())
"""
from __future__ import annotations

from . import _C


def set(name: str, value) -> None:  # noqa: A001 - mirrors the option registry's verb
    if isinstance(value, bool):
        value = "1" if value else "0"
    _C.set_option(name, str(value))


def get(name: str) -> str:
    return _C.get_option(name)


def options() -> list[dict]:
    """Every option: name, environment variable, default, current value and help."""
    return _C.options()


def describe() -> str:
    lines = []
    for o in options():
        lines.append(f"{o['env']:<28} = {o['value']!r:<10} (default {o['default']!r}) {o['help']}")
    return "\n".join(lines)
