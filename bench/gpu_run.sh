#!/bin/bash
# The device side of the GPU proof (DESIGN.md, Backends; issue 8): the CUDA
# op tests against the CPU backend, the block benchmark (bench/block) and
# the same block in PyTorch eager (bench/block_torch.py). No Go is needed
# there: build the binaries on a machine with Go first, into the
# git-ignored .device/ folder, and send that folder along:
#
#   CGO_ENABLED=0 go test -c -o .device/cuda.test ./cuda
#   CGO_ENABLED=0 go build -o .device/block ./bench/block
#   bash bench/gpu_run.sh            # on the GPU machine, from the repo root
#
# Logs and JSON go to $OUT (default ./gpu-out). TEST_RUN picks tests.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
echo "== tests"
( cd .device && timeout 300 ./cuda.test -test.v -test.count=1 ${TEST_RUN:+-test.run "$TEST_RUN"} > "$OUT/tests.log" 2>&1; echo "tests rc=$?" >> "$OUT/tests.log" )
grep -E '^(--- |FAIL|ok|tests rc)|cuda_test.go' "$OUT/tests.log" | grep -v -- '--- PASS'
sed -n '/^op /,$p' "$OUT/tests.log"
echo "== block"
( cd .device && timeout 150 ./block -json "$OUT/ours.json" -out /tmp/block_out.bin 2>&1 | tee "$OUT/block.log" )
echo "== torch"
PYTHONUNBUFFERED=1 timeout 150 python3 bench/block_torch.py --ours "$OUT/ours.json" --ours-out /tmp/block_out.bin --json "$OUT/torch.json" 2>&1 | tee "$OUT/torch.log"
