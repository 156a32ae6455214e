"""Runs torchtitan's own trainer (torchtitan.train.main: its config system, Trainer, parallelize
functions and training loop) on the tpu device, or on the CPU with Gloo for reference.

    torchrun --standalone --nproc_per_node 2 examples/torchtitan_tpu.py [--device tpu|cpu]
        [--loss-file PATH] --module llama3 --config llama3_debugmodel \
        --parallelism.data_parallel_shard_degree 2 ...

Every argument but ``--device`` and ``--loss-file`` goes to torchtitan's ConfigManager unchanged.
``--device cpu`` runs the same job on the CPU (process group ``gloo``, torch_tpu not loaded);
``--loss-file`` makes rank 0 write one JSON line per logged step (step, full-precision loss,
grad norm, seconds since the previous step), for comparing runs, and on tpu a last line with the
ops that ran on the CPU fallback.

torchtitan (0.3.0) assumes CUDA in a few places; this launcher patches them in-process, before
the trainer starts, and never edits torchtitan's files:

- ``torchtitan.distributed.minimal_async_ep.kernels`` imports ``triton`` (a CUDA-only package) at
  import time, through model code every model imports; it holds the Triton kernels of the MoE
  expert-parallel token dispatcher, which dense Llama3/Qwen3 never call. It is replaced by a stub
  whose functions raise.
- FlexAttention (the only attention the language models accept) is ``torch.compile``d with
  Inductor, whose flex kernels are Triton (CUDA) or forward-only C++ (CPU), and
  ``flex_attention`` refuses devices other than CUDA/CPU/XPU/HPU/MPS and backward on the CPU.
  The launcher runs flex attention and block-mask creation unfused (PyTorch's own eager
  flex_attention: the dense math with its autograd backward, on any device) and lets the device
  check through, on the tpu and on the CPU alike, so both runs compute the same thing.
- CPU only: torchtitan picks ``torch._utils._get_available_device_type() or "cuda"``, and its
  memory monitor calls CUDA-only device-module functions; the reference run gets "cpu" and a
  device module with those functions (nothing is measured). torchtitan sets FSDP's gradient
  divide factor to 1, which FSDP2 turns into ``ReduceOp.PREMUL_SUM(1.0)``, and Gloo has no
  PREMUL_SUM: the reference run forces FSDP's plain SUM instead (the same sum; the tpu backend
  has PREMUL_SUM and runs torchtitan's choice unchanged).
- torchtitan 0.3.0 calls ``torch.distributed.set_timeout`` (after the first step), which torch
  2.13 has under its older private name ``distributed_c10d._set_pg_timeout``: the launcher adds
  the public name when it is missing (a torch-version gap, not a device one; the same on both).

On tpu nothing else is changed: torchtitan finds ``tpu`` through
``torch._utils._get_available_device_type()``, ``torch.tpu`` as its device module, and the c10d
backend ``tpu`` through ``Backend.default_device_backend_map`` (registered by ``import torch_tpu``).
Don't pass ``--debug.deterministic``: it re-compiles flex attention with Inductor.

Options (torchtitan's own) the runs here need or use:
``--parallelism.spmd_backend partial_dtensor`` (torchtitan's default "spmd_types" needs a newer
torch's fully_shard: on 2.13 FSDP and TP fail on the CPU too); ``--hf_assets_path`` and
``--dataloader.dataset_path`` pointing at examples/torchtitan_assets.py's output (the debug
configs' ./tests/assets are not in the wheel); for comparing devices, one seed checkpoint loaded
by both runs (``--checkpoint.create_seed_checkpoint`` once on 1 rank, then ``--checkpoint.enable
--checkpoint.load_only --checkpoint.initial_load_path DIR/step-0``), since tpu's generator draws
other initial weights than the CPU's, and ``--training.mixed_precision_param float32`` for
float32-exact agreement.
"""
from __future__ import annotations

import json
import os
import sys
import time
import types


def _our_args(argv: list[str]) -> tuple[str, str | None, list[str]]:
    device, loss_file, rest = "tpu", None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        for name in ("--device", "--loss-file"):
            if a == name or a.startswith(name + "="):
                if a == name:
                    i += 1
                    if i == len(argv):
                        sys.exit(f"{name} needs a value")
                    val = argv[i]
                else:
                    val = a.split("=", 1)[1]
                if name == "--device":
                    device = val
                else:
                    loss_file = val
                break
        else:
            rest.append(a)
        i += 1
    if device not in ("tpu", "cpu"):
        sys.exit(f"--device must be tpu or cpu, not {device!r}")
    return device, loss_file, rest


class _CpuDeviceModule(types.ModuleType):
    """torch.cpu plus the memory-monitor functions (and an index) torchtitan asks its device module for."""

    def __getattr__(self, name):
        import torch

        return getattr(torch.cpu, name)

    @staticmethod
    def get_device_name(device=None):
        return "cpu"

    @staticmethod
    def get_device_properties(device=None):
        return types.SimpleNamespace(total_memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))

    @staticmethod
    def current_device():
        return 0  # torch.cpu.current_device() is the string "cpu"; torchtitan passes it to barrier(device_ids=)

    @staticmethod
    def memory_stats(device=None):
        return {}

    @staticmethod
    def reset_peak_memory_stats(device=None):
        pass

    @staticmethod
    def empty_cache():
        pass


def _stub_triton_kernels() -> None:
    # torchtitan imports triton (CUDA-only) at import time for the MoE expert-parallel dispatcher's kernels.
    name = "torchtitan.distributed.minimal_async_ep.kernels"
    stub = types.ModuleType(name)

    def _missing(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def kernel(*args, **kwargs):
            raise RuntimeError(f"{name}.{attr} is a Triton (CUDA) kernel: not available on this device")

        return kernel

    stub.__getattr__ = _missing
    sys.modules[name] = stub


def _unfused_flex_attention() -> None:
    import torch.nn.attention.flex_attention as fa

    import torchtitan.models.common.attention as attention

    # flex_attention refuses devices outside CUDA/CPU/XPU/HPU/MPS and backward on the CPU; its
    # unfused path (dense math, autograd backward) runs anywhere, so only the device check is relaxed.
    fa._validate_device = lambda query, key, value: None
    # Inductor's flex kernels are Triton (CUDA) or forward-only C++ (CPU): run it unfused instead.
    attention.FlexAttention._compiled_flex_attn = fa.flex_attention
    # Block masks were built by an Inductor-compiled create_block_mask: build them eagerly instead.
    attention._compiled_create_block_mask = fa.create_block_mask


def _gloo_sum_reduction() -> None:
    import torchtitan.distributed.fsdp as tt_fsdp

    disable_division = tt_fsdp.disable_fsdp_gradient_division

    # Gloo has no ReduceOp.PREMUL_SUM, which FSDP2 uses for a divide factor of 1: reduce with SUM.
    def disable_division_with_sum(model):
        disable_division(model)
        for module in model.modules():
            if isinstance(module, tt_fsdp.FSDPModule):
                module.set_force_sum_reduction_for_comms(True)

    tt_fsdp.disable_fsdp_gradient_division = disable_division_with_sum


def _record_losses(path: str) -> None:
    import torch.distributed as dist

    from torchtitan.components.metrics import MetricsProcessor

    log = MetricsProcessor.log
    last = [time.perf_counter()]

    def logged(self, step, global_avg_loss, global_max_loss, grad_norm, extra_metrics=None):
        now = time.perf_counter()
        if not dist.is_initialized() or dist.get_rank() == 0:
            with open(path, "a") as f:
                f.write(json.dumps({"step": step, "loss": float(global_avg_loss), "grad_norm": float(grad_norm),
                                    "seconds": now - last[0]}) + "\n")
        last[0] = now
        return log(self, step, global_avg_loss, global_max_loss, grad_norm, extra_metrics)

    MetricsProcessor.log = logged


def main() -> None:
    device, loss_file, rest = _our_args(sys.argv[1:])
    if device == "cpu":
        # The reference run: keep torch's backend autoload from loading torch_tpu.
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch

    if device == "tpu":
        import torch_tpu  # noqa: F401  (the tpu device, torch.tpu, the c10d backend "tpu")

        assert torch._utils._get_available_device_type() == "tpu"
    else:
        # torchtitan takes `_get_available_device_type() or "cuda"`: without an accelerator, say "cpu".
        torch._utils._get_available_device_type = lambda: "cpu"
        import torchtitan.tools.utils as tt_utils

        # torch.cpu lacks the memory functions torchtitan's memory monitor calls (set before the
        # modules that import device_module by name are imported).
        tt_utils.device_module = _CpuDeviceModule("torch_cpu_for_torchtitan")

    if not hasattr(torch.distributed, "set_timeout"):
        # torchtitan 0.3.0 calls the public name of newer torch; 2.13 has it as _set_pg_timeout.
        torch.distributed.set_timeout = torch.distributed.distributed_c10d._set_pg_timeout
    _stub_triton_kernels()
    _unfused_flex_attention()
    if device == "cpu":
        _gloo_sum_reduction()
    if loss_file:
        _record_losses(loss_file)

    import torchtitan.tools.utils as tt_utils
    from torchtitan.train import main as torchtitan_main

    assert tt_utils.device_type == device, (tt_utils.device_type, device)
    sys.argv = [sys.argv[0]] + rest
    torchtitan_main()
    if loss_file and device == "tpu" and int(os.environ.get("RANK", "0")) == 0:
        import torch_tpu

        # The ops that ran on the CPU fallback instead of the device, for the record.
        with open(loss_file, "a") as f:
            f.write(json.dumps({"fallback_ops": torch_tpu.metrics.fallback_ops()}) + "\n")


if __name__ == "__main__":
    main()
