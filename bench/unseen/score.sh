#!/usr/bin/env bash
# Score a folder of unseen traces with zflow, several at a time: for each trace,
# `discover --check` (bf16 and f16 with --precision) under a time limit, one line each:
#   <trace> rc=<exit> <seconds>s <the check's summary line>
# usage: bench/unseen/score.sh ZFLOW DIR [JOBS [SECONDS]]   (defaults: 2 jobs, 300 s)
# The pass limits (f32 1e-5; bf16 the reference's own bf16-vs-f32 distance) are
# conformance.py's; this prints the figures, it does not judge them.
set -u
zflow=$(realpath "$1"); dir=$2; jobs=${3:-2}; limit=${4:-300}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
one() {
  t=$1; n=$(basename "$t" .npz); extra=()
  case $n in *-f32) ;; *) extra=(--precision) ;; esac
  start=$(date +%s)
  timeout -k 5 "$limit" "$zflow" discover --trace "$t" --check "${extra[@]}" -o "$work/$n.json" >"$work/$n.log" 2>&1
  rc=$?
  line=$(grep -E 'complete|to rel-RMS' "$work/$n.log" | tail -1)
  [ -n "$line" ] || line=$(tail -1 "$work/$n.log")
  printf '%-40s rc=%d %4ds %s\n' "$n" "$rc" "$(( $(date +%s) - start ))" "$line"
}
export -f one; export zflow work limit
ls "$dir"/*.npz | xargs -P "$jobs" -I{} bash -c 'one {}'
