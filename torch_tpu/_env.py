"""The environment report of ``python -m torch_tpu``: versions, backend and devices, the options
in force and where each value comes from, the compile cache directory, the CPU's instruction
sets and thread counts. ``collect()`` returns it as a dict, ``report()`` as text."""
from __future__ import annotations

import os
import platform
import sys

import torch

from . import _C, config
from ._version import DISTRIBUTION, get_version

CACHE_DIR_OPTION = "cache_dir"  # TORCH_TPU_CACHE_DIR: the persistent compile cache


def _option_sources() -> list[dict]:
    out = []
    for o in config.options():
        if o["env"] in os.environ:
            source = "env"
        elif o["value"] == o["default"]:
            source = "default"
        else:
            source = "set in code (torch_tpu.config.set)"
        out.append({"name": o["name"], "env": o["env"], "value": o["value"], "default": o["default"],
                    "source": source})
    return out


def _cache_dir(options: list[dict]) -> dict:
    for o in options:
        if o["name"] == CACHE_DIR_OPTION:
            return {"option": o["env"], "value": o["value"] or None, "source": o["source"]}
    return {"option": "TORCH_TPU_CACHE_DIR", "value": None,
            "source": "not available in this build (no cache_dir option)"}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect() -> dict:
    devices = []
    for i in range(_C.device_count()):
        p = _C.get_device_properties(i)
        devices.append({"index": i, "name": p["name"], "chip": p["chip"], "total_memory": p["total_memory"],
                        "hbm_bytes": p["hbm_bytes"]})
    options = _option_sources()
    host = dict(_C._host_cpu_info())
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        affinity = os.cpu_count()
    return {
        "torch_tpu": {"version": get_version(), "distribution": DISTRIBUTION,
                      "path": os.path.dirname(os.path.abspath(__file__))},
        "torch": torch.__version__,
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "platform": platform.platform(),
        "backend": _C.get_device_properties(0)["backend"] if devices else None,
        "device_count": len(devices),
        "devices": devices,
        "options": options,
        "compile_cache_dir": _cache_dir(options),
        "cpu": {"model": _cpu_model(), "torch_capability": torch.backends.cpu.get_cpu_capability(),
                "host_simd_target": host["simd_target"], "onednn_version": host["onednn_version"],
                "onednn_isa": host["onednn_isa"]},
        "threads": {"host_executor": _C._get_num_threads(), "torch_intra_op": torch.get_num_threads(),
                    "torch_inter_op": torch.get_num_interop_threads(), "cpu_count": os.cpu_count(),
                    "affinity": affinity},
    }


def _bytes(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def report(info: dict | None = None) -> str:
    info = info or collect()
    t = info["torch_tpu"]
    lines = [
        "torch_tpu environment",
        f"  torch_tpu          {t['version']} ({t['distribution']}, {t['path']})",
        f"  torch              {info['torch']}",
        f"  python             {info['python']['version']} ({info['python']['implementation']}, "
        f"{info['python']['executable']})",
        f"  platform           {info['platform']}",
        f"  backend            {info['backend']}",
        f"  devices            {info['device_count']}",
    ]
    for d in info["devices"]:
        lines.append(f"    tpu:{d['index']}            {d['name']}, chip {d['chip']}, "
                     f"memory {_bytes(d['total_memory'])} (chip HBM {_bytes(d['hbm_bytes'])})")
    lines.append("  options (value, source)")
    for o in info["options"]:
        lines.append(f"    {o['env']:<28} {o['value']!r:<12} {o['source']}")
    c = info["compile_cache_dir"]
    lines.append(f"  compile cache dir  {c['value'] or 'unset'} ({c['option']}: {c['source']})")
    cpu = info["cpu"]
    lines.append(f"  cpu                {cpu['model']}")
    lines.append(f"    ISA              torch {cpu['torch_capability']}; host executor SIMD {cpu['host_simd_target']}; "
                 f"oneDNN {cpu['onednn_version']} {cpu['onednn_isa']}")
    th = info["threads"]
    lines.append(f"  threads            host executor {th['host_executor']}, torch intra-op {th['torch_intra_op']}, "
                 f"inter-op {th['torch_inter_op']}; {th['cpu_count']} CPUs ({th['affinity']} usable)")
    return "\n".join(lines)
