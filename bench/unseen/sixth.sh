#!/bin/bash
# The sixth batch again (BENCHMARKS.md, "A sixth batch of real language models"): the 54 AutoModel types
# of the sweep that captured, f32 on the CPU and bf16 on the GPU, each scored by the shared tool.
# For the device machine (torch 2.x, transformers, a GPU); from the repository's root:
#   bash bench/unseen/sixth.sh ZFLOW CONFORMANCE_PY OUTDIR
# ZFLOW a linux binary (CGO_ENABLED=0 go build), CONFORMANCE_PY a copy of ../shared/tools/conformance.py
# (../shared does not travel). Writes OUTDIR/capture.txt and OUTDIR/score.txt; prints the scores and the passes.
set -u
Z=$1; C=$2; OUT=$3; D=/tmp/sixth
mkdir -p $D $OUT
ARCHS="bart bigbird_pegasus blenderbot blenderbot-small cohere2_moe eurobert fuyu gpt-sw3 granite_swa higgs_audio_v2
hyperclovax jais2 jina_embeddings_v3 marian mbart ministral3 modernbert-decoder mvp nomic_bert pegasus
roberta-prelayernorm roc_bert tapas tipsv2_text_model visual_bert xlm-roberta-xl t5 mt5 umt5 longt5
switch_transformers clip_text_model qwen3_vl_text qwen3_5_text gemma4_text gemma4_unified_text muse_glimmer_text
deepseek_v4 olmo_hybrid granitemoe_swa hrm_text deberta dpr imagegpt fsmt markuplm canine neomme
sam3_lite_text_text_model led longformer pegasus_x m2m_100 nllb-moe"
echo $ARCHS | tr ' ' '\n' | xargs -P 12 -n 5 sh -c 'CAPTURE_TIMEOUT=60 python3 bench/unseen/capture_lm.py '$D' "$@" 2>/dev/null | grep -v "^torch"' _ > $OUT/capture.txt
for f in $D/*-f32.npz; do m=$(basename $f -f32.npz); [ -f $D/$m-bf16.npz ] && echo $m; done > $D/models.txt
xargs -P 14 -I{} sh -c 'timeout 280 python3 '$C' '$Z' {} --dir '$D' --truth /nonexistent 2>&1 | grep -E "^{} "' < $D/models.txt > $OUT/score.txt
sort $OUT/score.txt | cut -c1-220
echo "$(grep -c ' PASS ' $OUT/score.txt) of $(wc -l < $D/models.txt) pass"
