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

echo "== program search (search/synth) on the planted constructs, against generating with the program found (same process)"
go test ./search/synth -run '^$' -bench ProgramSearch -benchtime 3x 2>&1 | grep -E '^Benchmark' | awk '{ printf "  %s: %s ms per search, %.1fx the time of one generation of the request\n", $1, $5, $7 }'

# The rounding search (issue 14): `discover --precision` against `discover`
# on the wide fixture's one DiT block at 1/WIDE_SCALE of real width
# (fixtures/wide; 1/4: hidden 768, 6 heads, 1024 + 128 rows, a 222 MB f32
# trace, kept between runs). The search's cost is the difference of the two
# walls (the same discovery and self-check run in both), against the
# discovery's wall; peak RSS against the trace file. Two rounds, alternated.
wide_bench() {
WIDE_SCALE=${WIDE_SCALE:-4}
WIDE="$BENCH_DIR/zflow-bench-wide-$WIDE_SCALE.npz"
echo "== the rounding search against the discovery it follows, wide fixture at 1/$WIDE_SCALE width (issue 14)"
[ -f "$WIDE" ] || go run ./fixtures/gen -wide "$WIDE" -wide-scale "$WIDE_SCALE" > /dev/null
size=$(stat -c %s "$WIDE")
cat "$WIDE" > /dev/null   # both from the page cache
log="$BENCH_DIR/zflow-bench-wide.log" tf="$BENCH_DIR/zflow-bench-wide.time"
for round in 1 2; do
  /usr/bin/time -o "$tf" -f "%e %M" $ZFLOW discover --trace "$WIDE" -o "$BENCH_DIR/zflow-bench-wide.json" > /dev/null 2> "$log"
  d=$(tail -1 "$tf")
  /usr/bin/time -o "$tf" -f "%e %M" $ZFLOW discover --trace "$WIDE" --precision -o "$BENCH_DIR/zflow-bench-wide-precision.json" > /dev/null 2> "$log"
  p=$(tail -1 "$tf")
  line=$(grep -E '^discover: precision ' "$log" || echo "discover: precision ? s")
  awk -v d="$d" -v p="$p" -v s="$size" -v r="$round" -v line="$line" 'BEGIN {
    split(d, D, " "); split(p, P, " "); split(line, L, " ");
    printf "  round %d: discover %.2f s, peak RSS %.0f MiB; discover --precision %.2f s, peak RSS %.0f MiB (its search line: %s)\n", r, D[1], D[2]/1024, P[1], P[2]/1024, L[3];
    printf "  round %d: ratio: the rounding search costs %.2fx the discovery (target <= 2); peak RSS %.2fx the %.0f MB trace file (target <= 2)\n", r, (P[1]-D[1])/D[1], P[2]*1024/s, s/1e6;
  }'
done
}
wide_bench

# zflow diff against NumPy (issue 4): the same per-boundary metrics over a
# pair of 4 GiB bf16 traces (bench/gentrace: a DiT-shaped run and a close
# "port" of it), each tool run once from the page cache. Throughput counts
# the bytes of both traces compared; peak RSS is /usr/bin/time's %M.
# Needs ~8.1 GB free in $BENCH_DIR (the pair is kept between runs; set
# DIFF_BYTES for a smaller pair).
diff_bench() {
DIFF_BYTES=${DIFF_BYTES:-$((4<<30))}
DIFF_DIR="$BENCH_DIR/zflow-bench-diff-$DIFF_BYTES"
echo "== zflow diff vs NumPy on a pair of $(awk -v b="$DIFF_BYTES" 'BEGIN {printf "%.2f GiB", b/2^30}') bf16 traces"
if [ ! -f "$DIFF_DIR/ours.npz" ]; then
  need=$(( 2 * DIFF_BYTES / 1024 + 1048576 ))   # KiB, with 1 GiB to spare
  free=$(df -Pk "$BENCH_DIR" | awk 'NR == 2 {print $4}')
  if [ "$free" -lt "$need" ]; then
    echo "  skipped: $BENCH_DIR has $((free / 1048576)) GiB free, the pair needs $((need / 1048576)) GiB (set BENCH_DIR or DIFF_BYTES)"
    return 0
  fi
  mkdir -p "$DIFF_DIR"
  go run ./bench/gentrace -o "$DIFF_DIR" -bytes "$DIFF_BYTES"
fi
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  echo "  skipped: /usr/bin/python3 has no numpy (apt-get install python3-numpy)"
  return 0
fi
pair=$(( $(stat -c %s "$DIFF_DIR/ours.npz") + $(stat -c %s "$DIFF_DIR/ref.npz") ))
cat "$DIFF_DIR/ours.npz" "$DIFF_DIR/ref.npz" > /dev/null   # both tools read from the page cache
z=$( { /usr/bin/time -f "%e %M %U %S" $ZFLOW diff "$DIFF_DIR/ours.npz" "$DIFF_DIR/ref.npz" --format json > "$DIFF_DIR/zflow.json"; } 2>&1 | tail -1 )
cat "$DIFF_DIR/ours.npz" "$DIFF_DIR/ref.npz" > /dev/null
n=$( { /usr/bin/time -f "%e %M %U %S" /usr/bin/python3 bench/diff_numpy.py "$DIFF_DIR/ours.npz" "$DIFF_DIR/ref.npz" > "$DIFF_DIR/numpy.json"; } 2>&1 | tail -1 )
awk -v z="$z" -v n="$n" -v s="$pair" -v cores="$(nproc)" 'BEGIN {
  split(z, Z, " "); split(n, N, " ");
  printf "  zflow diff (%d cores):       %7.2f s, %5.2f GB/s, peak RSS %7.1f MiB (CPU %.1f s user, %.1f s system)\n", cores, Z[1], s/Z[1]/1e9, Z[2]/1024, Z[3], Z[4];
  printf "  NumPy (bench/diff_numpy.py): %7.2f s, %5.2f GB/s, peak RSS %7.1f MiB (CPU %.1f s user, %.1f s system)\n", N[1], s/N[1]/1e9, N[2]/1024, N[3], N[4];
  printf "  ratio: zflow is %.1fx NumPy'"'"'s throughput at %.1f%% of its peak RSS\n", N[1]/Z[1], 100*Z[2]/N[2];
}'
# Both must have computed the same numbers.
/usr/bin/python3 - "$DIFF_DIR/zflow.json" "$DIFF_DIR/numpy.json" <<'PY'
import json, sys
z, n = (json.load(open(p)) for p in sys.argv[1:])
nb = {b["key"]: b for b in n["boundaries"]}
worst = 0.0
for b in z["boundaries"]:
    m = nb[b["key"]]
    for k in ("max_abs", "mean_abs", "rel_rms", "cosine", "psnr", "exact_fraction"):
        a, c = float(b[k]), float(m[k])
        if a != c:
            worst = max(worst, abs(a - c) / max(abs(c), 1e-300))
    assert b["ulp"]["median"] == m["ulp"]["median"] and b["ulp"]["p99"] == m["ulp"]["p99"] and b["ulp"]["max"] == m["ulp"]["max"], b["key"]
assert len(z["boundaries"]) == len(n["boundaries"])
print(f"  agreement: {len(z['boundaries'])} boundaries, ULP quantiles equal, largest relative difference {worst:.1e}")
PY
}

echo "== reports: the diff kernel against the Accumulator (4M bf16 pairs, one core)"
out=$(go test ./reports -run '^$' -bench 'KernelBF16Bits|AccumulatorBF16' -benchtime 10x 2>&1 | grep -E '^Benchmark')
echo "$out"
echo "$out" | awk '{ name=$1; sub(/-[0-9]+$/, "", name); ns[name]=$3 }
  END { if (("BenchmarkKernelBF16Bits" in ns) && ("BenchmarkAccumulatorBF16" in ns))
    printf "  %.1f ns per element against %.1f: %.1fx faster\n", ns["BenchmarkKernelBF16Bits"]/4194304, ns["BenchmarkAccumulatorBF16"]/4194304, ns["BenchmarkAccumulatorBF16"]/ns["BenchmarkKernelBF16Bits"] }'
diff_bench
