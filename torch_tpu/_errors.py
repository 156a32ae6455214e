"""Help for device errors (csrc/torch/device_errors.cc calls this on the error path only): which
nn.Module parameter or buffer a CPU tensor met by a tpu op is, so the message can say what to move."""
from __future__ import annotations

import sys

import torch

_MAX_FRAMES = 200


def _same(p: torch.Tensor, t: torch.Tensor) -> bool:
    if p is t:
        return True
    # A view of it (weight.t() inside F.linear) shares its storage.
    return (p.device == t.device and p.numel() > 0 and t.numel() > 0
            and p.untyped_storage().data_ptr() == t.untyped_storage().data_ptr())


def _modules_in_calling_frames() -> list:
    found, seen = [], set()
    frame = sys._getframe(1)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        for value in list(frame.f_locals.values()):
            if isinstance(value, torch.nn.Module) and id(value) not in seen:
                seen.add(id(value))
                found.append(value)
        frame = frame.f_back
    return found  # innermost first


def describe_foreign_tensor(t: torch.Tensor) -> str:
    """A sentence naming the parameter/buffer `t` is (qualified from the outermost module being
    called that holds it) and how to move it, or "" if it belongs to no module in the frames."""
    for module in reversed(_modules_in_calling_frames()):
        for kind, named in (("parameter", module.named_parameters), ("buffer", module.named_buffers)):
            for name, p in named():
                if _same(p, t):
                    return (f"It is the {kind} '{name}' of {type(module).__name__}, which is still on the "
                            f"{t.device.type.upper()}: move the model to the device with model.to('tpu') "
                            f"(it moves every parameter and buffer), before creating its optimizer.")
    return ""
