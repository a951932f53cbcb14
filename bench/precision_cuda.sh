#!/usr/bin/env bash
# Issue 14's GPU proof: the rounding search at real width. Run on a CUDA
# machine from the repo root with CGO_ENABLED=0 builds made beside the
# sources (they travel with the tree under .device/):
#
#   CGO_ENABLED=0 go build -o .device/zflow ./cmd/zflow
#   CGO_ENABLED=0 go build -o .device/gen ./fixtures/gen
#
# It writes the wide fixture's DiT block at real width (hidden 3072, 24
# heads, 4096 + 512 rows, a 3.5 GB f32 trace; WIDE_SCALE=2 halves it) to
# /tmp, then times `discover` and `discover --precision` (wall, peak RSS)
# with --backend cuda and cpu, and compares the two rounding plans (rules
# and RoPE table formats, evidence left out) and the rows they scored.
set -u
OUT=${OUT:-/tmp}
W=${WIDE:-/tmp/zflow-wide-${WIDE_SCALE:-1}.npz}
Z=.device/zflow
[ -f "$W" ] || /usr/bin/time -f "gen: wall %e s" .device/gen -wide "$W" -wide-scale "${WIDE_SCALE:-1}"
ls -l "$W"
cat "$W" > /dev/null
for b in cuda cpu; do
  for p in "" --precision; do
    name=wide-$b${p:+-precision}
    /usr/bin/time -o "$OUT/$name.time" -f "%e %M" $Z discover --trace "$W" --backend $b $p -o "$OUT/$name.json" > "$OUT/$name.table" 2> "$OUT/$name.log"
    echo "discover --backend $b $p: exit $?, $(tail -1 "$OUT/$name.time" | awk '{printf "wall %.2f s, peak RSS %.0f MiB", $1, $2/1024}')"
    grep -E "^discover: (precision|self-check) |^(complete|incomplete)|zflow:" "$OUT/$name.log" | sed 's/^/  /'
  done
done
python3 - "$OUT/wide-cpu-precision.json" "$OUT/wide-cuda-precision.json" <<'PY'
import json, os, sys
missing = [p for p in sys.argv[1:] if not os.path.exists(p)]
if missing:
    sys.exit(f"no plan to compare: {missing} not written (see the logs beside it)")
a, b = (json.load(open(p))["precision"] for p in sys.argv[1:])
rules = lambda p: [{k: v for k, v in r.items() if k != "evidence"} for r in p.get("rules", [])]
print(f"plans: cpu {len(rules(a))} rules, cuda {len(rules(b))}; rules equal: {rules(a) == rules(b)}; rope_table equal: {a.get('rope_table') == b.get('rope_table')}")
for p, name in ((a, "cpu"), (b, "cuda")):
    sc = p.get("scoring", {})
    sampled = {k: v for k, v in sc.items() if v["rows"] < v["of"]}
    print(f"  {name}: {len(sampled)} of {len(sc)} boundaries scored on sampled rows: {sorted(sampled.items())[:4]}")
    inexact = {k: v for k, v in p.get("exact", {}).items() if v < 1}
    print(f"  {name}: {len(inexact)} boundaries not bit-exact after: {sorted(inexact.items())[:4]}")
for ra, rb in zip(rules(a), rules(b)):
    if ra != rb:
        print("  differ:", ra, rb)
PY
