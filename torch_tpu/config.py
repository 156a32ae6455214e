"""torch_tpu options: one registry (C++), readable from TORCH_TPU_* variables, settable here.

    torch_tpu.config.set("fallback", "error")
    torch_tpu.config.get("chip")
    print(torch_tpu.config.describe())

Each option declares what it accepts (a range for integers, the choices for text); the same
declaration checks ``set`` and the environment. A bad environment value makes ``import torch_tpu``
raise a ValueError naming the variable, its value and what is accepted (``import torch`` on its
own, through the backend autoload, warns instead and leaves the tpu device unregistered).
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
    """Every option: name, environment variable, default, current value, what it accepts
    (``accepted``, plus ``range`` for integers and ``choices`` for text) and help."""
    return _C.options()


def choices(name: str) -> tuple[str, ...]:
    """The values a text option accepts."""
    for o in options():
        if o["name"] == name:
            return tuple(o.get("choices", ()))
    raise ValueError(f"unknown torch_tpu option {name!r}")


def describe() -> str:
    lines = []
    for o in options():
        lines.append(f"{o['env']:<28} = {o['value']!r:<10} (default {o['default']!r}; "
                     f"{o['accepted']}) {o['help']}")
    return "\n".join(lines)
