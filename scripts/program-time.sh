#!/usr/bin/env bash
# Program search time on the shared f32 traces: two zflow binaries
# alternated, ROUNDS rounds, total seconds each (a ratio, not a verdict).
# usage: scripts/program-time.sh OLD_BIN NEW_BIN [ROUNDS]
set -euo pipefail
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ] || ! [[ ${3:-2} =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/program-time.sh OLD_BIN NEW_BIN [ROUNDS]: two zflow executables, ROUNDS ≥ 1" >&2
  exit 2
fi
old=$1 new=$2 rounds=${3:-2}
dir="$(dirname "$0")/../../shared/conformance"
[ -d "$dir" ] || { echo "program-time: $dir is not there" >&2; exit 2; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  for b in "$old" "$new"; do
    s=$(date +%s.%N)
    for t in "$dir"/*-f32.npz; do "$b" discover --engine program --trace "$t" -o "$out/doc.json" --quiet >/dev/null 2>&1 || true; done
    echo "$b round $r: $(echo "$(date +%s.%N) - $s" | bc) s"
  done
done
