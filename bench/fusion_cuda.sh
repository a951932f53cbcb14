#!/usr/bin/env bash
# Issue 15, item 2's GPU proof: fusion as data. On a CUDA machine, from the
# repo root, with the test binary built beforehand (no Go is needed there)
# into the git-ignored .device/ folder:
#
#   CGO_ENABLED=0 go test -c -o .device/cuda.test ./cuda
#   bash bench/fusion_cuda.sh
#
# 1. The fusion tests: every step kind and chains of them, after a linear
#    (with and without bias, f32 out) and after a norm, in bf16, f16 and
#    f32, fused (one GEMM or norm plus one epilogue kernel) against the
#    unfused route (one kernel a step) on the same device, bit for bit; the
#    auto/off switch; the dit fixture's program through the interpreter
#    fused and unfused, bit for bit.
# 2. Timing at real width (bf16, 4608 rows): [4608,3072]x[3072,12288]+b
#    then gelu_tanh; [4608,3072]x[3072,3072] then a gated residual; a
#    three-step chain; a layer norm then modulate; each route 20 times
#    after a warm-up, device time per run and the ratio fused/unfused
#    (below 1: fusion wins).
#
# Logs go to $OUT (default ./gpu-out). Exit status: the tests'.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -x .device/cuda.test ] || { echo "no .device/cuda.test: build it first (CGO_ENABLED=0 go test -c -o .device/cuda.test ./cuda)"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== fused == unfused, bit for bit"
( cd .device && timeout 480 ./cuda.test -test.v -test.count=1 -test.run 'TestFused|TestFusion' ) > "$OUT/fusion-tests.log" 2>&1
rc=$?
grep -E '^(--- |FAIL|ok|PASS)|fuse_test.go' "$OUT/fusion-tests.log"
echo "tests: exit $rc (log: $OUT/fusion-tests.log)"
if grep -q -- '--- SKIP: TestFusedEqualsUnfused' "$OUT/fusion-tests.log"; then
  echo "the fusion tests skipped: no usable GPU here, nothing is proven"
  rc=1
fi
echo "== timing at real width"
( cd .device && ZFLOW_FUSION_TIMING=1 timeout 300 ./cuda.test -test.v -test.count=1 -test.run 'TestFusionTiming$' ) > "$OUT/fusion-timing.log" 2>&1
trc=$?
grep -E '^fusion timing:|^(--- |FAIL)|fuse_test.go' "$OUT/fusion-timing.log"
echo "timing: exit $trc (log: $OUT/fusion-timing.log)"
[ $rc -eq 0 ] && [ $trc -eq 0 ]
