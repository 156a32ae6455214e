#!/usr/bin/env bash
# Fails if a core layer includes a layer above it (see README "Architecture"); CMake links each
# layer's library only to those below it, so this check and the link agree.
#   csrc/base          -> base only
#   csrc/ir            -> base, ir
#   csrc/runtime       -> base, ir, runtime        (the interfaces and the shared worker queue)
#   csrc/compiler      -> base, ir, runtime, compiler
#   csrc/runtime/host  -> everything above but runtime/pjrt and backends
#   csrc/runtime/pjrt  -> base, ir, runtime, runtime/pjrt (never the compiler or the host executor)
#   csrc/backends      -> everything above
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

inc='^[[:space:]]*#[[:space:]]*include[[:space:]]*"'
for d in csrc/base csrc/ir csrc/compiler csrc/runtime csrc/backends; do
  check "$d" "$torch_re" "torch/ATen/c10/pybind11/Python headers"
done
check csrc/base     "${inc}(ir|compiler|runtime|backends)/" "ir/, compiler/, runtime/ or backends/" tests-exempt
check csrc/ir       "${inc}(compiler|runtime|backends)/" "compiler/, runtime/ or backends/" tests-exempt
check csrc/compiler "${inc}(runtime/host|runtime/pjrt|backends)/" "a backend (runtime/host/, runtime/pjrt/, backends/)" tests-exempt
check csrc/runtime/host "${inc}(runtime/pjrt|backends)/" "runtime/pjrt/ or backends/" tests-exempt
check csrc/runtime/pjrt "${inc}(compiler|runtime/host|backends)/" "compiler/, runtime/host/ or backends/" tests-exempt
# runtime's own files (not its backends' folders): the interfaces include no layer above them.
hits=$(grep -nE "${inc}(compiler|runtime/host|runtime/pjrt|backends)/" csrc/runtime/*.h csrc/runtime/*.cc 2>/dev/null |
       grep -vE '_test\.cc:' || true)
if [[ -n $hits ]]; then
  echo "layering: csrc/runtime (the interfaces) must not include compiler/, a backend or backends/:"
  echo "$hits" | sed 's/^/  /'
  status=1
fi

if [[ $status -eq 0 ]]; then
  echo "layering: ok"
fi
exit $status
