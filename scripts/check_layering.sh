#!/usr/bin/env bash
# Fails if a core layer includes a layer above it (see docs / ARCHITECTURE "Layers").
#   csrc/base      -> base only
#   csrc/ir        -> base, ir
#   csrc/runtime   -> base, ir, runtime            (runtime/host included)
#   csrc/compiler  -> base, ir, runtime, compiler
# and none of them may include torch/, ATen/, c10/, pybind11/ or Python.h: only csrc/torch does.
# Tests (*_test.cc, *test_util*) may use higher core layers (e.g. compile a graph to test the
# executor), but never torch.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

torch_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](torch/|ATen/|c10/|pybind11/|Python\.h)'
status=0

check() {  # check <dir> <regex> <what> [tests-exempt]
  local dir=$1 re=$2 what=$3 exempt=${4:-} hits
  [[ -d $dir ]] || return 0
  local excl=()
  [[ -n $exempt ]] && excl=(--exclude='*_test.cc' --exclude='*test_util*')
  hits=$(grep -rnE --include='*.h' --include='*.hpp' --include='*.cc' --include='*.cpp' \
         --include='*.def' --include='*.inc' "${excl[@]}" "$re" "$dir" || true)
  if [[ -n $hits ]]; then
    echo "layering: $dir must not include $what:"
    echo "$hits" | sed 's/^/  /'
    status=1
  fi
}

for d in csrc/base csrc/ir csrc/compiler csrc/runtime; do
  check "$d" "$torch_re" "torch/ATen/c10/pybind11/Python headers"
done
check csrc/base    '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(ir|compiler|runtime)/' "ir/, compiler/ or runtime/" tests-exempt
check csrc/ir      '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(compiler|runtime)/' "compiler/ or runtime/" tests-exempt
check csrc/runtime '^[[:space:]]*#[[:space:]]*include[[:space:]]*"compiler/' "compiler/" tests-exempt

if [[ $status -eq 0 ]]; then
  echo "layering: ok"
fi
exit $status
