#!/usr/bin/env bash
# Sets up everything torch_tpu needs to build, test and run, and (re)builds it. Idempotent and
# fast when nothing changed.
#
#   bash scripts/setup.sh        set up / rebuild
#   source scripts/setup.sh      the same, then activates the venv in this shell
#
# 1. Debian packages (apt), installed only when missing;
# 2. a venv outside the repo, reused between runs and recreated when broken:
#    $TORCH_TPU_VENV (default ~/.cache/torch_tpu/venv, i.e. /root/.cache/torch_tpu/venv as root);
# 3. Python packages in it (torch pinned to 2.13.0, the CPU build; the PJRT plugins and header
#    with --no-deps), installed only when missing; torchtitan and its imports with --no-deps in
#    $TORCH_TPU_TITAN_DIR (default ~/.cache/torch_tpu/titan), outside the venv;
# 4. `pip install --no-build-isolation -e .`: the C++ extension is built by CMake+Ninja in build/
#    (incremental, ccache) and lands in ./torch_tpu/.
# Set TORCH_TPU_SKIP_BUILD=1 to skip step 4.

_tpu_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TORCH_TPU_VENV="${TORCH_TPU_VENV:-${HOME:-/root}/.cache/torch_tpu/venv}"

_TPU_APT_PACKAGES=(g++ cmake ninja-build ccache libdnnl-dev libhwy-dev libgtest-dev libopenblas-dev pkg-config)
# Debian's own python3 needs these for venvs and extension builds (a pyenv Python has them).
if ! "${TORCH_TPU_BASE_PYTHON:-python3}" -c 'import ensurepip, sysconfig, os; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
  _TPU_APT_PACKAGES+=(python3 python3-venv python3-dev)
fi
# name, and how pip is asked for it when it is missing
_TPU_PY_PACKAGES=(
  "torch==2.13.0"
  "numpy" "pytest" "jax==0.10.2" "jaxlib==0.10.2" "expecttest" "hypothesis" "tqdm" "matplotlib"
  "transformers"  # tests/python/test_hf.py (tiny random configs, nothing downloaded)
  "diffusers==0.42.1"  # tests/python/test_diffusers.py (a tiny random UNet2DModel, nothing downloaded)
  "accelerate==1.15.0"  # the HF Trainer needs it; tests/python/test_hf_trainer.py (installs beside torch 2.13.0)
  "setuptools>=70.1"
)
# The pjrt backend's packages (README "PJRT backend"), installed with --no-deps: each declares a
# jax pin we do not need (nothing here imports jax). pjrt_c_api.h comes from xla-cpu-pjrt.
_TPU_PY_NODEPS_PACKAGES=(
  "lammps-jax-pjrt-cpu==0.11.2"  # XLA's CPU PJRT plugin (PJRT C API 0.115): the CI plugin
  "xla-cpu-pjrt==0.0.1"          # pjrt_c_api.h (API 0.81) and an older CPU plugin
  "libtpu==0.0.52"               # the TPU plugin; loaded only where a TPU is present (or forced)
)

# torchtitan (tests/python/distributed/test_torchtitan.py, README "torchtitan"): installed with
# --no-deps into a directory of its own, outside the venv (its requirements pin jax/torch ranges
# and pull in packages nothing else here uses); the runs put it on PYTHONPATH. These are the
# imports torchtitan's trainer needs for the debug models; wandb, einops and torch_checkpointing
# are not imported on these runs, and tokenizers, safetensors and pillow are in the venv.
export TORCH_TPU_TITAN_DIR="${TORCH_TPU_TITAN_DIR:-${HOME:-/root}/.cache/torch_tpu/titan}"
_TPU_TITAN_PACKAGES=(
  torchtitan==0.3.0 spmd_types==0.2.3 torchdata==0.11.0 tyro==1.0.17 docstring-parser==0.18.0
  typeguard==4.6.1 tensorboard==2.21.0 protobuf==7.36.2 absl-py==2.5.1 datasets==4.7.0 pandas==3.1.1
  pyarrow==26.0.1 dill==0.4.0 multiprocess==0.70.18 xxhash==4.1.0 httpx==0.29.0 httpcore==1.0.9
)

_tpu_log() { echo "[setup] $*"; }

# shellcheck source=scripts/lib/apt.sh
source "$_tpu_root/scripts/lib/apt.sh"
_tpu_apt() { tpu_apt_install setup "${_TPU_APT_PACKAGES[@]}"; }

_tpu_venv() {
  local py="$TORCH_TPU_VENV/bin/python"
  if [[ -x $py ]] && "$py" -c 'import sys, pip; assert sys.version_info >= (3, 10)' 2>/dev/null; then
    _tpu_log "venv: $TORCH_TPU_VENV (reused)"
    return 0
  fi
  local base="${TORCH_TPU_BASE_PYTHON:-python3}"
  if [[ -e $TORCH_TPU_VENV ]]; then
    _tpu_log "venv: $TORCH_TPU_VENV is broken, recreating it"
    rm -rf "$TORCH_TPU_VENV"
  fi
  "$base" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' ||
    { _tpu_log "error: $base is older than Python 3.10"; return 1; }
  mkdir -p "$(dirname "$TORCH_TPU_VENV")"
  "$base" -m venv "$TORCH_TPU_VENV"
  _tpu_log "venv: $TORCH_TPU_VENV (created with $("$base" --version 2>&1))"
}

_tpu_pip_deps() {  # _tpu_pip_deps WHAT [PIP OPTIONS...] -- REQUIREMENT...
  local py="$TORCH_TPU_VENV/bin/python" missing what=$1 opts=()
  shift
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  # Prints the requirements that are not satisfied, one per line (a quick check, no pip run).
  missing=$("$py" - "$@" <<'PYEOF'
import importlib.metadata as md, re, sys

def version_tuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])

for req in sys.argv[1:]:
    name, op, want = re.match(r"([A-Za-z0-9_.-]+)(==|>=)?(.*)", req).groups()
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        print(req); continue
    if op == "==" and have.split("+")[0] != want:
        print(req)
    elif op == ">=" and version_tuple(have) < version_tuple(want):
        print(req)
PYEOF
  ) || return 1
  if [[ -z $missing ]]; then
    _tpu_log "$what: ok"
    return 0
  fi
  _tpu_log "$what: installing $(echo $missing)"
  local log
  log="$(mktemp)"
  # shellcheck disable=SC2086
  if ! "$py" -m pip install --disable-pip-version-check "${opts[@]}" $missing >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    _tpu_log "error: pip install failed (log above)"
    return 1
  fi
  rm -f "$log"
  _tpu_log "$what: installed"
}

_tpu_python_packages() {
  local py="$TORCH_TPU_VENV/bin/python"
  _tpu_pip_deps "python packages" -- "${_TPU_PY_PACKAGES[@]}" || return 1
  local pjrt=("${_TPU_PY_NODEPS_PACKAGES[@]}")
  # libtpu's wheels are for Python 3.11 and later.
  if ! "$py" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    pjrt=("${pjrt[@]/libtpu==*/}")
    _tpu_log "pjrt packages: libtpu skipped (it needs Python 3.11 or later)"
  fi
  _tpu_pip_deps "pjrt packages" --no-deps -- ${pjrt[@]} || return 1
  _tpu_log "torch: $("$py" -c 'import importlib.metadata as m; print(m.version("torch"))')"
}

_tpu_titan() {
  local stamp="$TORCH_TPU_TITAN_DIR/.torch_tpu_packages" want="${_TPU_TITAN_PACKAGES[*]}"
  if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
    _tpu_log "torchtitan: ok ($TORCH_TPU_TITAN_DIR)"
    return 0
  fi
  _tpu_log "torchtitan: installing into $TORCH_TPU_TITAN_DIR"
  local log
  log="$(mktemp)"
  rm -rf "$TORCH_TPU_TITAN_DIR"
  if ! "$TORCH_TPU_VENV/bin/python" -m pip install --disable-pip-version-check --no-deps \
      --target "$TORCH_TPU_TITAN_DIR" "${_TPU_TITAN_PACKAGES[@]}" >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    _tpu_log "error: pip install of torchtitan failed (log above)"
    return 1
  fi
  rm -f "$log"
  echo "$want" >"$stamp"
  _tpu_log "torchtitan: installed"
}

_tpu_build() {
  if [[ ${TORCH_TPU_SKIP_BUILD:-0} == 1 ]]; then
    _tpu_log "build: skipped (TORCH_TPU_SKIP_BUILD=1)"
    return 0
  fi
  _tpu_log "build: pip install --no-build-isolation -e . (CMake+Ninja in build/, incremental)"
  local start=$SECONDS log
  log="$(mktemp)"
  # Quiet when it works; the whole build log when it does not.
  if ! "$TORCH_TPU_VENV/bin/python" -m pip install --disable-pip-version-check \
      --no-build-isolation -v -e "$_tpu_root" >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    _tpu_log "error: building torch_tpu failed (full log above)"
    return 1
  fi
  rm -f "$log"
  _tpu_log "build: ok ($((SECONDS - start))s)"
}

_tpu_setup_main() {
  set -euo pipefail
  cd "$_tpu_root"
  _tpu_apt
  _tpu_venv
  _tpu_python_packages
  _tpu_titan
  _tpu_build
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  # executed
  _tpu_setup_main
else
  # sourced: do the work in a child bash (its `set -e` stays there and is not disabled by this
  # `if`, as it would be in a subshell), then activate the venv in this shell
  if ! bash "$_tpu_root/scripts/setup.sh"; then
    _tpu_log "error: setup failed"
    return 1
  fi
  export VIRTUAL_ENV="$TORCH_TPU_VENV"
  case ":$PATH:" in
    *":$VIRTUAL_ENV/bin:"*) ;;
    *) export PATH="$VIRTUAL_ENV/bin:$PATH" ;;
  esac
  hash -r 2>/dev/null || true
fi
