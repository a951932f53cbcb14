#!/bin/bash
# The device side of the Hopper attention kernel (issue 15, item 1): the
# attention tests on both flash routes, the kernels' timing beside PyTorch
# SDPA (bench/attn_torch.py), then the block benchmark and its PyTorch
# eager run. Build here first (no Go is needed there):
#
#   CGO_ENABLED=0 go test -c -o .device/cuda.test ./cuda
#   CGO_ENABLED=0 go build -ldflags="-s -w" -o .device/block ./bench/block
#   xz -9 .device/cuda.test .device/block        # optional
#   bash bench/attn_gpu.sh                        # on the GPU machine
#
# Logs and JSON go to $OUT (default ./gpu-out). TEST_RUN picks tests;
# NO_BLOCK=1 skips the block benchmark; TEST_TIMEOUT (seconds, 300) bounds
# the tests; ZFLOW_HOPPER_ATTN=cp or ws picks the Hopper kernel the tests
# run (the timing runs every geometry). Through the device tool from a
# helper's worktree (the tool sends the session's checkout, not the
# worktree), copy .device/ and bench/ into a folder the checkout ignores,
# e.g. .device/attn/{.device,bench}, carry it, and run
# `bash .device/attn/bench/attn_gpu.sh` (2026-12-02: TestAttention alone
# took 98 s there, the NVRTC builds included).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for f in .device/*.xz; do [ -e "$f" ] && xz -dkf "$f"; done
chmod +x .device/cuda.test .device/block 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
date -u
echo "== the two flash kernels side by side"
( cd .device && timeout 120 ./cuda.test -test.v -test.count=1 -test.run 'TestHopperAgreesTile$' 2>&1 | grep -v '^=== RUN' | tee "$OUT/agree.log" | grep -E '^(--- |FAIL|ok|PASS)|disagrees' )
echo "== timing"
( cd .device && ZFLOW_ATTN_BENCH="$OUT/ours_attn.json" timeout 150 ./cuda.test -test.count=1 -test.run 'TestAttentionTiming$' 2>&1 | grep -v '^PASS\|^ok' )
PYTHONUNBUFFERED=1 timeout 120 python3 bench/attn_torch.py --ours "$OUT/ours_attn.json" 2>&1 | tee "$OUT/attn_torch.log"
echo "== tests"
( cd .device && timeout "${TEST_TIMEOUT:-300}" ./cuda.test -test.v -test.count=1 -test.run "${TEST_RUN:-TestAttention\$|TestAttentionExtras}" > "$OUT/tests.log" 2>&1; echo "tests rc=$?" >> "$OUT/tests.log" )
grep -E '^(--- |FAIL|ok|PASS|tests rc)|hopper_test.go|cuda_test.go' "$OUT/tests.log" | grep -v -- '--- PASS' | head -120
grep -E '^(op |device:)|^attention' "$OUT/tests.log"
[ "${NO_BLOCK:-0}" = 1 ] && exit 0
echo "== block"
( cd .device && timeout 150 ./block -json "$OUT/ours.json" -out /tmp/block_out.bin 2>&1 | tail -15 )
echo "== torch block"
PYTHONUNBUFFERED=1 timeout 200 python3 bench/block_torch.py --ours "$OUT/ours.json" --ours-out /tmp/block_out.bin --json "$OUT/torch.json" 2>&1 | tail -20
