#!/usr/bin/env bash
# Runs every libFuzzer target (csrc/fuzz/<name>_fuzz.cc) for a bounded time; fails on any crash,
# sanitizer report or broken invariant. The targets are built with clang, ASan+UBSan and coverage
# in build/sanitize-address (the ASan build of scripts/sanitize.sh, configured with TPU_FUZZ=ON).
#
#   bash scripts/fuzz.sh                  every target, 20 s each (what CI runs)
#   bash scripts/fuzz.sh 600              every target, 10 minutes each
#   bash scripts/fuzz.sh 3600 options_fuzz -jobs=2 -workers=2    one target, longer, in parallel
#                                                  (arguments after the target go to libFuzzer)
#
# Seeds: csrc/fuzz/corpus/<target>/ (checked in) and the corpus grown by earlier runs,
# build/fuzz/corpus/<target>/ (kept between runs). A token dictionary csrc/fuzz/<target>.dict is
# used when present. A crashing input is written to build/fuzz/artifacts/<target>/; reproduce it
# with  build/sanitize-address/<target> build/fuzz/artifacts/<target>/crash-...
# A new target is one file: csrc/fuzz/<name>_fuzz.cc defining LLVMFuzzerTestOneInput (plus,
# optionally, its seeds and dictionary); this script and CMake pick it up.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib/clang_core.sh
source scripts/lib/clang_core.sh

seconds=${1:-20}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "[fuzz] usage: scripts/fuzz.sh [SECONDS] [TARGET [LIBFUZZER ARGS...]]"; exit 2; }
shift || true
dir=build/sanitize-address

tpu_apt_install fuzz "${TPU_CLANG_PACKAGES[@]}"
tpu_clang_configure "$dir" address,undefined -DTPU_FUZZ=ON
cmake --build "$dir" --target tpu_fuzz

targets=()
if [[ $# -gt 0 ]]; then
  targets=("$1")
  shift
else
  for src in csrc/fuzz/*_fuzz.cc; do targets+=("$(basename "$src" .cc)"); done
fi

# Leaks are checked by the sanitize stage; a fuzzer stops at the first one, which for intentional
# process-lifetime singletons is noise.
export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
failed=0
for t in "${targets[@]}"; do
  corpus=build/fuzz/corpus/$t artifacts=build/fuzz/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  seeds=()
  [[ -d csrc/fuzz/corpus/$t ]] && seeds=("csrc/fuzz/corpus/$t")
  dict=()
  [[ -f csrc/fuzz/$t.dict ]] && dict=("-dict=csrc/fuzz/$t.dict")
  echo "[fuzz] === $t (${seconds}s)"
  log=build/fuzz/$t.log
  # New inputs go to the first corpus directory (build/); the checked-in seeds are only read.
  if "$dir/$t" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$artifacts/" \
      "${dict[@]}" "$@" "$corpus" "${seeds[@]}" >"$log" 2>&1; then
    echo "[fuzz] $t: ok, $(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$') inputs, 0 crashes"
  else
    tail -40 "$log"
    echo "[fuzz] $t: FAILED (log $log, inputs in $artifacts/)"
    failed=1
  fi
done
exit $failed
