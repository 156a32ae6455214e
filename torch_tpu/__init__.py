"""torch_tpu: a native PyTorch backend for TPU-class accelerators.

``import torch_tpu`` registers the ``tpu`` device (PyTorch's PrivateUse1 slot), the
``torch.tpu`` module and the tensor/module/storage ``.tpu()`` methods. The default device
implementation is the host executor, which runs the compiled programs on the CPU.
"""
from __future__ import annotations

import sys

_registered = False
_importing = True
_autoload_error = None  # what kept the device from registering during torch's autoload


def _autoload() -> None:
    """Entry point of PyTorch's ``torch.backends`` group, run at the end of ``import torch``.

    Defined before anything is imported: when the user imports torch_tpu first, ``import torch``
    below runs this while torch_tpu is still being imported (registration then happens at the end
    of this module). It must never raise: a failure here would break ``import torch``.
    """
    if _importing:
        return
    if _autoload_error is not None:
        # Registration failed while torch imported us, and the warning is out. Forget this
        # half-set-up package so that an explicit `import torch_tpu` runs again and raises.
        sys.modules.pop(__name__, None)
        return
    try:
        _register()
    except Exception as e:  # pragma: no cover - reported, never raised
        import warnings

        warnings.warn(f"torch_tpu could not register the tpu device: {e}")


import torch  # noqa: E402

from . import _compat  # noqa: E402
from ._version import get_version as _get_version  # noqa: E402

__version__ = _get_version()


def _library_paths() -> dict:
    """Where PyTorch's, torch_tpu's and Python's own frames live: error messages name the first
    frame outside them as the user's line (Note [User line] in csrc/torch/python_location.cc)."""
    import os
    import sysconfig

    def dirs(*paths):
        out = set()
        for p in paths:
            if p:
                out.update({os.path.join(p, ""), os.path.join(os.path.realpath(p), "")})
        return sorted(out)

    sc = sysconfig.get_paths()
    return {
        "packages": dirs(os.path.dirname(torch.__file__), os.path.dirname(__file__)),
        "site": dirs(sc.get("purelib"), sc.get("platlib")),
        "stdlib": dirs(sc.get("stdlib"), sc.get("platstdlib"), os.path.dirname(os.__file__)),
    }


def _register() -> None:
    global _registered
    if _registered:
        return
    from . import _C  # noqa: F401  (loads the kernels and the runtime)
    from . import _backend
    from . import _tpu_module as _device_module

    _backend.configure(_C.set_option)  # the installed PJRT plugins, before the backend exists

    _C._check_environment()  # a bad TORCH_TPU_* value raises (ValueError) before any device exists
    _C._set_library_paths(**_library_paths())
    _C._register_device()
    if torch._C._get_privateuse1_backend_name() != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    if not hasattr(torch, "tpu"):
        torch._register_device_module("tpu", _device_module)
    _compat.generate_methods()
    _compat.register_autocast_dtype()
    _compat.register_import_patches()
    _compat.register_compile_hooks()
    _compat._apply(_compat.register_data_parallel_check, torch.nn.parallel)
    from . import distributed as _distributed

    _distributed.register()  # the c10d backend "tpu" / "tpu_dist"
    from . import modes as _modes

    _modes.register_step_hook()  # fused mode: windows cut as optimizer steps start and end (Note [Step windows])

    import atexit

    atexit.register(_report_errors_at_exit)
    _registered = True


def _report_errors_at_exit() -> None:
    """Note [Errors at exit] (csrc/torch/sync_wait.h): device errors no sync point reported are
    printed, and the process then exits with a nonzero status instead of 0."""
    from . import _C

    _C._drain_autograd_device_threads()  # Note [Autograd threads at exit] (csrc/torch/sync_wait.h)
    errors = _C._take_errors_at_exit()
    if errors:
        sys.stderr.write("torch_tpu: device errors that no sync point reported (nothing read the data they "
                         "concern, and nothing called torch.tpu.synchronize()):\n" + errors)
        sys.stderr.flush()


# Note [Bad options at import]: an explicit `import torch_tpu` raises what keeps the device from
# registering (a bad TORCH_TPU_* value, say). When `import torch` imports us through its backend
# autoload, raising would break `import torch` itself: there we warn, register nothing (torch
# stays usable on the CPU), and _autoload drops this module so that `import torch_tpu` raises.
if _compat.torch_is_importing():
    try:
        _register()
    except Exception as e:
        import warnings

        _autoload_error = e
        warnings.warn(f"the tpu device is not available: {e}. `import torch` continues without "
                      f"it; `import torch_tpu` raises this error.", RuntimeWarning)
else:
    _register()
_importing = False

from . import metrics  # noqa: E402
from ._tpu_module import *  # noqa: E402,F401,F403
from .modes import eager_mode, get_eager_mode, set_check_nan, set_eager_mode  # noqa: E402,F401
from . import config  # noqa: E402,F401
from . import data  # noqa: E402,F401
from . import debug  # noqa: E402,F401
from . import compile_cache  # noqa: E402,F401
from . import compile  # noqa: E402,F401
from . import export  # noqa: E402,F401
from . import profiler  # noqa: E402,F401

__all__ = [
    "__version__",
    "device",
    "eager_mode",
    "get_eager_mode",
    "set_eager_mode",
    "set_check_nan",
    "metrics",
    "config",
    "data",
    "debug",
    "compile_cache",
    "compile",
    "export",
    "profiler",
    "memory",
]
