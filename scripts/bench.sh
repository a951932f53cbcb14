#!/usr/bin/env bash
# make bench: every figure is printed next to a baseline measured in the same
# run, as a ratio. Needs ~2.2 GB free in $BENCH_DIR (default /tmp) for the
# generated 2 GiB trace, which is kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp}
BIG="$BENCH_DIR/zflow-bench-2GiB.npz"
ZFLOW=./bin/zflow

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(go version | cut -d' ' -f3), $(date -u +%F)"

echo "== inspect on a 2 GiB trace of 2,000 tensors (open + manifest + tree; no tensor data)"
[ -f "$BIG" ] || go run ./fixtures/gen -big "$BIG" -big-tensors 2000 -big-bytes $((2<<30))
size=$(stat -c %s "$BIG")
# Baseline: reading the file once, from the page cache (it was just written
# or read), is what any reader that touched the tensor data would pay.
cat "$BIG" > /dev/null
base=$( { /usr/bin/time -f "%e %M" cat "$BIG" > /dev/null; } 2>&1 )
ours=$( { /usr/bin/time -f "%e %M" $ZFLOW inspect --json "$BIG" > /dev/null; } 2>&1 )
awk -v b="$base" -v o="$ours" -v s="$size" 'BEGIN {
  split(b, B, " "); split(o, O, " ");
  printf "  zflow inspect: %.3f s wall, peak RSS %.1f MiB (%.2f%% of the %.2f GiB file)\n", O[1], O[2]/1024, 100*O[2]*1024/s, s/2^30;
  printf "  baseline cat file > /dev/null: %.3f s\n", B[1];
  if (O[1] > 0) printf "  ratio: inspect is %.1fx faster than reading the file once\n", B[1]/O[1]; else print "  ratio: inspect finished below the timer resolution (10 ms)";
}'

echo "== go benchmarks (trace, precision)"
out=$(go test ./trace ./precision -run '^$' -bench . -benchtime 20x 2>&1 | grep -E '^Benchmark')
echo "$out"
echo "$out" | awk '
  { name=$1; sub(/-[0-9]+$/, "", name); ns[name]=$3 }
  END {
    for (n in ns) {
      base = n; sub(/\/[^\/]*$/, "", base)
      if (n ~ /-baseline-copy$/) continue
      b = n "-baseline-copy"
      if (b in ns) printf "  %s: %.3gx the time of a plain copy of the same bytes (%s ns vs %s ns)\n", n, ns[n]/ns[b], ns[n], ns[b]
    }
    if (("BenchmarkOpen/open" in ns) && ("BenchmarkOpen/baseline-readfile" in ns))
      printf "  BenchmarkOpen: opening takes %.2fx the time of reading the 128 MiB file whole\n", ns["BenchmarkOpen/open"]/ns["BenchmarkOpen/baseline-readfile"]
  }'
