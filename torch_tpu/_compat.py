"""Version-specific glue for the torch releases we support (2.10 - 2.14). Keep it all here."""
from __future__ import annotations

import functools
import importlib.abc
import sys

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


# ---- Hugging Face accelerate ------------------------------------------------------------------
# accelerate (1.x) picks its device from a fixed list of device types (mps, npu, cuda, xpu, ...)
# and offers no extension point for a PrivateUse1 device (it does not read torch.accelerator; its
# only override is the ACCELERATE_TORCH_DEVICE variable, which would also override cpu=True).
# Without help, Accelerator() and the HF Trainer put the model on the CPU while transformers
# (which reads torch.accelerator) picks tpu:0, and from_pretrained(device_map="auto") finds no
# accelerator memory and loads on the CPU. Two small registrations fix both, applied when
# accelerate's modules are first imported (at once if they already are), and active only while
# tpu is the process's torch.accelerator:
# - PartialState.default_device: tpu:<current device> where accelerate would choose the CPU;
# - accelerate.utils.modeling.get_max_memory: integer device ids (accelerate's "accelerator i",
#   which torch.device(i) resolves to tpu:i) get the tpu's free memory.
# ACCELERATE_TORCH_DEVICE, Accelerator(cpu=True) and an explicit max_memory keep their meaning.
def _tpu_is_the_accelerator() -> bool:
    acc = torch.accelerator.current_accelerator(check_available=True)
    return acc is not None and acc.type == "tpu"


def _patch_accelerate_state(module) -> None:
    state = module.PartialState
    original = state.default_device
    if getattr(original.fget, "_torch_tpu", False):
        return

    def default_device(self):
        device = original.fget(self)
        if device.type == "cpu" and _tpu_is_the_accelerator():
            return torch.device("tpu", torch.tpu.current_device())
        return device

    default_device._torch_tpu = True
    state.default_device = property(default_device, doc=original.__doc__)


def _patch_accelerate_modeling(module) -> None:
    original = module.get_max_memory
    if getattr(original, "_torch_tpu", False):
        return

    def get_max_memory(max_memory=None):
        if not _tpu_is_the_accelerator():
            return original(max_memory)
        if max_memory is None:
            tpus = {i: torch.tpu.mem_get_info(i)[0] for i in range(torch.tpu.device_count())}
            return {**tpus, **original(None)}  # accelerate's order: accelerators, then cpu/disk
        ids = sorted(k for k in max_memory if isinstance(k, int))
        for i in ids:
            if not 0 <= i < torch.tpu.device_count():
                module.logger.warning(f"Device {i} is not available, available devices are "
                                      f"{list(range(torch.tpu.device_count()))}")
        rest = original({k: v for k, v in max_memory.items() if not isinstance(k, int)})
        limit = module.convert_file_size_to_int
        return {**{i: limit(max_memory[i]) if isinstance(max_memory[i], str) else max_memory[i] for i in ids},
                **rest}

    get_max_memory._torch_tpu = True
    get_max_memory.__doc__ = original.__doc__
    module.get_max_memory = get_max_memory
    # Modules that bound the function by name before this ran (torch_tpu imported after them).
    for name, attr in (("accelerate.utils", "get_max_memory"),
                       ("transformers.integrations.accelerate", "accelerate_max_memory")):
        other = sys.modules.get(name)
        if other is not None and getattr(other, attr, None) is original:
            setattr(other, attr, get_max_memory)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a patch on a module right after its first import has executed it."""

    def __init__(self, patches: dict):
        self._patches = patches

    def find_spec(self, fullname, path, target=None):
        patch = self._patches.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, lambda m: (self._patches.pop(fullname, None), _apply(patch, m)))
        return spec


def _apply(patch, module) -> None:
    # A library whose internals changed must still import: the registration is then skipped, said once.
    try:
        patch(module)
    except Exception as e:  # pragma: no cover - depends on the library's version
        import warnings

        warnings.warn(f"torch_tpu: could not register its {module.__name__} integration ({e!r}); "
                      "that library will not see the tpu device")


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner, after):
        self._inner, self._after = inner, after

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._after(module)

    def __getattr__(self, name):  # get_source, get_resource_reader, ... of the real loader
        return getattr(self._inner, name)


# ---- safetensors -------------------------------------------------------------------------------
# safetensors checks a device string against its own list (cpu, cuda, mps, npu, xpu, ...) and has
# no way to add one, so load_file(path, device="tpu") failed with "device tpu is invalid". Its
# load_file (and load_model, which calls it) now reads a file meant for a tpu device on the CPU
# (memory-mapped, as for any device) and moves the tensors. safe_open(..., device="tpu") still
# refuses the name: open it on "cpu" and move the tensors with .to("tpu").
def _is_tpu_device(device) -> bool:
    if isinstance(device, str):
        return device.split(":")[0] == "tpu"
    return isinstance(device, torch.device) and device.type == "tpu"


def _patch_safetensors_torch(module) -> None:
    original = module.load_file
    if getattr(original, "_torch_tpu", False):
        return

    @functools.wraps(original)
    def load_file(filename, device="cpu", **kwargs):
        if not _is_tpu_device(device):
            return original(filename, device, **kwargs)
        target = torch.device(device)
        return {name: t.to(target) for name, t in original(filename, "cpu", **kwargs).items()}

    load_file._torch_tpu = True
    module.load_file = load_file


def register_import_patches(patches: dict | None = None) -> None:
    """The accelerate and safetensors registrations above (or `patches`: module name -> patch), now
    or when those modules are imported."""
    if patches is None:
        patches = {"accelerate.state": _patch_accelerate_state, "accelerate.utils.modeling": _patch_accelerate_modeling,
                   "safetensors.torch": _patch_safetensors_torch}
    patches = dict(patches)
    for name in list(patches):
        if name in sys.modules:
            _apply(patches.pop(name), sys.modules[name])
    if patches:
        sys.meta_path.insert(0, _AfterImport(patches))


# ---- nn.DataParallel -----------------------------------------------------------------------------
# DataParallel runs only on CUDA (its scatter, replicate and gather are CUDA kernels), but it takes
# torch._utils._get_available_device_type(), which is "tpu" once torch_tpu is registered, and then
# failed deep inside with "module 'torch._C' has no attribute '_scatter'". It has no extension
# point: its constructor (and the functional data_parallel) get a check that says what to use.
DATA_PARALLEL_MESSAGE = (
    "nn.DataParallel supports only CUDA devices (its scatter, replicate and gather are CUDA kernels). On the tpu "
    "device use torch.nn.parallel.DistributedDataParallel with torch.distributed.init_process_group(backend='tpu'), "
    "one process per device (torchrun --nproc-per-node=N), or, on a single device, call the model directly after "
    "model.to('tpu').")


def _tpu_is_the_parallel_device() -> bool:
    return torch._utils._get_available_device_type() == "tpu"


def register_data_parallel_check(parallel) -> None:
    """`parallel` is torch.nn.parallel (whose `data_parallel` attribute is the function)."""
    dp = sys.modules["torch.nn.parallel.data_parallel"]
    cls = dp.DataParallel
    if getattr(cls.__init__, "_torch_tpu", False):
        return
    original_init, original_fn = cls.__init__, dp.data_parallel

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        if _tpu_is_the_parallel_device():
            raise RuntimeError(DATA_PARALLEL_MESSAGE)
        original_init(self, *args, **kwargs)

    @functools.wraps(original_fn)
    def data_parallel(*args, **kwargs):
        if _tpu_is_the_parallel_device():
            raise RuntimeError(DATA_PARALLEL_MESSAGE)
        return original_fn(*args, **kwargs)

    __init__._torch_tpu = True
    cls.__init__ = __init__
    dp.data_parallel = data_parallel
    parallel.data_parallel = data_parallel


# ---- torch.compile -------------------------------------------------------------------------------
# The Dynamo backend "tpu" is found through the `torch_dynamo_backends` entry point of our
# distribution (pyproject.toml). Where that metadata is missing (the package used from a source
# tree), it is registered when Dynamo's registry is first imported instead (never by importing
# Dynamo ourselves: it is slow, and `import torch` autoloads torch_tpu).
def _our_entry_point_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value.startswith("torch_tpu.") for ep in entry_points(group="torch_dynamo_backends", name="tpu"))


def _register_dynamo_backend(registry) -> None:
    if "tpu" in registry._COMPILER_FNS or _our_entry_point_installed():
        return
    from .compile import tpu_backend

    registry.register_backend(compiler_fn=tpu_backend, name="tpu")


# Plain torch.compile(model) runs Inductor, and torch 2.13's Inductor registers a code generator
# for a device named "tpu" (Pallas, importing another package's torch_tpu._internal modules).
# Inductor's device extension point (codegen.common.register_backend_for_device) takes a kernel
# generator for Inductor's own loop-level IR: plugging ours in there would be a second lowering
# path. So a graph whose tensors are on the tpu goes to the tpu backend at Inductor's entry
# (torch._inductor.compile_fx.compile_fx, through which both torch.compile's default backend and
# backend="inductor" go); graphs on other devices reach Inductor unchanged.
def _patch_inductor_entry(module) -> None:
    original = module.compile_fx
    if getattr(original, "_torch_tpu", False):
        return

    @functools.wraps(original)
    def compile_fx(model_, example_inputs_, *args, **kwargs):
        from .compile import _backend

        if isinstance(model_, torch.fx.GraphModule) and _backend.on_tpu(model_, example_inputs_):
            return _backend.inductor_on_tpu(model_, example_inputs_, kwargs.get("config_patches"))
        return original(model_, example_inputs_, *args, **kwargs)

    compile_fx._torch_tpu = True
    module.compile_fx = compile_fx


def register_compile_hooks() -> None:
    register_import_patches({"torch._dynamo.backends.registry": _register_dynamo_backend,
                             "torch._inductor.compile_fx": _patch_inductor_entry})


def dynamo_recompile_reason():
    """Why Dynamo is compiling the frame it hands the backend now, when it is a recompile (its first
    failed guard), else None. Dynamo keeps it in the compile's metrics context."""
    try:
        from torch._dynamo.utils import get_metrics_context

        return get_metrics_context()._metrics.get("recompile_reason")
    except Exception:  # pragma: no cover - depends on the torch version
        return None


def aot_forward_returns():
    """For an AOTAutograd forward graph being compiled: how many of its outputs the user's code
    gets (outputs and mutated inputs); the rest are saved for the backward. None if unknown."""
    try:
        from torch._guards import TracingContext

        ctx = TracingContext.try_get()
        meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
        return int(meta.num_forward_returns) if meta is not None else None
    except Exception:  # pragma: no cover - depends on the torch version
        return None


def dynamo_graph_name() -> str:
    """'dynamo graph <compile id> of <function> (<file>:<line>)' for the graph being compiled."""
    try:
        from torch._guards import CompileContext, TracingContext

        cid = CompileContext.current_compile_id()
        ctx = TracingContext.try_get()
        frame = ""
        if ctx is not None and getattr(ctx, "frame_summary_stack", None):
            f = ctx.frame_summary_stack[0]
            frame = f" of {f.name} ({f.filename.rsplit('/', 1)[-1]}:{f.lineno})"
        return f"dynamo graph {cid}{frame}"
    except Exception:  # pragma: no cover - depends on the torch version
        return "dynamo graph"


# ---- torch.export --------------------------------------------------------------------------------
def exported_flat_inputs(ep, args: tuple, kwargs: dict):
    """The graph module's flat inputs for (args, kwargs) and each one's InputKind: the
    program's lifted state in input_specs order, then the user's inputs flattened (the calling
    convention ExportedProgram.module() uses; torch 2.10-2.14 name it _graph_module_flat_inputs)."""
    from torch.export.graph_signature import InputKind

    flat = list(ep._graph_module_flat_inputs(args, kwargs))
    state = [s.kind for s in ep.graph_signature.input_specs if s.kind != InputKind.USER_INPUT]
    return flat, state + [InputKind.USER_INPUT] * (len(flat) - len(state))


# ---- torch.distributed ---------------------------------------------------------------------------
# A process group's *default* backend is what asks for it without naming a device (DDP's
# constructor, hooks). distributed_c10d._new_process_group_helper (torch 2.10-2.14) gets it wrong
# for a plugin backend like ours: with no backend named ("undefined") it maps the process's
# accelerator to its registered backend (ours) but marks the default Gloo unless it is NCCL, and
# no Gloo backend exists in that group -- DDP failed with "Could not find backend type 1 for
# Process Group with name gloo"; with "cpu:gloo,tpu:tpu" it means to pick the plugin but compares
# the plugins' upper-case names with the config's lower-case ones, so the default stays undefined
# (and warns). The group's default becomes our backend whenever the config holds it, as NCCL is
# for "cpu:gloo,cuda:nccl".
def patch_default_backend(c10d) -> None:
    helper = c10d._new_process_group_helper
    if getattr(helper, "_torch_tpu", False):
        return

    @functools.wraps(helper)
    def new_process_group_helper(*args, **kwargs):
        pg, store = helper(*args, **kwargs)
        backend = kwargs["backend"] if "backend" in kwargs else args[3]
        if pg is not c10d.GroupMember.NON_GROUP_MEMBER:
            backends = {str(b) for b in c10d.BackendConfig(backend).get_device_backend_map().values()}
            if backends & {"tpu", "tpu_dist"} and "nccl" not in backends:
                pg._set_default_backend(c10d.ProcessGroup.BackendType.CUSTOM)
        return pg, store

    new_process_group_helper._torch_tpu = True
    c10d._new_process_group_helper = new_process_group_helper


# torch.distributed's _set_pg_timeout (what torchtitan calls as set_timeout) sets the timeout of a
# group's Gloo and NCCL backends only and warns for any other (torch 2.10-2.14). Ours takes it too:
# the group's tpu backend, then the original for whatever else the group holds.
def patch_set_pg_timeout(c10d) -> None:
    original = c10d._set_pg_timeout
    if getattr(original, "_torch_tpu", False):
        return

    @functools.wraps(original)
    def set_pg_timeout(timeout, group=None):
        pg = c10d._get_default_group() if group is None else group
        devices = [] if c10d._rank_not_in_group(pg) else list(pg._device_types)
        tpu = torch.device("tpu")
        if tpu in devices:
            backend = pg._get_backend(tpu)
            if hasattr(backend, "_set_default_timeout"):
                backend._set_default_timeout(timeout)
                if all(d == tpu for d in devices):
                    return
        original(timeout, group)

    set_pg_timeout._torch_tpu = True
    c10d._set_pg_timeout = set_pg_timeout
