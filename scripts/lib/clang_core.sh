# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: clang builds of the C++ core (no torch).
#
# clang-19 (Debian bookworm ships it beside its default clang-14): clang-14 has no _Float16 on
# x86-64, which the kernels use. Warnings are not errors here (clang-19 warns inside bookworm's
# libstdc++ 12 headers); the gcc build of scripts/test.sh holds the -Werror line.

# shellcheck source=scripts/lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

TPU_CLANG_CXX=clang++-19
TPU_CLANG_PACKAGES=(clang-19 libclang-rt-19-dev binutils cmake ninja-build ccache libdnnl-dev
                    libhwy-dev libgtest-dev pkg-config)

# Reports name file:line: the sanitizers drive binutils' addr2line (no llvm-symbolizer needed).
_tpu_symbolizer="external_symbolizer_path=$(command -v addr2line || echo /usr/bin/addr2line)"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:$_tpu_symbolizer${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:$_tpu_symbolizer${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:$_tpu_symbolizer${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

# tpu_clang_configure DIR SANITIZERS [CMAKE ARGS...]: configures a sanitized core build in DIR.
tpu_clang_configure() {
  local dir=$1 sanitize=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja --log-level=WARNING -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$TPU_CLANG_CXX" -DTPU_BUILD_TORCH=OFF -DTPU_BUILD_TESTS=ON \
    -DTPU_WERROR=OFF -DTPU_SANITIZE="$sanitize" "$@"
}
