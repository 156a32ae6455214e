#!/usr/bin/env bash
# The model benchmark (benchmarks/bench_models.py) on an NVIDIA GPU through the pjrt backend.
#
#   bash benchmarks/bench_pjrt_gpu.sh [bench_models.py arguments, e.g. --quick --only char_gpt]
#
# For a machine with an NVIDIA GPU and its driver, after `bash scripts/setup.sh`. It installs a
# jax CUDA PJRT plugin from PyPI into the venv -- jax-cuda12-plugin[with-cuda] (or cuda13, as the
# driver supports): the PJRT plugin (jax-cudaNN-pjrt, xla_cuda_plugin.so) and NVIDIA's CUDA
# libraries; nothing of jax itself, nothing that touches torch -- then runs the benchmark with
# TORCH_TPU_BACKEND=pjrt and TORCH_TPU_PJRT_PLUGIN pointing at the plugin. Where there is no GPU
# or the plugin does not start, it stops with an error saying so.
#
# Environment: TORCH_TPU_VENV (as scripts/setup.sh), JAX_CUDA=12|13 (default: from the driver's
# CUDA version), JAX_CUDA_PLUGIN_VERSION (default: the newest pip finds for this Python),
# TORCH_TPU_PJRT_CLIENT_OPTIONS (passed to the plugin's client, e.g. preallocate=false).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${TORCH_TPU_VENV:-${HOME:-/root}/.cache/torch_tpu/venv}"
py="$venv/bin/python"

die() {
  echo "bench_pjrt_gpu: $*" >&2
  exit 1
}

command -v nvidia-smi >/dev/null ||
  die "no NVIDIA GPU here: nvidia-smi is not installed (this benchmark needs a machine with an NVIDIA GPU and its driver)"
gpus="$(nvidia-smi -L 2>&1)" || die "no usable NVIDIA GPU: nvidia-smi failed: $gpus"
[[ $gpus == *GPU* ]] || die "nvidia-smi lists no GPU: $gpus"
[[ -x $py ]] || die "no venv at $venv: run bash scripts/setup.sh first"
echo "bench_pjrt_gpu: $gpus"

driver_cuda="$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' | head -1)"
cuda="${JAX_CUDA:-$([[ ${driver_cuda:-12} -ge 13 ]] && echo 13 || echo 12)}"
[[ $cuda == 12 || $cuda == 13 ]] || die "JAX_CUDA must be 12 or 13, not '$cuda'"
pkg="jax-cuda${cuda}-plugin"
has_plugin() { "$py" -c "import importlib.util as u, sys; sys.exit(u.find_spec('jax_plugins.xla_cuda$cuda') is None)" 2>/dev/null; }
if ! has_plugin || [[ -n ${JAX_CUDA_PLUGIN_VERSION:-} ]]; then
  echo "bench_pjrt_gpu: installing ${pkg}[with-cuda]${JAX_CUDA_PLUGIN_VERSION:+==$JAX_CUDA_PLUGIN_VERSION}"
  "$py" -m pip install --disable-pip-version-check -q "${pkg}[with-cuda]${JAX_CUDA_PLUGIN_VERSION:+==$JAX_CUDA_PLUGIN_VERSION}" ||
    die "pip install ${pkg}[with-cuda] failed"
fi

# The plugin, the CUDA libraries' directories (the plugin finds them by soname: jax preloads
# them from Python, we put them on LD_LIBRARY_PATH) and the CUDA compiler tools (ptxas) XLA runs.
paths="$("$py" - "$cuda" <<'PYEOF'
import glob, importlib.util, os, sys


def find(name):
    try:
        return importlib.util.find_spec(name)
    except ImportError:  # a parent package is missing
        return None


spec = find(f"jax_plugins.xla_cuda{sys.argv[1]}")
plugin = os.path.join(list(spec.submodule_search_locations)[0], "xla_cuda_plugin.so") if spec else ""
nvidia = find("nvidia")
roots = list(nvidia.submodule_search_locations) if nvidia else []
libs = sorted({d for r in roots for d in glob.glob(os.path.join(r, "*", "lib"))})
nvcc = next((d for r in roots for d in (os.path.join(r, "cuda_nvcc"), os.path.join(r, "cu13"))
             if os.path.isfile(os.path.join(d, "bin", "ptxas"))), "")
print(plugin)
print(":".join(libs))
print(nvcc)
PYEOF
)"
plugin="$(sed -n 1p <<<"$paths")"
libs="$(sed -n 2p <<<"$paths")"
nvcc="$(sed -n 3p <<<"$paths")"
[[ -f $plugin ]] || die "the CUDA PJRT plugin was not found after installing $pkg (looked for jax_plugins/xla_cuda$cuda/xla_cuda_plugin.so)"
echo "bench_pjrt_gpu: plugin $plugin"

export TORCH_TPU_BACKEND=pjrt
export TORCH_TPU_PJRT_PLUGIN="$plugin"
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -n $nvcc ]]; then
  export PATH="$nvcc/bin:$PATH"
  export XLA_FLAGS="--xla_gpu_cuda_data_dir=$nvcc${XLA_FLAGS:+ $XLA_FLAGS}"
fi

# The backend must start (and say which plugin runs) before the long benchmark.
"$py" - <<'PYEOF' || die "the pjrt backend did not start on the GPU plugin (its error is above)"
import torch
import torch_tpu
props = torch.tpu.get_device_properties(0)
print("bench_pjrt_gpu: device:", props)
assert props.backend == "pjrt", f"the device runs on another backend: {props}"
x = torch.arange(6.0, device="tpu").reshape(2, 3)
assert (x @ x.T).cpu().tolist() == [[5.0, 14.0], [14.0, 50.0]], "a 2x3 matmul came back wrong"
PYEOF

exec "$py" "$root/benchmarks/bench_models.py" "$@"
