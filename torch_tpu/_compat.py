"""Version-specific glue for the torch releases we support (2.10 - 2.14). Keep it all here."""
from __future__ import annotations

import torch

TORCH_VERSION = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
SUPPORTED = ((2, 10), (2, 14))


def torch_is_importing() -> bool:
    """True while `import torch` is still running (torch_tpu is then being imported by torch's
    backend autoload). Python's import system marks a module's spec `_initializing` while the
    module executes (importlib._bootstrap; stable since Python 3.4)."""
    return bool(getattr(getattr(torch, "__spec__", None), "_initializing", False))


def generate_methods() -> None:
    # Gives Tensor.tpu(), Module.tpu(), TypedStorage.tpu() (torch.load needs the storage method).
    if not hasattr(torch.Tensor, "tpu"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


def register_autocast_dtype() -> None:
    # Autocast's default for a custom device is float16; the TPU's is bfloat16.
    setter = getattr(torch, "set_autocast_dtype", None) or getattr(torch._C, "set_autocast_dtype", None)
    if setter is not None:
        setter("tpu", torch.bfloat16)
