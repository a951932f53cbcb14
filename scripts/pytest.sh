#!/usr/bin/env bash
# Runs the capture package's tests with the interpreter that has torch
# (Debian's /usr/bin/python3 by default: the python3 first on PATH may lack
# it). Reports the suite as skipped, not passed, when torch is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch, numpy, pytest' >/dev/null 2>&1; then
  echo "capture tests: SKIPPED ($PY lacks torch, numpy or pytest; .ci/run installs them)"
  exit 0
fi
exec "$PY" -m pytest capture/tests -q
