#!/usr/bin/env bash
# The Go tests over the shared traces (TestShared*, in search/synth and
# cmd/zflow: too slow for make test's 10 minutes, so they skip there unless
# ZFLOW_CONFORMANCE is set), then the end-to-end conformance table over
# ../shared/conformance (every shared model, both precisions, truth factors;
# ../shared/tools/conformance.py), printed whole, and a regression gate:
# every model named in scripts/conformance-passing.txt must PASS and no
# factor may be wrong and decisive. Skips when ../shared is absent (a fresh
# clone).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
PY=${PYTHON:-/usr/bin/python3}
tool=../shared/tools/conformance.py
if [ ! -f "$tool" ] || [ ! -d ../shared/conformance ]; then
  echo "conformance: SKIPPED (../shared/conformance is not beside this checkout)"
  exit 0
fi
fail=0
echo "conformance: go tests over the shared traces (TestShared*)"
if ! ZFLOW_CONFORMANCE=1 "$GO" test -timeout 20m -run '^TestShared' ./search/synth/ ./cmd/zflow/; then
  echo "conformance: a TestShared* go test failed" >&2
  fail=1
fi
if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
  echo "conformance: table SKIPPED ($PY lacks numpy; .ci/run installs it)"
  exit $fail
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$PY" "$tool" bin/zflow | tee "$out" || true
while read -r model; do
  [ -z "$model" ] || [ "${model#\#}" != "$model" ] && continue
  if ! grep -q "^$model  *PASS " "$out"; then
    echo "conformance: $model no longer passes" >&2
    fail=1
  fi
done < scripts/conformance-passing.txt
if grep -q " [1-9][0-9]* wrong" "$out"; then
  echo "conformance: a factor is wrong and decisive" >&2
  fail=1
fi
exit $fail
