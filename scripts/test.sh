#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs every check; exits non-zero if any fails.
#   1. layering check (scripts/check_layering.sh)
#   2. C++ core tests: GoogleTest binary built in build/core-tests, without torch, -Werror; the
#      PJRT backend's run against the installed XLA CPU plugin
#   3. sanitizers: the core tests under ASan+UBSan, the threaded pieces' under TSan
#      (scripts/sanitize.sh, clang)
#   4. fuzzing: every libFuzzer target for 20 s (scripts/fuzz.sh, on the ASan build of 3)
#   5. Python tests: python -m pytest tests/python -q [ARGS...]
#   6. Python tests again on the pjrt backend (XLA's CPU plugin), strict mode, a subset
#      (PJRT_PYTEST_FILES); skipped with a message when no PJRT plugin is installed
# Arguments are passed to pytest:  scripts/test.sh -k matmul -x
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

# shellcheck source=scripts/setup.sh
source scripts/setup.sh || { echo "[test] setup failed"; exit 1; }
py="$TORCH_TPU_VENV/bin/python"

results=()
failed=0
run_stage() {  # run_stage NAME FUNCTION [ARGS...]
  local name=$1 start=$SECONDS
  shift
  echo "[test] === $name"
  if "$@"; then
    results+=("$name: ok ($((SECONDS - start))s)")
  else
    results+=("$name: FAILED ($((SECONDS - start))s)")
    failed=1
  fi
}

layering() {
  bash scripts/check_layering.sh
}

core_tests() {
  local dirs=(csrc/base csrc/ir csrc/compiler csrc/runtime) existing=() d
  for d in "${dirs[@]}"; do [[ -d $d ]] && existing+=("$d"); done
  if [[ ${#existing[@]} -eq 0 ]] ||
     [[ -z "$(find "${existing[@]}" -name '*_test.cc' -print -quit)" ]]; then
    echo "core-tests: no C++ test sources found (csrc/{base,ir,compiler,runtime}/**/*_test.cc)"
    return 1
  fi
  local bdir=build/core-tests
  # The venv's Python finds pjrt_c_api.h (package xla-cpu-pjrt) for the PJRT backend.
  cmake -S . -B "$bdir" -G Ninja --log-level=WARNING -DCMAKE_BUILD_TYPE=Release \
    -DTPU_BUILD_TORCH=OFF -DTPU_BUILD_TESTS=ON -DTPU_WERROR=ON -DPython3_EXECUTABLE="$py" || return 1
  cmake --build "$bdir" --target tpu_core_tests || return 1
  # The PJRT tests run on the installed plugins (XLA's CPU plugin; libtpu only for the no-TPU
  # check); without one they skip.
  local candidates
  candidates="${TORCH_TPU_PJRT_PLUGIN_CANDIDATES-$("$py" torch_tpu/_backend.py)}"
  echo "core-tests: PJRT plugins: ${TORCH_TPU_PJRT_PLUGIN:-${candidates:-none}}"
  TORCH_TPU_PJRT_PLUGIN_CANDIDATES="$candidates" "$bdir/tpu_core_tests" --gtest_brief=1 || return 1
  # Again without AVX-512, where oneDNN has no bf16/f16 matmul or convolution kernels.
  ONEDNN_MAX_CPU_ISA=AVX2 "$bdir/tpu_core_tests" --gtest_brief=1 --gtest_filter='Dot*:Conv*' || return 1
}

sanitizers() {
  bash scripts/sanitize.sh
}

fuzzing() {
  bash scripts/fuzz.sh 20
}

python_tests() {
  local rc=0
  timeout 75m "$py" -m pytest tests/python -q "$@" || rc=$?
  if [[ $rc -eq 5 ]]; then
    echo "pytest: no tests were collected (exit 5): treated as a failure"
  fi
  return $rc
}

# The pjrt pass: op families and the training tests, strict mode only (TORCH_TPU_TEST_MODES), on
# the plugin the backend chooses (README "PJRT backend"; XLA's CPU plugin here). Measured file by
# file on this project's 2-core machine at load 13-16: 1100 s of wall time in all (1087 tests,
# about 420 s of CPU time by the wall/CPU ratio of 2.4-2.9 measured on these runs), so roughly
# 7 minutes on a quiet 2-core machine; run whole at load 5-8: 1086 passed, 1 xfailed in 515 s.
# The example models and the Hugging Face tests (the second line) took 440 s more at load ~7
# (59 passed, 1 xfailed); ResNet-50's float64 step (67 s there) is left to the host pass, its
# float32 step and every ResNet-18 test run here.
PJRT_PYTEST_FILES=(
  test_activation.py test_unary.py test_shape.py test_matmul.py test_nn.py test_pooling_norm.py
  test_indexing.py test_index_ops.py test_sort.py test_foreach.py test_training.py test_fused_optim.py
  opinfo/test_opinfo.py
  test_hf.py test_hf_trainer.py test_llama.py test_resnet.py test_dlrm.py test_ddpm.py test_data.py
  test_fused.py test_check_op.py test_error_delivery.py test_compile_bounded.py
)
PJRT_PYTEST_DESELECT=(
  "tests/python/test_resnet.py::test_steps_from_the_same_state_match_cpu[strict-resnet50-float64]"
)
python_tests_pjrt() {
  local candidates
  candidates="${TORCH_TPU_PJRT_PLUGIN_CANDIDATES-$("$py" torch_tpu/_backend.py)}"
  if [[ -z "${TORCH_TPU_PJRT_PLUGIN:-}" && -z "$candidates" ]]; then
    echo "pytest-pjrt: SKIPPED: no PJRT plugin installed (scripts/setup.sh installs XLA's CPU plugin)"
    return 0
  fi
  echo "pytest-pjrt: plugin: ${TORCH_TPU_PJRT_PLUGIN:-the first of $candidates (libtpu only where a TPU is present)}"
  local files=("${PJRT_PYTEST_FILES[@]/#/tests/python/}") rc=0
  TORCH_TPU_BACKEND=pjrt TORCH_TPU_TEST_MODES=strict TORCH_TPU_PJRT_PLUGIN_CANDIDATES="$candidates" \
    timeout 40m "$py" -m pytest "${files[@]}" "${PJRT_PYTEST_DESELECT[@]/#/--deselect=}" -q "$@" || rc=$?
  if [[ $rc -eq 5 && $# -gt 0 ]]; then  # the arguments (-k ...) selected nothing in the subset
    echo "pytest-pjrt: the arguments select no test of the subset"
    return 0
  fi
  return $rc
}

run_stage layering layering
run_stage core-tests core_tests
run_stage sanitize sanitizers
run_stage fuzz fuzzing
run_stage pytest python_tests "$@"
run_stage pytest-pjrt python_tests_pjrt "$@"

echo "[test] summary:"
printf '[test]   %s\n' "${results[@]}"
exit $failed
