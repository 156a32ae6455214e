#!/usr/bin/env bash
# Compiles the core (base, ir, compiler, runtime, runtime/host) for aarch64, syntax and templates
# only, to catch x86-only code (intrinsics, builtins, _Float16) before an ARM build does. Needs
# Debian's cross compiler: apt-get install g++-aarch64-linux-gnu (not part of scripts/test.sh).
# The headers of Highway, oneDNN and OpenBLAS are the host's (architecture-neutral, or only
# configuration defines), found after the cross toolchain's own.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cxx=${CXX_AARCH64:-aarch64-linux-gnu-g++}
command -v "$cxx" >/dev/null || { echo "check_arm: $cxx not found (apt-get install g++-aarch64-linux-gnu)"; exit 2; }
failed=0
for f in csrc/base/*.cc csrc/ir/*.cc csrc/compiler/*.cc csrc/compiler/passes/*.cc csrc/runtime/*.cc csrc/runtime/host/*.cc; do
  [[ $f == *_test.cc ]] && continue
  if ! out=$("$cxx" -std=c++17 -O1 -fsyntax-only -Icsrc -idirafter /usr/include \
      -idirafter /usr/include/x86_64-linux-gnu "$f" 2>&1); then
    echo "check_arm: $f does not compile for aarch64:"
    echo "$out" | grep -m5 error
    failed=1
  fi
done
[[ $failed == 0 ]] && echo "check_arm: every core source compiles for aarch64"
exit $failed
