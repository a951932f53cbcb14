#!/usr/bin/env bash
# Issue 15, item 4: a whole-model figure. `zflow generate --backend cuda` on
# the wide fixture's DiT at real width (hidden 3072, 24 heads of 128, 4096
# image + 512 text rows; 2 blocks, 4 Euler steps, bf16, random weights)
# against the same model in PyTorch eager (bench/model_torch.py), per step.
# No Go is needed on the GPU machine: build first, beside the sources (the
# git-ignored .device/ travels with the tree):
#
#   CGO_ENABLED=0 go build -o .device/zflow ./cmd/zflow
#   CGO_ENABLED=0 go build -o .device/gen ./fixtures/gen
#   bash bench/model_gpu.sh          # on the GPU machine, from the repo root
#
# Steps: gen writes the trace to $TRACE_DIR (default /tmp; ~11 GB at real
# width), computed on $GEN_BACKEND (default $BACKEND; the cpu if that fails), `zflow discover --precision` reads its semantics and rounding plan
# from it, `zflow generate --timings` runs the request (each step's wall time,
# the backend synchronised), then model_torch.py runs the same steps and
# prints the table and the outputs' agreement. The trace and the document are
# kept in $TRACE_DIR and reused: a second call after one that ran out of time
# goes on where it stopped. Logs and small results go to $OUT (default
# ./gpu-out; every file there is under 1 MB but the document, a few MB).
#
# Knobs: WIDE_SCALE (1; 2, 4, 8 divide the width), WIDE_BLOCKS (2),
# WIDE_STEPS (4), PRECISION (1: discover --precision; 0: the placeholder
# plan). A dry run without a GPU: BACKEND=cpu TORCH_DEVICE=cpu
# PYTHON=/usr/bin/python3 WIDE_SCALE=8 bash bench/model_gpu.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
SCALE=${WIDE_SCALE:-1} BLOCKS=${WIDE_BLOCKS:-2} STEPS=${WIDE_STEPS:-4}
BACKEND=${BACKEND:-cuda} TORCH_DEVICE=${TORCH_DEVICE:-cuda} PY=${PYTHON:-python3}
DIR=${TRACE_DIR:-/tmp}
Z=.device/zflow G=.device/gen
name=zflow-model-s$SCALE-b$BLOCKS-t$STEPS
W=$DIR/$name.npz DOC=$DIR/$name.json
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for f in $Z $G; do
  [ -x $f ] || { echo "model_gpu: $f missing: build it first (see the head of $0)"; exit 2; }
done
[ "$BACKEND" = cuda ] && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv

echo "== trace: $W"
gen() {
  /usr/bin/time -f "gen on $1: wall %e s, peak RSS %M KB" $G -wide "$W" -wide-scale "$SCALE" -wide-blocks "$BLOCKS" -wide-steps "$STEPS" -wide-bf16 -wide-backend "$1" 2>&1
}
if [ ! -f "$W" ]; then
  gb=${GEN_BACKEND:-$BACKEND}
  gen "$gb" || { [ "$gb" != cpu ] && echo "model_gpu: gen on $gb failed; computing the trace on the cpu instead" && gen cpu; } ||
    { echo "model_gpu: gen failed"; exit 1; }
fi
ls -l "$W"

echo "== discover --backend $BACKEND${PRECISION:+ (PRECISION=$PRECISION)}"
if [ ! -f "$DOC" ]; then
  p=--precision
  [ "${PRECISION:-1}" = 0 ] && p=
  /usr/bin/time -o "$OUT/discover.time" -f "%e %M" $Z discover --trace "$W" --backend "$BACKEND" $p -o "$DOC" > "$OUT/discover.table" 2> "$OUT/discover.log"
  rc=$?
  echo "discover: exit $rc, $(awk '{printf "wall %.2f s, peak RSS %.0f MiB", $1, $2/1024}' "$OUT/discover.time")"
  grep -hE "^discover: (precision|self-check) |zflow:" "$OUT/discover.log" | sed 's/^/  /'
  grep -hE "^precision:|^(complete|incomplete)" "$OUT/discover.table" | sed 's/^/  /'
  [ $rc = 0 ] || { rm -f "$DOC"; exit 1; }
else
  echo "reusing $DOC"
fi
cp "$DOC" "$OUT/model.json"

echo "== generate --backend $BACKEND --timings"
/usr/bin/time -o "$OUT/generate.time" -f "%e %M" $Z generate --semantics "$DOC" --inputs "$W" -o "$OUT/zflow-latents.npz" \
  --backend "$BACKEND" --timings "$OUT/zflow-timings.json" > "$OUT/generate.out" 2> "$OUT/generate.log"
rc=$?
cat "$OUT/generate.out"
grep -E "^generate: step |zflow:" "$OUT/generate.log"
echo "generate: exit $rc, $(awk '{printf "wall %.2f s, peak RSS %.0f MiB", $1, $2/1024}' "$OUT/generate.time")"
[ $rc = 0 ] || exit 1

echo "== torch eager ($TORCH_DEVICE)"
PYTHONUNBUFFERED=1 $PY bench/model_torch.py --trace "$W" --device "$TORCH_DEVICE" --ours "$OUT/zflow-latents.npz" \
  --ours-timings "$OUT/zflow-timings.json" --json "$OUT/torch.json" 2>&1 | tee "$OUT/torch.log"
