#!/usr/bin/env bash
# Run on a CUDA machine from the repo root with a CGO_ENABLED=0 build at .device/zflow
# and the conformance traces copied to .device/conf/ (../shared does not travel).
# generate on every conformance trace with cpu and cuda; compare latents.
set -u
Z=.device/zflow
for m in flux qwenimage llama; do for d in f32 bf16; do
  doc=semantics/testdata/$m-$d.json; ref=.device/conf/$m-$d.npz
  for b in cpu cuda; do
    /usr/bin/time -f "$m-$d $b wall %e s" $Z generate --semantics $doc --inputs $ref -o $OUT/$m-$d-$b.npz --backend $b 2>&1 | tail -2
  done
  echo "== $m-$d: cuda vs cpu"
  $Z diff $OUT/$m-$d-cuda.npz $OUT/$m-$d-cpu.npz --format csv 2>&1 | grep "^0,output\|^[0-9]*,output"
  echo "== $m-$d: cuda vs reference"
  $Z diff $OUT/$m-$d-cuda.npz $ref --format csv 2>&1 | grep ",output/" | head -3
done; done
