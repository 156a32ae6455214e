#!/usr/bin/env bash
# The C++ core (no torch) under sanitizers, built with clang (scripts/lib/clang_core.sh):
#   address: ASan + UBSan (build/sanitize-address): every core test;
#   thread:  TSan (build/sanitize-thread): the tests of the threaded pieces -- the device queue
#            (its failed-buffer, cancellation and stream-ordered-free tests included),
#            the thread pool, the option registry, the allocator. Not the kernels' tests: oneDNN
#            runs on libgomp's OpenMP threads, whose synchronization TSan cannot see.
# Any report fails the run (the sanitizers halt on the first error).
#   bash scripts/sanitize.sh             both
#   bash scripts/sanitize.sh thread      one of them (address | thread)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib/clang_core.sh
source scripts/lib/clang_core.sh

TSAN_TESTS='QueueTest.*:FailedBufferTest.*:StreamOrderedFreeTest.*:ThreadPoolTest.*:OptionsTest.*:AllocatorTest.*:BufferTest.*:MetricsTest.*'

run_address() {
  local dir=build/sanitize-address
  # TPU_FUZZ: the same build serves scripts/fuzz.sh (coverage instrumentation only, here).
  tpu_clang_configure "$dir" address,undefined -DTPU_FUZZ=ON
  cmake --build "$dir" --target tpu_core_tests
  "$dir/tpu_core_tests" --gtest_brief=1
}

run_thread() {
  local dir=build/sanitize-thread
  tpu_clang_configure "$dir" thread
  cmake --build "$dir" --target tpu_core_tests
  "$dir/tpu_core_tests" --gtest_brief=1 --gtest_filter="$TSAN_TESTS"
}

kinds=("$@")
[[ ${#kinds[@]} -gt 0 ]] || kinds=(address thread)
tpu_apt_install sanitize "${TPU_CLANG_PACKAGES[@]}"
for k in "${kinds[@]}"; do
  case $k in
    address|thread) ;;
    *) echo "[sanitize] unknown sanitizer '$k' (address | thread)"; exit 2 ;;
  esac
  start=$SECONDS
  echo "[sanitize] === $k"
  "run_$k"
  echo "[sanitize] $k: ok ($((SECONDS - start))s)"
done
