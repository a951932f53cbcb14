#!/usr/bin/env bash
# Run on a CUDA machine from the repo root with a CGO_ENABLED=0 build at .device/zflow
# and the conformance traces copied to .device/conf/ (../shared does not travel).
# discover (with --precision and --check) on every conformance trace with
# the cpu and the cuda backend; compare the documents' factors and rules.
set -u
Z=.device/zflow
for m in flux qwenimage llama; do for d in f32 bf16; do
  ref=.device/conf/$m-$d.npz
  for b in cpu cuda; do
    /usr/bin/time -f "$m-$d $b: wall %e s" $Z discover --trace $ref --backend $b --precision --check -o $OUT/$m-$d-$b.json 2>&1 | grep -E "check|rel|wall|error|zflow:" | head -4
  done
  python3 - $OUT/$m-$d-cpu.json $OUT/$m-$d-cuda.json <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
fa = {(f["name"], f["scope"]): f["value"] for f in a["factors"]}
fb = {(f["name"], f["scope"]): f["value"] for f in b["factors"]}
diff = [k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)]
ra, rb = a["precision"].get("rules"), b["precision"].get("rules")
print(f"  factors: {len(fa)} cpu, {len(fb)} cuda, {len(diff)} differ {sorted(diff)[:5]}; structure equal: {a['structure'] == b['structure']}; precision rules equal: {ra == rb}")
PY
done; done
