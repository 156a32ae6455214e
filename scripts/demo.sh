#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the demo: bash scripts/demo.sh [ARGS...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ ! -f examples/demo.py ]]; then
  echo "demo: examples/demo.py does not exist in $(pwd): nothing to run" >&2
  exit 1
fi
# shellcheck source=scripts/setup.sh
source scripts/setup.sh || { echo "[demo] setup failed" >&2; exit 1; }
exec "$TORCH_TPU_VENV/bin/python" examples/demo.py "$@"
