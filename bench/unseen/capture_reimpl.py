"""Capture small faithful reimplementations of transformers models that this machine's
torch 1.13 cannot import, as zflow traces (f32, CPU, random weights).

usage: /usr/bin/python3 capture_reimpl.py OUTDIR [CASE ...]
       (cases: gpt_oss, llama4_text, diffllama, phimoe, doge, ctrl, apertus, gpt_neox_japanese, bamba,
       mamba, nemotron_h, falcon_h1, falcon_h1_mup, jamba, falcon_mamba, roformer, recurrent_gemma, rwkv, mamba_kernel_path,
       minimax, qwen3_next, reimpl_encoders.py's: xglm, mobilebert, layoutlm, mpnet, nystromformer, convbert, yoso,
       reimpl_mixers.py's: jetmoe, xlstm, fnet, reimpl_text.py's: t5, umt5, clip_text_model, dpr, deberta,
       reimpl_lm6.py's: qwen3_vl_text, olmo_hybrid, gemma4_text, qwen3_5_text,
       reimpl_lm7.py's: m2m_100, switch_transformers, switch_transformers_idle, muse_glimmer_text, reimpl_lm7_attention.py's: fsmt,
       longformer, longt5, reimpl_hc.py's: deepseek_v4_hc, reimpl_dsv4.py's: deepseek_v4_attn, and
       reimpl_sam3_lite_text.py's: sam3_lite_text_text_model, sam3_lite_text_text_model_l4, reimpl_pegasus_x.py's:
       pegasus_x, pegasus_x_b4, reimpl_canine.py's: canine)
The committed traces: capture_reimpl.py fixtures/unseen gpt_oss llama4_text diffllama phimoe doge ctrl apertus
gpt_neox_japanese bamba mamba nemotron_h falcon_h1 jamba falcon_mamba roformer recurrent_gemma rwkv
mamba_kernel_path minimax qwen3_next xglm mobilebert layoutlm mpnet nystromformer convbert yoso jetmoe xlstm fnet
t5 umt5 clip_text_model dpr deberta qwen3_vl_text olmo_hybrid gemma4_text qwen3_5_text m2m_100
switch_transformers muse_glimmer_text fsmt longformer longt5 deepseek_v4_hc deepseek_v4_attn
sam3_lite_text_text_model switch_transformers_idle.

Each case rebuilds the real model's forward in plain torch: the same module tree, the same
parameter names and shapes and the same call boundaries (the capture hooks every module
call), with the arithmetic written out from the upstream source, in the same order.
Weights are redrawn as bench/unseen/weights.py does for the transformers captures.

gpt_oss follows huggingface/transformers src/transformers/models/gpt_oss/modeling_gpt_oss.py
at commit 00d4b3d2142cb4ced2f51b90614b5d26bc045015 (eager attention, the eval path of the
experts), and src/transformers/modeling_rope_utils.py's YaRN frequencies with gpt_oss's
default rope_scaling (factor 32, beta_fast 32, beta_slow 1, original context 4096,
no truncation). What it shows:
  - attention sinks: a learned per-head logit joined as one more column of every row's
    scores (after the mask), softmax over the row minus its max, the sink column dropped;
  - sliding-window causal attention in even layers (window 4 here), full causal in odd ones;
  - q/k/v/o projections with biases; half-layout RoPE from a table of D/2 columns whose
    frequencies follow no single θ (YaRN) and whose values carry a magnitude
    (0.1·ln 32 + 1);
  - a router: linear with bias, top-k of the logits, softmax over the chosen k, scattered
    into a dense [tokens, experts] matrix; the router returns (scores, indices);
  - experts as grouped-GEMM parameters gate_up_proj [E, D, 2I] (gate and up interleaved
    along the last axis), biases, gate clamped above at 7, up clamped to ±7,
    glu = gate·σ(1.702·gate), out = ((up + 1)·glu) @ down_proj + bias, every expert run
    over every token and weighted by the dense scores; gate_up_proj is drawn wider than
    the other weights (widen_experts) so that the clamp acts.

llama4_text follows src/transformers/models/llama4/modeling_llama4.py at commit
000c33fdfde12e1ffafbfcdb3c926df5727a00b6 (the text model, eager attention) with
configuration_llama4.py's Llama4TextConfig defaults but for the sizes and
no_rope_layers [1, 0] (the default interval of 4 leaves two layers without a NoPE one).
What it shows:
  - a router (an nn.Linear) returning (scores, logits): top-k of the logits scattered into
    a field of −inf, then a sigmoid: σ(logit) at the chosen experts, 0 elsewhere;
  - the scores scale the experts' *inputs*: the tokens repeated once per expert, block e
    times column e; the experts one batched GEMM over the E blocks (gate_up_proj [E, D, 2I],
    gate then up, silu), their blocks summed onto a shared expert's output;
  - complex RoPE on adjacent pairs (view_as_complex) then an L2 norm without weights on q
    and k in the RoPE layer; no RoPE and no q/k norm in the NoPE layer, whose queries pass
    through the attention temperature tuning (log1p(floor((pos + 1)/8192))·0.1 + 1: 1 at
    these 8 positions) and whose mask is full causal; the RoPE layer's chunked mask
    (chunk 8192) is causal at these 8 positions too.

diffllama follows src/transformers/models/diffllama/modeling_diffllama.py at commit
00d4b3d2142cb4ced2f51b90614b5d26bc045015 (DiffLlamaSdpaAttention, the default; its
arithmetic is the eager class's), 4 heads over 2 kv heads of 8, the λ vectors drawn
N(0, 0.1) as _init_weights does. What it shows (differential attention):
  - one RoPE table made by the model's rotary_emb and passed to every layer and attention
    as position_embeddings, no attention_mask tensor (None: SDPA's is_causal), as
    transformers 5.17 calls it (the real traces in /work/unseen/lm5 show these boundaries);
  - one softmax map per q head over its (GQA-repeated) key; the values re-laid per head
    pair: head j and head j + H/2 both read [v_j, v_{j+H/2}] (the repeated v chunked in
    two along the heads, joined along the width, repeated twice): value heads of 2D; the
    result laid out [B, S, H, 2D] before the chunk, as 5.17's SDPA path returns it;
  - the maps' outputs of the first H/2 heads minus λ times those of the last H/2, with
    λ = exp(Σ λ_q1·λ_k1) − exp(Σ λ_q2·λ_k2) + λ_init, λ_init = 0.8 − 0.6·exp(−0.3·layer);
  - an RMSNorm without weights over each head's 2D ("groupnorm", nn.RMSNorm: torch 1.13
    lacks it, so the RMSNorm class here stands in with its arithmetic), times (1 − λ_init),
    heads joined, o_proj.

phimoe follows src/transformers/models/phimoe/modular_phimoe.py (transformers 5: the router an
nn.Linear calling sparsemixer, PhimoeExperts = MixtralExperts) and the real transformers 5.17
trace's call boundaries (the router returns logits, weights and indices; act_fn is called once
over every (token, pick) pair's gate, the pairs grouped by expert; no attention mask is passed).
What it shows:
  - sparsemixer's eval path: each pick the largest logit left, its weight the softmax over
    the logits left whose relative distance below it, (m − s)/max(|s|, m), is at most
    2·router_jitter_noise (0.05 here so that a few picks share their weight; the default
    0.01 leaves nearly every weight exactly 1, as in the real trace);
  - experts gate_up_proj [E, 2I, D] (gate then up), down_proj [E, D, I], silu;
  - LayerNorm with bias for every norm; half-layout RoPE, θ 1e6.

doge follows src/transformers/models/doge/modeling_doge.py at commit
00ca1abd43e27efcc50206bf0f608e4ee7585ee6 (DogeAttention through the SDPA interface, the
default; DogeMLP, not the CDMoE), 4 heads over 2 kv heads of 8, keep_window_size 2048 (the
default), and the real transformers 5.17 trace's call boundaries (no mask tensor reaches the
layers: kw.attention_mask is None there). What it shows (the dynamic mask):
  - dt = dt_proj(v laid out [B, S, KV·D]), a linear to one column per kv head; the score bias
    exp(A · softplus(dt)) with A a learned [KV] vector (drawn 1 ± 0.2 by randomize; zeros
    at init would make the bias a constant 1), laid out [B, KV, Sq, Sk] and repeated to the
    query heads as repeat_kv does;
  - prepare_dynamic_mask's eval path at 8 keys: without a mask tensor nothing is filled with
    finfo.min, and the top-k keeps every key (8 ≤ keep_window_size), so the mask is the bias
    alone; SDPA given a mask is not causal;
  - RMSNorm q/k norms per head before RoPE (half layout), a learned per-channel scale of the
    residual in both residual adds (input_residual, post_attention_residual), a SiLU gated MLP.

roformer follows src/transformers/models/roformer/modeling_roformer.py at commit
0166003b4b47ff1c08ed0cd1f88494b4af345c25 (the encoder, no padding: no mask reaches the
layers). What it shows: the encoder's position table, an nn.Embedding called with the
input's shape only and read at arange(seq_len) (its frozen sinusoid weight redrawn by
randomize, as the transformers captures redraw it); each attention rotating adjacent pairs
of q and k by that table's halves, [sin | cos] chunked and each angle stacked twice;
eager attention whose probabilities pass through a Dropout call; BERT's post-norm
residuals and GELU MLP.

ctrl follows src/transformers/models/ctrl/modeling_ctrl.py at commit
00b676f8f0489b88652a31d70751cc540dd06305 (CTRLModel, capture_lm.py --small's sizes: n_embd 32,
2 heads, dff 96, n_positions 64). What it shows:
  - the token embeddings multiplied in place by sqrt(d_model) (the capture copies w's result
    first), plus positional_encoding's table: angles pos / 10000^(2(i//2)/d), sines of the
    even columns then cosines of the odd ones, concatenated; computed at __init__ as a plain
    attribute (no parameter, no buffer), indexed by the positions;
  - the block's mask argument torch.triu(ones(S, S), 1), added ×−1e4 to the scores after
    the 1/sqrt(depth) division; MultiHeadAttention called as (v, k, q, mask), all the same
    normed tensor; dropouts (identity in eval) and a ReLU nn.Sequential FFN.

apertus follows src/transformers/models/apertus/modeling_apertus.py at commit
0205eec1d869591488aa74eda3f2da23610c28d9 and src/transformers/activations.py's
XIELUActivation (its Python path: the xielu CUDA wheel is not installed), with
configuration_apertus.py's defaults (llama3 RoPE scaling, θ 1.2e7) but for the sizes. What it
shows: xIELU, a learned activation: alpha_p, alpha_n parameters of shape [1] through softplus,
beta 0.5 and eps −1e-6 buffers (not in the trace), where(x > 0, αp·x·x + β·x,
(expm1(min(x, eps)) − x)·(β + softplus(αn)) + β·x); an up/down MLP without a gate; q/k RMS
norms; SDPA with no mask tensor (transformers 5.17's is_causal).

gpt_neox_japanese follows src/transformers/models/gpt_neox_japanese/modeling_gpt_neox_japanese.py
at commit 00d4b3d2142cb4ced2f51b90614b5d26bc045015 (no SDPA path: its eager _attn). What it shows:
  - fused per-head [q k v] projection without bias; a rotary_emb call inside each attention;
    scores by baddbmm(zeros, q, kᵀ, alpha=1/sqrt(head)); a 4-D causal mask added;
  - the probabilities passed through an nn.Dropout call (identity in eval) before the values;
  - the attention returns (output, weights, dense_bias), the bias a [D] parameter of the last
    layer only (None in the others), added by the block with the residual:
    residual + (attn_output + bias); a GELU MLP of 4·hidden; LayerNorm everywhere.
bamba follows src/transformers/models/bamba/modeling_bamba.py at commit
00511f5df3b63c48b31496072ec35d6ff3ffa6c6 (BambaMixer.torch_forward, the path taken without the
mamba_ssm / causal_conv1d kernels, no cache) and configuration_bamba.py's defaults (partial
rotary 0.5, θ 1e4, time_step_limit (0, inf), conv bias, no projection biases) but for the sizes:
hidden 32, layer 0 a Mamba-2 mixer (4 heads of 16, 1 group, state 8, conv kernel 4), layer 1
attention (2 heads over 1 kv head of 16), and mamba_chunk_size 4 (256 by default) so that the
8 positions make two chunks and the inter-chunk recurrence acts. What it shows (a selective
state-space mixer):
  - in_proj to [gate z (64) | xBC (80) | dt (4)], split; a depthwise causal nn.Conv1d over xBC
    (padding 3, the first seq_len outputs kept) with bias, then SiLU; xBC split into x, B, C;
  - A = −exp(A_log), dt = clamp(softplus(dt + dt_bias), 0, inf), B and C repeated over the
    heads of their group; the chunked SSD scan (segment sums, intra-chunk "attention", chunk
    states and the inter-chunk recurrence) computing h_t = exp(dt·A)·h_{t−1} + dt·B_t x_t,
    y_t = C_t·h_t, plus the D skip D·x_t;
  - a gated RMSNorm, norm(y · silu(z)) times its weight, called as norm(y, gate); out_proj;
  - RMSNorm, a SiLU gated MLP after each mixer; SDPA with no mask tensor (is_causal).

mamba follows src/transformers/models/mamba/modeling_mamba.py at commit
00328d4e5b22c29e40d28b27c2a99cd7d0c5c14e (MambaMixer.slow_forward, the path taken without the
mamba_ssm / causal_conv1d kernels; its cache, which changes nothing on a first call, left out)
and configuration_mamba.py's defaults (expand 2, conv kernel 4, time_step_rank ceil(hidden/16),
conv bias, no projection biases, residual_in_fp32, SiLU) but for the sizes: hidden 32, state 8,
two blocks. What it shows (Mamba-1's selective scan, never an attention):
  - in_proj to [x (64) | gate (64)] read channels first (transpose(1, 2), chunk); a depthwise
    causal nn.Conv1d over x (padding 3, the first seq_len outputs kept) with bias, then SiLU;
  - x_proj of the conv's output to [time_step (2) | B (8) | C (8)]; dt = softplus(dt_proj(time
    step)), dt_proj's bias inside the Linear; A = −exp(A_log), A_log [64, 8]: one decay rate
    per channel and state; B and C shared by every channel;
  - the recurrence itself, position by position: state = exp(A·dt)·state + (dt·B)·x,
    y = state·C, then y + D·x, times act(gate) (the SiLU module's second call);
  - out_proj of that, a residual per block around an RMSNorm, a final RMSNorm.

nemotron_h follows src/transformers/models/nemotron_h/modeling_nemotron_h.py at commit
008d9e9577b0eb0149aa6bb0c44da582b10e0b6e (NemotronHMamba2Mixer.torch_forward without a cache)
and its Zamba2RMSNormGated (src/transformers/models/zamba2/modeling_zamba2.py), with
configuration_nemotron_h.py's defaults (time_step_min 0.001, conv bias, no projection biases,
relu2 MLPs, attention without RoPE) but for the sizes: hidden 32, blocks [mamba, mlp,
attention] (one of each), 4 heads of 16 in 2 groups of state 8, conv kernel 4, chunk_size 4
so that 8 positions make two chunks. What it shows (a grouped gated norm):
  - in_proj split into [gate (64) | xBC (80) | dt (4)]; conv1d then SiLU over xBC read
    channels first; dt = clamp(softplus(dt + dt_bias), min=0.001); the chunked SSD with B and
    C of 2 groups repeated over their heads; the D skip;
  - Zamba2RMSNormGated(64, group_size=32): y·silu(gate) in f32, RMS statistics over each
    group of 32 channels, times the [64] weight; out_proj;
  - a block per mixer: RMSNorm, mixer, residual; a relu² MLP block (up, relu², down); an
    attention block (SDPA, causal, no positions), a final RMSNorm.

falcon_h1 follows src/transformers/models/falcon_h1/modeling_falcon_h1.py at commit
001f85b38fb432858ace93f18622f07cec46d874 (FalconH1Mixer.torch_forward without a cache) and
configuration_falcon_h1.py's defaults (mamba_rms_norm False, every multiplier 1.0, conv bias,
no projection biases, RoPE θ 1e4) but for the sizes: hidden 32, two hybrid layers, mamba_d_ssm
64 in 4 heads of 16, 1 group of state 8, conv kernel 4, chunk 4; attention 2 heads over 1 kv
head of 16. What it shows (a Mamba-2 mixer beside attention, in parallel, with no norm):
  - each layer: input_layernorm, then mamba(h)·ssm_out_multiplier + self_attn(h·attention_in_
    multiplier)·attention_out_multiplier, the residual; pre_ff_layernorm, the MLP
    up·act(gate·gate_multiplier), down·down_multiplier, the residual;
  - the mixer: in_proj(h·ssm_in_multiplier)·mup_vector (a non-persistent buffer, the five
    ssm_multipliers laid over [z | x | B | C | dt]) split into gate, xBC, dt; conv1d, SiLU; the
    chunked SSD; no norm: y·silu(gate) (functional), out_proj;
  - keys times key_multiplier before RoPE; embeddings times embedding_multiplier.
falcon_h1_mup is the same model with muP multipliers of the released checkpoints' kind (values
chosen here): embedding 5.5, ssm_in 1.25, ssm_multipliers [0.35, 0.25, 0.5, 0.75, 0.3], ssm_out
0.24, attention_in 0.9, attention_out 0.94, key 0.39, mlp [0.88, 0.59]. Not a fixture: discovery
reads every multiplier a boundary shows (the conv's input as in_proj's columns ×0.25 | ×0.5 |
×0.75, the residual plus the branches ×0.24 and ×0.94, ...) but not the gate's ×0.35 and dt's
×0.3, applied inside the mixer before silu and softplus where no call sees them.

jamba follows src/transformers/models/jamba/modeling_jamba.py at commit
008f5c8c29be84d4721dc6d1e0fcd72300580be4 (JambaMambaMixer.slow_forward, the path with
use_mamba_kernels False; no cache) and configuration_jamba.py's defaults (mamba_dt_rank
ceil(hidden/16), conv bias, no projection biases, no positional encoding) but for the sizes:
hidden 32, layer 0 a Mamba layer, layer 1 an attention layer (2 heads over 1 kv head of 16), each
with a dense SiLU gated MLP (one expert), state 8. What it shows (Mamba-1 with inner norms):
  - the Mamba-1 mixer of mamba above, but x_proj's [time_step | B | C] each through an RMSNorm
    module of its own (dt_layernorm, b_layernorm, c_layernorm) before dt_proj and the scan;
  - an attention layer without positions (SDPA, causal).

falcon_mamba follows src/transformers/models/falcon_mamba/modeling_falcon_mamba.py at commit
00b676f8f0489b88652a31d70751cc540dd06305 (FalconMambaMixer.slow_forward, no cache) and
configuration_falcon_mamba.py's defaults (mixer_rms_eps 1e-6, the rest as mamba's) at mamba's
sizes: the mamba mixer above, but x_proj's time step, B and C each through rms_forward (an RMS
norm without a weight, in the forward: no call sees B or C normed; dt_proj's input is the normed
time step), and the blocks' norms weight · rms_forward(x).

recurrent_gemma follows src/transformers/models/recurrent_gemma/modeling_recurrent_gemma.py at commit
0233e509531ace915c8241b4c16c8032a583279c (RecurrentGemmaRecurrentBlock with use_cache False,
RecurrentGemmaRglru's linear-mode _rnn_scan) and the real transformers 5.17 trace's call boundaries
(the layer called as (h, position_ids, None, False, None); the temporal block with keyword
position_ids, attention_mask None, use_cache False, past_key_values None, returning (out, None)), with
configuration_recurrent_gemma.py's arithmetic (gelu_pytorch_tanh, RMSNorm ε 1e-6, conv width 4) but for
the sizes: hidden and lru_width 32, 2 heads of 16, intermediate 96 (the MLP's 48), two recurrent layers
(the real 5.17 traces hold two recurrent layers and no attention block). What it shows (RG-LRU):
  - y = gelu_tanh(linear_y(h)); x = linear_x(h) read channels first through a depthwise causal
    nn.Conv1d (padding 3, the first seq_len outputs kept);
  - the RG-LRU over x: block-diagonal gates, baddbmm(b_h, x_h, W_h) per head then sigmoid, input gate
    i and recurrence gate r; log a = −8·r·softplus(recurrent_param), a = exp(log a), a² = exp(2·log a);
    u = (x·i)·√(1 − a²), but (x·i) where the position is 0 (reset); h_t = a_t·h_{t−1} + u_t in f32,
    each h_t stored in the activations' dtype;
  - linear_out(x·y), the residual; Gemma's RMSNorm (x̂·(1 + γ) in f32); a GELU gated MLP with biases;
    the embeddings times the normalizer √hidden held as a bf16 buffer (5.65625 here).

rwkv follows src/transformers/models/rwkv/modeling_rwkv.py at commit
058a04a3e543f8fb897de7df0cef78839311f2c1 (RWKV-4; rwkv_linear_attention_cpu, the path a CPU run takes, without
a state: use_cache False) and configuration_rwkv.py's defaults (layer_norm_epsilon 1e-5, rescale_every 6)
but for the sizes: hidden and attention_hidden_size 32, intermediate 48, two blocks; the call boundaries
of the real transformers 5.17 trace (block(h, state=None, use_cache=False, output_attentions=False)
returning (h, None, None); attention(x, state=None, use_cache=False) and feed_forward(x, state=None)
returning (out, None)). What it shows (a recurrent model, never an attention):
  - the token shift, an nn.ZeroPad2d((0, 0, 1, -1)) call: each row the one before, zeros first;
  - time mixes per channel, x·μ + shifted·(1 − μ), μ parameters [1, 1, C], for key, value and receptance;
  - the WKV: w = −exp(time_decay), u = time_first, per position the running-maximum form of
    (Σ_{i<t} e^{(t−1−i)w + k_i}·v_i + e^{u + k_t}·v_t) / (Σ_{i<t} e^{(t−1−i)w + k_i} + e^{u + k_t}) in f32;
    output(σ(receptance)·wkv);
  - the channel mix: value(relu(key(mix))²)·σ(receptance(mix)); LayerNorm pre_ln (block 0), ln1, ln2,
    ln_out; with two blocks in eval the rescaling (rescale_every 6) changes nothing.

minimax follows src/transformers/models/minimax/modeling_minimax.py as transformers 5.17.0 ships it (the file
the real traces ran; its lightning attention as at commit 000c33fdfde12e1ffafbfcdb3c926df5727a00b6, its router
returning the logits, the probabilities softmax(logits.float()) for the choice only) (MiniMaxLightningAttention's
blockwise path from a zero kv state: no cache, no attention mask), with the real 5.17 trace's call
boundaries (the layer called with position_embeddings, attention_mask None, position_ids, past_key_values None,
use_cache False; each attention returning (out, weights)) and configuration_minimax.py's arithmetic (all the
alpha/beta factors 1, RMSNorm ε 1e-5, the lightning norm's default 1e-6, θ 1e6) but for the sizes: hidden 32, 4
heads of 8 (2 kv heads in the softmax layer), 4 experts top-2 of 48, layer_types [linear_attention,
full_attention] (the lightning layer first, so that its slopes 2^(−8(h+1)/4)·(1 + 1e-5) decay within the 8
positions: the real trace's layer 1 of 2 has factor ~2e-5 and barely decays) and block_size 4 (256 by default)
so that the 8 positions make two blocks and the inter-block state acts. What it shows (lightning attention):
  - qkv_proj then SiLU (a module call), read per head as [q | k | v] of 8 each (a reshape to [B, L, H, 24] and
    torch.split on the last axis); no scale, no RoPE, no softmax;
  - per block: (q·kᵀ ⊙ exp(−s·(i − j)) for i ≥ j) v, plus (q ⊙ exp(−s·(i + 1)))·S, then
    S ← exp(−s·4)·S + (k ⊙ exp(−s·(4 − j − 1)))ᵀ v: y_t = Σ_{j≤t} exp(−s_h·(t − j)) (q_t·k_j) v_j;
  - the output's RMSNorm over all heads (a module call), times σ(output_gate(h)), out_proj; the layer's
    residual taken after its input norm (residual = input_layernorm(h)), a MoE of 4 SiLU experts.

qwen3_next follows src/transformers/models/qwen3_next/modeling_qwen3_next.py as transformers 5.17.0 ships it (the
file the real traces ran: Qwen3NextGatedDeltaNet.forward without a cache, causal_conv1d_fn's and
torch_chunk_gated_delta_rule's torch paths, the ones taken without causal_conv1d and flash-linear-attention),
with the real 5.17 trace's call boundaries (the layer called with position_embeddings, attention_mask None,
position_ids, past_key_values None, use_cache False; linear_attn with keyword hidden_states, cache_params None,
attention_mask None, use_cache False) and configuration_qwen3_next.py's arithmetic (RMSNorm ε 1e-6 with (1 + γ)
in f32, norm_topk_prob, decoder_sparse_step 1, conv kernel 4, partial rotary 0.25) but for the sizes: hidden 32,
4 value heads of 8 over 2 key heads of 8, 4 experts top-2 of 16 and a shared expert of 24, 2 attention heads
of 16 over 1 kv head, and layer_types [linear_attention, full_attention] (the config's default for two layers,
full_attention_interval 4, makes both linear, as the real traces hold them: the full layer is here so that the
gated softmax attention shows). What it shows (the gated DeltaNet, then gated attention):
  - in_proj_qkvz read per key head as [q (8) | k (8) | v (2·8) | z (2·8)] and in_proj_ba as [b (2) | a (2)]
    (fix_query_key_value_ordering); [q | k | v] joined and through a depthwise causal conv1d without bias
    (the conv1d module's weight used by F.conv1d: no call), SiLU;
  - β = σ(b), g = −exp(A_log)·softplus(a + dt_bias); q and k repeated over their value heads
    (repeat_interleave), L2-normed (ε 1e-6), q times 1/√8;
  - the chunked gated delta rule (chunk 64: one chunk, padded; the UT system solved by
    torch.linalg.solve_triangular): S_t = exp(g_t)·S_{t−1}(I − β_t k_t k_tᵀ) + β_t k_t v_tᵀ, y_t = q_tᵀS_t;
  - Qwen3NextRMSNormGated over each head's 8 (its own call, with z as the gate): γ·x̂ then times silu(z) in f32;
    out_proj; a sparse MoE with a σ-gated shared expert;
  - the full layer's attention: q_proj to [q | gate] per head (torch.chunk of a [.., H, 2·16] view), q_norm and
    k_norm with (1 + γ), RoPE on the first 4 columns of each head (partial rotary 0.25), SDPA (causal, no mask
    tensor), the output times σ(gate) before o_proj.
"""
import math
import os
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "capture"))
sys.path.insert(0, HERE)
import zflow_capture  # noqa: E402
from weights import randomize  # noqa: E402


class Config:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    num_local_experts = 4
    num_experts_per_tok = 2
    sliding_window = 4
    rms_norm_eps = 1e-5
    rope_theta = 150000.0
    rope_factor = 32.0
    beta_fast = 32.0
    beta_slow = 1.0
    original_max_position_embeddings = 4096
    layer_types = ["sliding_attention", "full_attention"]


class GptOssRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        h = hidden_states.to(torch.float32)
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + self.variance_epsilon)
        return (self.weight * h).to(dtype)


class GptOssExperts(nn.Module):
    def __init__(self, c):
        super().__init__()
        e, d, i = c.num_local_experts, c.hidden_size, c.intermediate_size
        self.hidden_size = d
        self.gate_up_proj = nn.Parameter(torch.empty(e, d, 2 * i))
        self.gate_up_proj_bias = nn.Parameter(torch.empty(e, 2 * i))
        self.down_proj = nn.Parameter(torch.empty(e, i, d))
        self.down_proj_bias = nn.Parameter(torch.empty(e, d))
        self.alpha = 1.702
        self.limit = 7.0

    def forward(self, hidden_states, router_indices=None, routing_weights=None):
        # The inference path: every expert over every token, weighted by the dense scores.
        b = hidden_states.shape[0]
        x = hidden_states.reshape(-1, self.hidden_size)
        e = routing_weights.shape[1]
        x = x.repeat(e, 1).view(e, -1, self.hidden_size)
        gate_up = torch.bmm(x, self.gate_up_proj) + self.gate_up_proj_bias[..., None, :]
        gate, up = gate_up[..., ::2], gate_up[..., 1::2]
        gate = gate.clamp(min=None, max=self.limit)
        up = up.clamp(min=-self.limit, max=self.limit)
        glu = gate * torch.sigmoid(gate * self.alpha)
        out = torch.bmm((up + 1) * glu, self.down_proj) + self.down_proj_bias[..., None, :]
        out = out.view(e, b, -1, self.hidden_size)
        out = out * routing_weights.transpose(0, 1).view(e, b, -1)[..., None]
        return out.sum(dim=0)


class GptOssTopKRouter(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.top_k = c.num_experts_per_tok
        self.hidden_dim = c.hidden_size
        self.weight = nn.Parameter(torch.empty(c.num_local_experts, c.hidden_size))
        self.bias = nn.Parameter(torch.empty(c.num_local_experts))

    def forward(self, hidden_states):
        x = hidden_states.reshape(-1, self.hidden_dim)
        logits = F.linear(x, self.weight, self.bias)
        top, idx = torch.topk(logits, self.top_k, dim=-1)
        top = F.softmax(top, dim=1, dtype=top.dtype)
        scores = torch.zeros_like(logits).scatter_(1, idx, top)
        return scores, idx


class GptOssMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.router = GptOssTopKRouter(c)
        self.experts = GptOssExperts(c)

    def forward(self, hidden_states):
        scores, idx = self.router(hidden_states)
        out = self.experts(hidden_states, router_indices=idx, routing_weights=scores)
        return out, scores


def yarn_inv_freq(c):
    """YaRN: frequencies blended between θ-spaced and θ-spaced/factor by a linear ramp."""
    base, dim, factor = c.rope_theta, c.head_dim, c.rope_factor
    attention_factor = 0.1 * math.log(factor) + 1.0

    def correction_dim(rot):
        return dim * math.log(c.original_max_position_embeddings / (rot * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(c.beta_fast)), 0)
    high = min(math.ceil(correction_dim(c.beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (factor * pos_freqs)
    keep = 1 - ramp
    return interpolation * (1 - keep) + extrapolation * keep, attention_factor


class GptOssRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        inv_freq, self.attention_scaling = yarn_inv_freq(c)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        cos = freqs.cos() * self.attention_scaling
        sin = freqs.sin() * self.attention_scaling
        return cos.to(x.dtype), sin.to(x.dtype)


def rotate(x, cos, sin):
    a, b = torch.chunk(x, 2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


def repeat_kv(x, n):
    b, kv, s, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


class GptOssAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.head_dim = c.head_dim
        self.groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        h, kv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=True)
        self.k_proj = nn.Linear(c.hidden_size, kv * d, bias=True)
        self.v_proj = nn.Linear(c.hidden_size, kv * d, bias=True)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=True)
        self.sinks = nn.Parameter(torch.empty(h))

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids=None):
        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        # eager_attention_forward with the sink column.
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + attention_mask[:, :, :, : k.shape[-2]]
        sinks = self.sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[-2], -1)
        logits = torch.cat([w, sinks], dim=-1)
        logits = logits - logits.max(dim=-1, keepdim=True).values
        probs = F.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1]
        out = torch.matmul(probs, v).transpose(1, 2).contiguous()
        out = out.reshape(*shape[:-2], -1).contiguous()
        return self.o_proj(out), probs


class GptOssDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.self_attn = GptOssAttention(c, layer_idx)
        self.mlp = GptOssMLP(c)
        self.input_layernorm = GptOssRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = GptOssRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.attention_type = c.layer_types[layer_idx]

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
        residual = hidden_states
        h = self.input_layernorm(hidden_states)
        h, _ = self.self_attn(hidden_states=h, attention_mask=attention_mask, position_ids=position_ids,
                              position_embeddings=position_embeddings)
        h = residual + h
        residual = h
        h = self.post_attention_layernorm(h)
        h, _ = self.mlp(h)
        return residual + h


def causal_mask(n, dtype, window=None):
    """transformers' eager 4-D mask: 0 where key j is seen by query i, the dtype's min elsewhere."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    seen = j <= i
    if window is not None:
        seen = seen & (j > i - window)
    m = torch.zeros(n, n, dtype=dtype).masked_fill(~seen, torch.finfo(dtype).min)
    return m[None, None]


class GptOssModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([GptOssDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = GptOssRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.rotary_emb = GptOssRotaryEmbedding(c)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        n = h.shape[1]
        position_ids = torch.arange(n)[None]
        masks = {"full_attention": causal_mask(n, h.dtype),
                 "sliding_attention": causal_mask(n, h.dtype, self.config.sliding_window)}
        pe = self.rotary_emb(h, position_ids)
        for layer in self.layers:
            h = layer(h, attention_mask=masks[layer.attention_type], position_ids=position_ids,
                      position_embeddings=pe)
        return self.norm(h)


def widen_experts(model, gen):
    """gate_up_proj redrawn with std 6/√D: at randomize's scale (1/√(D·2I)) the
    pre-activations stay below 0.6 and the clamp at 7 never acts, so no trace
    could show it; at this one about a tenth of the gates and a fifth of the ups pass it."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("experts.gate_up_proj"):
                p.copy_(6.0 * torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))


# --- llama4_text -------------------------------------------------------------------------


class Llama4Config:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    intermediate_size = 48
    intermediate_size_mlp = 96
    vocab_size = 64
    num_hidden_layers = 2
    num_local_experts = 4
    num_experts_per_tok = 1
    rms_norm_eps = 1e-5
    rope_theta = 500000.0
    hidden_act = "silu"
    use_qk_norm = True
    # no_rope_layer_interval 2 (the default 4 would leave two layers without a NoPE one)
    no_rope_layers = [1, 0]
    moe_layers = [0, 1]  # interleave_moe_layer_step 1
    attention_chunk_size = 8192
    attn_temperature_tuning = True
    floor_scale = 8192
    attn_scale = 0.1
    layer_types = ["chunked_attention", "full_attention"]


class Llama4TextExperts(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_experts = c.num_local_experts
        self.hidden_size = c.hidden_size
        self.expert_dim = c.intermediate_size
        self.gate_up_proj = nn.Parameter(torch.zeros(c.num_local_experts, c.hidden_size, 2 * self.expert_dim))
        self.down_proj = nn.Parameter(torch.empty(c.num_local_experts, self.expert_dim, c.hidden_size))

    def forward(self, hidden_states):
        hidden_states = hidden_states.view(self.gate_up_proj.shape[0], -1, self.hidden_size)
        gate_up = torch.bmm(hidden_states, self.gate_up_proj)
        gate, up = gate_up.chunk(2, dim=-1)
        next_states = torch.bmm(up * F.silu(gate), self.down_proj)
        return next_states.view(-1, self.hidden_size)


class Llama4TextMLP(nn.Module):
    def __init__(self, c, intermediate_size=None):
        super().__init__()
        i = intermediate_size or c.intermediate_size
        self.gate_proj = nn.Linear(c.hidden_size, i, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, i, bias=False)
        self.down_proj = nn.Linear(i, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Llama4TextL2Norm(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x)


class Llama4TextRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class Llama4Router(nn.Linear):
    def __init__(self, c):
        super().__init__(c.hidden_size, c.num_local_experts, bias=False)
        self.top_k = c.num_experts_per_tok

    def forward(self, hidden_states):
        logits = super().forward(hidden_states)
        top, idx = torch.topk(logits, self.top_k, dim=1)
        scores = torch.full_like(logits, float("-inf")).scatter_(1, idx, top)
        scores = torch.sigmoid(scores.float()).to(scores.dtype)
        return scores, logits


class Llama4TextMoe(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.hidden_dim = c.hidden_size
        self.experts = Llama4TextExperts(c)
        self.router = Llama4Router(c)
        self.shared_expert = Llama4TextMLP(c)

    def forward(self, hidden_states):
        hidden_states = hidden_states.reshape(-1, self.hidden_dim)
        scores, logits = self.router(hidden_states)
        routed_in = hidden_states.repeat(scores.shape[1], 1)
        routed_in = routed_in * scores.transpose(0, 1).reshape(-1, 1)
        routed_out = self.experts(routed_in)
        out = self.shared_expert(hidden_states)
        out.add_(routed_out.reshape(scores.shape[1], -1, routed_out.shape[-1]).sum(dim=0))
        return out, logits


class Llama4TextRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.int64).float() / c.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
        return freqs_cis * self.attention_scaling


def llama4_rotary(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis[:, :, None, :]).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis[:, :, None, :]).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Llama4TextAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.head_dim = c.head_dim
        self.groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.attn_scale, self.floor_scale = c.attn_scale, c.floor_scale
        self.attn_temperature_tuning = c.attn_temperature_tuning
        self.use_rope = c.no_rope_layers[layer_idx]
        h, kv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=False)
        if c.use_qk_norm and self.use_rope:
            self.qk_norm = Llama4TextL2Norm(c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask, cache_position=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape)
        k = self.k_proj(hidden_states).view(*input_shape, -1, self.head_dim)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        if self.use_rope:
            q, k = llama4_rotary(q, k, position_embeddings)
        if hasattr(self, "qk_norm"):
            q = self.qk_norm(q)
            k = self.qk_norm(k)
        if self.attn_temperature_tuning and not self.use_rope:
            scales = torch.log1p(torch.floor((cache_position.float() + 1.0) / self.floor_scale)) * self.attn_scale + 1.0
            scales = scales.view((1, input_shape[-1], 1, 1)).expand((*input_shape, 1, 1))
            q = (q * scales).to(q.dtype)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        # eager_attention_forward (llama4's: softmax in the input's dtype)
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + attention_mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        out = out.reshape(*input_shape, -1).contiguous()
        return self.o_proj(out), w


class Llama4TextDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.attention_type = c.layer_types[layer_idx]
        self.self_attn = Llama4TextAttention(c, layer_idx)
        self.is_moe_layer = layer_idx in c.moe_layers
        if self.is_moe_layer:
            self.feed_forward = Llama4TextMoe(c)
        else:
            self.feed_forward = Llama4TextMLP(c, intermediate_size=c.intermediate_size_mlp)
        self.input_layernorm = Llama4TextRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = Llama4TextRMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, cache_position=None,
                position_embeddings=None):
        residual = hidden_states
        h = self.input_layernorm(hidden_states)
        a, _ = self.self_attn(hidden_states=h, position_embeddings=position_embeddings,
                              attention_mask=attention_mask, cache_position=cache_position)
        h = residual + a
        residual = h
        h = self.post_attention_layernorm(h)
        h = self.feed_forward(h)
        if self.is_moe_layer:
            h, _ = h
        return residual + h.view(residual.shape)


def chunked_causal_mask(n, dtype, chunk):
    """create_chunked_causal_mask's eager form: causal within each chunk of `chunk` positions."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    seen = (j <= i) & (j // chunk == i // chunk)
    return torch.zeros(n, n, dtype=dtype).masked_fill(~seen, torch.finfo(dtype).min)[None, None]


class Llama4TextModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([Llama4TextDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = Llama4TextRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.rotary_emb = Llama4TextRotaryEmbedding(c)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        n = h.shape[1]
        cache_position = torch.arange(n)
        position_ids = cache_position[None]
        masks = {"full_attention": causal_mask(n, h.dtype),
                 "chunked_attention": chunked_causal_mask(n, h.dtype, self.config.attention_chunk_size)}
        freq_cis = self.rotary_emb(h, position_ids)
        for layer in self.layers:
            h = layer(h, attention_mask=masks[layer.attention_type], position_ids=position_ids,
                      cache_position=cache_position, position_embeddings=freq_cis)
        return self.norm(h)


# --- diffllama ---------------------------------------------------------------------------


class DiffLlamaConfig:
    hidden_size = 32
    num_attention_heads = 4
    num_key_value_heads = 2
    head_dim = 8
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-5
    rope_theta = 10000.0
    lambda_std_dev = 0.1


def lambda_init_fn(layer_idx):
    return 0.8 - 0.6 * math.exp(-0.3 * layer_idx)


class DiffLlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        h = hidden_states.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)


class RMSNorm(nn.Module):
    """torch's nn.RMSNorm (2.4+) without an affine part, as torch 1.13 lacks it:
    x · rsqrt(mean(x²) + eps) over the last axis."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=False):
        super().__init__()
        self.normalized_shape = (normalized_shape,)
        self.eps = eps

    def forward(self, x):
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class DiffLlamaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DiffLlamaRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.int64).float() / c.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class DiffLlamaSdpaAttention(nn.Module):
    """The SDPA class (transformers' default implementation): the same arithmetic as the
    eager one, its softmax written out (torch 1.13 has no scaled_dot_product_attention)."""

    def __init__(self, c, layer_idx):
        super().__init__()
        self.num_heads, self.head_dim = c.num_attention_heads, c.head_dim
        self.num_key_value_heads = c.num_key_value_heads
        self.groups = c.num_attention_heads // c.num_key_value_heads
        h, kv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=False)
        self.lambda_init = lambda_init_fn(layer_idx)
        self.lambda_q1 = nn.Parameter(torch.normal(0, c.lambda_std_dev, size=(d,)))
        self.lambda_k1 = nn.Parameter(torch.normal(0, c.lambda_std_dev, size=(d,)))
        self.lambda_q2 = nn.Parameter(torch.normal(0, c.lambda_std_dev, size=(d,)))
        self.lambda_k2 = nn.Parameter(torch.normal(0, c.lambda_std_dev, size=(d,)))
        self.groupnorm = RMSNorm(2 * d, eps=c.rms_norm_eps, elementwise_affine=False)
        self.rotary_emb = DiffLlamaRotaryEmbedding(c)

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, position_ids=None):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states)
        k = self.k_proj(hidden_states)
        v = self.v_proj(hidden_states)
        q = q.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = v.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        if position_embeddings is None:
            cos, sin = self.rotary_emb(hidden_states, position_ids)
        else:
            cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        v = torch.cat(torch.chunk(v, 2, dim=1), dim=-1)
        v = v.repeat(1, 2, 1, 1)
        # scaled_dot_product_attention, is_causal where no mask is passed
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        w = w + (attention_mask if attention_mask is not None else causal_mask(q_len, w.dtype))[:, :, :, : k.shape[-2]]
        # SDPA's result comes back heads after rows ([B, S, H, 2D]), as transformers 5.17's
        # attention interface returns it: the groupnorm sees [B, S, H/2, 2D] (the real traces)
        attn_output = torch.matmul(F.softmax(w, dim=-1), v).transpose(1, 2)
        attn_output1, attn_output2 = torch.chunk(attn_output, 2, dim=2)
        lambda_1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1, dim=-1, dtype=torch.float32)).to(q.dtype)
        lambda_2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2, dim=-1, dtype=torch.float32)).to(q.dtype)
        lambda_full = lambda_1 - lambda_2 + self.lambda_init
        attn_output = attn_output1 - lambda_full * attn_output2
        attn_output = (1 - self.lambda_init) * self.groupnorm(attn_output)
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output), None


class DiffLlamaDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.self_attn = DiffLlamaSdpaAttention(c, layer_idx)
        self.mlp = DiffLlamaMLP(c)
        self.input_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
        residual = hidden_states
        h = self.input_layernorm(hidden_states)
        h, _ = self.self_attn(hidden_states=h, attention_mask=attention_mask, position_ids=position_ids,
                              position_embeddings=position_embeddings)
        h = residual + h
        residual = h
        h = self.post_attention_layernorm(h)
        h = self.mlp(h)
        return residual + h


class DiffLlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([DiffLlamaDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = DiffLlamaRotaryEmbedding(c)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        n = h.shape[1]
        position_ids = torch.arange(n)[None]
        pe = self.rotary_emb(h, position_ids=position_ids)
        for layer in self.layers:
            h = layer(h, attention_mask=None, position_ids=position_ids, position_embeddings=pe)
        return self.norm(h)


def diffllama_lambdas(model, gen):
    """The λ vectors as DiffLlamaPreTrainedModel._init_weights draws them, N(0, lambda_std_dev):
    randomize's draw for vectors (1 ± 0.2) would make λ_q·λ_k ≈ head_dim and exp of it huge."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.split(".")[-1] in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
                p.copy_(DiffLlamaConfig.lambda_std_dev * torch.randn(p.shape, generator=gen))


# --- phimoe ------------------------------------------------------------------------------


class PhimoeConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    num_local_experts = 4
    num_experts_per_tok = 2
    rms_norm_eps = 1e-5
    rope_theta = 1e6
    # 0.01 by default; 0.05 makes more picks share their weight with a near logit
    # (2·jitter = 0.1 of relative distance), so that the trace bounds the margin closely
    router_jitter_noise = 0.05


def sparsemixer(scores, jitter_eps, top_k=2):
    """modeling_phimoe.sparsemixer's eval path (training False: no Gumbel sampling, no
    Heun mask): each pick the largest logit left, weighted by the softmax over the logits
    left within 2·jitter_eps of it, relatively."""
    # first expert
    with torch.no_grad():
        mask_logits_threshold, max_ind = scores.max(dim=-1, keepdim=True)
        factor = scores.abs().clamp(min=mask_logits_threshold)
        mask_logits_threshold = ((mask_logits_threshold - scores) / factor) > (2 * jitter_eps)
    masked_gates = scores.masked_fill(mask_logits_threshold, float("-inf"))
    selected_experts = max_ind
    masked_gates = torch.softmax(masked_gates, dim=-1)
    multiplier = masked_gates.gather(dim=-1, index=selected_experts)
    # masked out first expert
    masked_scores = torch.scatter(scores, -1, selected_experts, float("-inf"))
    with torch.no_grad():
        mask_logits_threshold, max_ind = masked_scores.max(dim=-1, keepdim=True)
        factor = scores.abs().clamp(min=mask_logits_threshold)
        mask_logits_threshold = ((mask_logits_threshold - scores) / factor) > (2 * jitter_eps)
    masked_gates_top2 = masked_scores.masked_fill(mask_logits_threshold, float("-inf"))
    selected_experts_top2 = max_ind
    masked_gates_top2 = torch.softmax(masked_gates_top2, dim=-1)
    multiplier_top2 = masked_gates_top2.gather(dim=-1, index=selected_experts_top2)
    multiplier = torch.concat((multiplier, multiplier_top2), dim=-1)
    selected_experts = torch.concat((selected_experts, selected_experts_top2), dim=-1)
    return multiplier, selected_experts


class PhimoeTopKRouter(nn.Linear):
    def __init__(self, c):
        super().__init__(c.hidden_size, c.num_local_experts, bias=False)
        self.router_jitter_noise = c.router_jitter_noise
        self.top_k = c.num_experts_per_tok

    def forward(self, hidden_states):
        router_logits = super().forward(hidden_states)
        routing_weights, selected_experts = sparsemixer(router_logits, jitter_eps=self.router_jitter_noise,
                                                        top_k=self.top_k)
        # transformers 5.17's router returns the logits too (the real trace: three results)
        return router_logits, routing_weights, selected_experts


class PhimoeExperts(nn.Module):
    """MixtralExperts: gate_up_proj [E, 2I, D] (gate then up), down_proj [E, D, I]; the
    (token, pick) pairs grouped by expert, one act_fn call over every pair's gate (as the
    real trace shows: act_fn once, [T·k, I]), weighted and added back per token."""

    def __init__(self, c):
        super().__init__()
        self.num_experts = c.num_local_experts
        self.intermediate_dim = c.intermediate_size
        self.gate_up_proj = nn.Parameter(torch.empty(c.num_local_experts, 2 * c.intermediate_size, c.hidden_size))
        self.down_proj = nn.Parameter(torch.empty(c.num_local_experts, c.hidden_size, c.intermediate_size))
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states, top_k_index, top_k_weights):
        final = torch.zeros_like(hidden_states)
        k = top_k_index.shape[-1]
        order = torch.sort(top_k_index.reshape(-1), stable=True)[1]
        tokens, picks = order // k, order % k
        experts = top_k_index.reshape(-1)[order]
        gates, ups = [], []
        for e in range(self.num_experts):
            at = experts == e
            gate, up = F.linear(hidden_states[tokens[at]], self.gate_up_proj[e]).chunk(2, dim=-1)
            gates.append(gate)
            ups.append(up)
        h = self.act_fn(torch.cat(gates)) * torch.cat(ups)
        start = 0
        for e in range(self.num_experts):
            at = experts == e
            n = int(at.sum())
            out = F.linear(h[start:start + n], self.down_proj[e])
            out = out * top_k_weights[tokens[at], picks[at], None]
            final.index_add_(0, tokens[at], out.to(final.dtype))
            start += n
        return final


class PhimoeSparseMoeBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.router = PhimoeTopKRouter(c)
        self.experts = PhimoeExperts(c)

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.reshape(-1, hidden_dim)
        _, routing_weights, selected_experts = self.router(hidden_states)
        final = self.experts(hidden_states, selected_experts, routing_weights)
        return final.reshape(batch_size, sequence_length, hidden_dim)


class PhimoeAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.head_dim = c.head_dim
        self.groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        h, kv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids=None):
        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        # the real trace passes no mask (sdpa, is_causal) and returns no weights
        if attention_mask is None:
            attention_mask = causal_mask(q.shape[-2], q.dtype)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + attention_mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*shape[:-2], -1).contiguous()), None


class PhimoeDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.self_attn = PhimoeAttention(c, layer_idx)
        self.mlp = PhimoeSparseMoeBlock(c)
        self.input_layernorm = nn.LayerNorm(c.hidden_size, eps=c.rms_norm_eps, elementwise_affine=True)
        self.post_attention_layernorm = nn.LayerNorm(c.hidden_size, eps=c.rms_norm_eps, elementwise_affine=True)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
        residual = hidden_states
        h = self.input_layernorm(hidden_states)
        h, _ = self.self_attn(hidden_states=h, attention_mask=attention_mask, position_ids=position_ids,
                              position_embeddings=position_embeddings)
        h = residual + h
        residual = h
        h = self.post_attention_layernorm(h)
        h = self.mlp(h)
        return residual + h


class PhimoeModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([PhimoeDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = nn.LayerNorm(c.hidden_size, eps=c.rms_norm_eps, elementwise_affine=True)
        self.rotary_emb = DiffLlamaRotaryEmbedding(c)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        n = h.shape[1]
        position_ids = torch.arange(n)[None]
        pe = self.rotary_emb(h, position_ids)
        for layer in self.layers:
            h = layer(h, attention_mask=None, position_ids=position_ids, position_embeddings=pe)
        return self.norm(h)



# --- doge --------------------------------------------------------------------------------


class DogeConfig:
    hidden_size = 32
    num_attention_heads = 4
    num_key_value_heads = 2
    head_dim = 8
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-6
    rope_theta = 10000.0
    keep_window_size = 2048


class DogeMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DogeAttention(nn.Module):
    """DogeAttention with the SDPA interface (transformers' default), its softmax written
    out (torch 1.13 has no scaled_dot_product_attention): SDPA given a mask is not causal."""

    def __init__(self, c, layer_idx):
        super().__init__()
        h, kv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.head_dim, self.groups = d, h // kv
        self.scaling = d ** -0.5
        self.keep_window_size = c.keep_window_size
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.A = nn.Parameter(torch.zeros(kv))
        self.dt_proj = nn.Linear(kv * d, kv, bias=False)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=False)
        self.q_norm = DiffLlamaRMSNorm(d, eps=c.rms_norm_eps)
        self.k_norm = DiffLlamaRMSNorm(d, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask=None, position_ids=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        k = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        dt = self.dt_proj(v.transpose(1, 2).reshape(v.shape[0], v.shape[-2], -1))
        dt = torch.exp(self.A * F.softplus(dt)).transpose(-1, -2)
        attn_mask = self.prepare_dynamic_mask(hidden_states, dt, self.keep_window_size, attention_mask)
        attn_mask = repeat_kv(attn_mask, self.groups)
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + attn_mask
        out = torch.matmul(F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype), v).transpose(1, 2)
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None

    def prepare_dynamic_mask(self, hidden_states, dt_states, keep_window_size=2048, attention_mask=None):
        min_dtype = torch.finfo(hidden_states.dtype).min
        dtype = hidden_states.dtype
        attn_mask = dt_states[:, :, None, :].expand(-1, -1, hidden_states.shape[1], -1)
        if attention_mask is not None:
            if attention_mask.dtype == torch.bool:
                attention_mask = torch.where(attention_mask, torch.full((), 0.0, dtype=dtype), min_dtype)
            attn_mask = attn_mask.masked_fill(attention_mask[:, :, :, : attn_mask.shape[-1]] != 0, min_dtype)
        if attn_mask.shape[-1] > keep_window_size:
            active_mask = torch.zeros_like(attn_mask, dtype=dtype)
            topk_indices = torch.topk(attn_mask, keep_window_size, dim=-1, largest=True, sorted=False).indices
            active_mask = active_mask.scatter(-1, topk_indices, 1.0)
            attn_mask = attn_mask.masked_fill(active_mask == 0.0, min_dtype)
        return attn_mask


class DogeDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.input_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.self_attn = DogeAttention(c, layer_idx)
        self.input_residual = nn.Parameter(torch.ones(c.hidden_size))
        self.post_attention_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.mlp = DogeMLP(c)
        self.post_attention_residual = nn.Parameter(torch.ones(c.hidden_size))

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, position_ids=None):
        residual = hidden_states
        h = self.input_layernorm(hidden_states)
        h, _ = self.self_attn(hidden_states=h, position_embeddings=position_embeddings,
                              attention_mask=attention_mask, position_ids=position_ids)
        h = self.input_residual * residual + h
        residual = h
        h = self.post_attention_layernorm(h)
        h = self.mlp(h)
        return self.post_attention_residual * residual + h


class DogeModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([DogeDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = DiffLlamaRotaryEmbedding(c)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        position_ids = torch.arange(h.shape[1])[None]
        pe = self.rotary_emb(h, position_ids=position_ids)
        for layer in self.layers:
            # transformers 5.17's real trace passes no mask tensor to the layers
            # (kw.attention_mask None): the dynamic mask is the bias alone
            h = layer(h, attention_mask=None, position_ids=position_ids, position_embeddings=pe)
        return self.norm(h)


# --- ctrl --------------------------------------------------------------------------------


class CTRLConfig:
    n_embd = 32
    n_head = 2
    n_layer = 2
    dff = 96
    n_positions = 64
    vocab_size = 64
    layer_norm_epsilon = 1e-6


def ctrl_angle_defn(pos, i, d_model_size):
    angle_rates = 1 / torch.pow(10000, (2 * (i // 2)) / d_model_size)
    return pos * angle_rates


def ctrl_positional_encoding(position, d_model_size, dtype):
    # sines of the even angles, then cosines of the odd ones (the same frequencies), concatenated
    angle_rads = ctrl_angle_defn(
        torch.arange(position, dtype=torch.int64).to(dtype).unsqueeze(1),
        torch.arange(d_model_size, dtype=torch.int64).to(dtype).unsqueeze(0),
        d_model_size,
    )
    sines = torch.sin(angle_rads[:, 0::2])
    cosines = torch.cos(angle_rads[:, 1::2])
    return torch.cat([sines, cosines], dim=-1)


def ctrl_scaled_dot_product_attention(q, k, v, mask, attention_mask=None, head_mask=None):
    matmul_qk = torch.matmul(q, k.permute(0, 1, 3, 2))
    dk = k.shape[-1]
    scaled_attention_logits = matmul_qk / np.sqrt(dk)
    if mask is not None:
        nd, ns = scaled_attention_logits.size(-2), scaled_attention_logits.size(-1)
        scaled_attention_logits += mask[ns - nd: ns, :ns] * -1e4
    if attention_mask is not None:
        scaled_attention_logits = scaled_attention_logits + attention_mask
    attention_weights = torch.softmax(scaled_attention_logits, dim=-1)
    if head_mask is not None:
        attention_weights = attention_weights * head_mask
    output = torch.matmul(attention_weights, v)
    return output, attention_weights


class CTRLMultiHeadAttention(nn.Module):
    def __init__(self, d_model_size, num_heads, layer_idx=None):
        super().__init__()
        self.num_heads = num_heads
        self.d_model_size = d_model_size
        self.layer_idx = layer_idx
        self.depth = int(d_model_size / self.num_heads)
        self.Wq = nn.Linear(d_model_size, d_model_size)
        self.Wk = nn.Linear(d_model_size, d_model_size)
        self.Wv = nn.Linear(d_model_size, d_model_size)
        self.dense = nn.Linear(d_model_size, d_model_size)

    def split_into_heads(self, x, batch_size):
        x = x.reshape(batch_size, -1, self.num_heads, self.depth)
        return x.permute([0, 2, 1, 3])

    def forward(self, v, k, q, mask, layer_past=None, attention_mask=None, head_mask=None, use_cache=False,
                output_attentions=False):
        batch_size = q.shape[0]
        q = self.Wq(q)
        k = self.Wk(k)
        v = self.Wv(v)
        q = self.split_into_heads(q, batch_size)
        k = self.split_into_heads(k, batch_size)
        v = self.split_into_heads(v, batch_size)
        output = ctrl_scaled_dot_product_attention(q, k, v, mask, attention_mask, head_mask)
        scaled_attention = output[0].permute([0, 2, 1, 3])
        attn = output[1]
        original_size_attention = scaled_attention.reshape(batch_size, -1, self.d_model_size)
        output = self.dense(original_size_attention)
        return output, attn


def ctrl_point_wise_feed_forward_network(d_model_size, dff):
    return nn.Sequential(nn.Linear(d_model_size, dff), nn.ReLU(), nn.Linear(dff, d_model_size))


class CTRLEncoderLayer(nn.Module):
    def __init__(self, d_model_size, num_heads, dff, rate=0.1, layer_idx=None):
        super().__init__()
        self.multi_head_attention = CTRLMultiHeadAttention(d_model_size, num_heads, layer_idx=layer_idx)
        self.ffn = ctrl_point_wise_feed_forward_network(d_model_size, dff)
        self.layernorm1 = nn.LayerNorm(d_model_size, eps=1e-6)
        self.layernorm2 = nn.LayerNorm(d_model_size, eps=1e-6)
        self.dropout1 = nn.Dropout(rate)
        self.dropout2 = nn.Dropout(rate)

    def forward(self, x, mask, layer_past=None, attention_mask=None, head_mask=None, use_cache=False,
                output_attentions=False):
        normed = self.layernorm1(x)
        attn_outputs = self.multi_head_attention(normed, normed, normed, mask, layer_past=layer_past,
                                                 attention_mask=attention_mask, head_mask=head_mask,
                                                 use_cache=use_cache, output_attentions=output_attentions)
        attn_output = attn_outputs[0]
        attn_output = self.dropout1(attn_output)
        out1 = x + attn_output
        out2 = self.layernorm2(out1)
        ffn_output = self.ffn(out2)
        ffn_output = self.dropout2(ffn_output)
        out2 = out1 + ffn_output
        return (out2,) + attn_outputs[1:]


class CTRLModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.d_model_size = c.n_embd
        self.num_layers = c.n_layer
        # a plain attribute, not a parameter or buffer: the trace does not hold it
        self.pos_encoding = ctrl_positional_encoding(c.n_positions, self.d_model_size, torch.float)
        self.w = nn.Embedding(c.vocab_size, c.n_embd)
        self.dropout = nn.Dropout(0.1)
        self.h = nn.ModuleList([CTRLEncoderLayer(c.n_embd, c.n_head, c.dff, 0.1, layer_idx=i)
                                for i in range(c.n_layer)])
        self.layernorm = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        past_length = 0
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long)
        position_ids = position_ids.unsqueeze(0)
        head_mask = [None] * self.num_layers
        token_type_embeds = 0
        inputs_embeds = self.w(input_ids)
        seq_len = input_shape[-1]
        mask = torch.triu(torch.ones(seq_len + past_length, seq_len + past_length), 1)
        inputs_embeds *= np.sqrt(self.d_model_size)
        pos_embeds = self.pos_encoding[position_ids, :]
        hidden_states = inputs_embeds + pos_embeds + token_type_embeds
        hidden_states = self.dropout(hidden_states)
        for i, h in enumerate(self.h):
            outputs = h(hidden_states, mask, layer_past=None, attention_mask=None, head_mask=head_mask[i],
                        use_cache=False, output_attentions=False)
            hidden_states = outputs[0]
        return self.layernorm(hidden_states)


# --- apertus -----------------------------------------------------------------------------


class ApertusConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-5
    rope_theta = 12000000.0
    rope_factor = 8.0
    low_freq_factor = 1.0
    high_freq_factor = 4.0
    original_max_position_embeddings = 8192


class XIELUActivation(nn.Module):
    """transformers' XIELUActivation, its Python path (the CUDA wheel is not installed)."""

    def __init__(self, alpha_p_init=0.8, alpha_n_init=0.8, beta=0.5, eps=-1e-6, dtype=None):
        super().__init__()
        self.alpha_p = nn.Parameter(torch.log(torch.expm1(torch.tensor(alpha_p_init, dtype=dtype))).unsqueeze(0))
        self.alpha_n = nn.Parameter(
            torch.log(torch.expm1(torch.tensor(alpha_n_init - beta, dtype=dtype))).unsqueeze(0)
        )
        self.register_buffer("beta", torch.tensor(beta, dtype=dtype))
        self.register_buffer("eps", torch.tensor(eps, dtype=dtype))

    def _xielu_python(self, x):
        alpha_p = F.softplus(self.alpha_p)
        alpha_n = self.beta + F.softplus(self.alpha_n)
        return torch.where(
            x > 0,
            alpha_p * x * x + self.beta * x,
            (torch.expm1(torch.min(x, self.eps)) - x) * alpha_n + self.beta * x,
        )

    def forward(self, input):
        return self._xielu_python(input)


class ApertusMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = XIELUActivation(dtype=torch.float32)

    def forward(self, x):
        return self.down_proj(self.act_fn(self.up_proj(x)))


def llama3_inv_freq(c):
    """modeling_rope_utils' _compute_llama3_parameters over the default frequencies."""
    inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float) / c.head_dim))
    factor, low, high, old = c.rope_factor, c.low_freq_factor, c.high_freq_factor, c.original_max_position_embeddings
    low_freq_wavelen = old / low
    high_freq_wavelen = old / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old / wavelen - low) / (high - low)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


class ApertusRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        inv_freq = llama3_inv_freq(c)
        self.attention_scaling = 1.0
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.register_buffer("original_inv_freq", inv_freq.clone(), persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1).to(dtype=torch.float)
        pos = position_ids[:, None, :].float()
        freqs = pos.transpose(1, 2) * inv.transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class ApertusAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        h, kv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.head_dim, self.groups = d, h // kv
        self.scaling = d ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=False)
        self.q_norm = DiffLlamaRMSNorm(d, c.rms_norm_eps)
        self.k_norm = DiffLlamaRMSNorm(d, c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        q = self.q_norm(q)
        k = self.k_norm(k)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        # SDPA (the default), its softmax written out; is_causal where no mask is passed
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        if attention_mask is None:
            attention_mask = causal_mask(q.shape[-2], q.dtype)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + attention_mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


class ApertusDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.self_attn = ApertusAttention(c, layer_idx)
        self.mlp = ApertusMLP(c)
        self.attention_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.feedforward_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
        residual = hidden_states
        h = self.attention_layernorm(hidden_states)
        h, _ = self.self_attn(hidden_states=h, attention_mask=attention_mask, position_ids=position_ids,
                              position_embeddings=position_embeddings)
        h = residual + h
        residual = h
        h = self.feedforward_layernorm(h)
        h = self.mlp(h)
        return residual + h


class ApertusModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([ApertusDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = ApertusRotaryEmbedding(c)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        position_ids = torch.arange(h.shape[1])[None]
        pe = self.rotary_emb(h, position_ids=position_ids)
        for layer in self.layers:
            # SDPA without padding: transformers 5.17 passes no mask tensor (is_causal)
            h = layer(h, attention_mask=None, position_ids=position_ids, position_embeddings=pe)
        return self.norm(h)


# --- gpt_neox_japanese -------------------------------------------------------------------


class GPTNeoXJapaneseConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_hidden_layers = 2
    intermediate_multiple_size = 4
    vocab_size = 64
    rotary_pct = 1.0
    rope_theta = 10000.0
    layer_norm_eps = 1e-5
    attention_dropout = 0.1
    hidden_dropout = 0.0


class GPTNeoXJapaneseRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = int(c.hidden_size // c.num_attention_heads * c.rotary_pct)
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv.float() @ pos.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class GPTNeoXJapaneseAttention(nn.Module):
    def __init__(self, c, use_bias=False, layer_idx=None):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.hidden_size = c.hidden_size
        self.head_size = self.hidden_size // self.num_attention_heads
        self.layer_idx = layer_idx
        self.rotary_ndims = int(self.head_size * c.rotary_pct)
        self.rotary_emb = GPTNeoXJapaneseRotaryEmbedding(c)
        self.attention_dropout = nn.Dropout(c.attention_dropout)
        self.norm_factor = math.sqrt(self.head_size)
        self.query_key_value = nn.Linear(c.hidden_size, 3 * c.hidden_size, bias=False)
        self.dense = nn.Linear(c.hidden_size, c.hidden_size, bias=False)
        self.use_bias = use_bias
        self.dense_bias = nn.Parameter(torch.zeros(c.hidden_size)) if use_bias else None

    def forward(self, hidden_states, attention_mask, position_ids, head_mask=None, layer_past=None,
                use_cache=False, output_attentions=False, cache_position=None):
        qkv = self.query_key_value(hidden_states)
        qkv = qkv.view(*(qkv.size()[:-1] + (self.num_attention_heads, 3 * self.head_size)))
        query = qkv[..., : self.head_size].permute(0, 2, 1, 3)
        key = qkv[..., self.head_size: 2 * self.head_size].permute(0, 2, 1, 3)
        value = qkv[..., 2 * self.head_size:].permute(0, 2, 1, 3)
        query_rot = query[..., : self.rotary_ndims]
        query_pass = query[..., self.rotary_ndims:]
        key_rot = key[..., : self.rotary_ndims]
        key_pass = key[..., self.rotary_ndims:]
        cos, sin = self.rotary_emb(hidden_states, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        query = query_rot * cos + rotate_half(query_rot) * sin
        key = key_rot * cos + rotate_half(key_rot) * sin
        query = torch.cat((query, query_pass), dim=-1).contiguous()
        key = torch.cat((key, key_pass), dim=-1).contiguous()
        attn_output, attn_weights = self._attn(query, key, value, attention_mask, head_mask)
        attn_output = attn_output.permute(0, 2, 1, 3).contiguous()
        attn_output = attn_output.view(attn_output.size(0), attn_output.size(1), self.num_attention_heads * self.head_size)
        attn_output = self.dense(attn_output)
        return attn_output, attn_weights, self.dense_bias

    def _attn(self, query, key, value, attention_mask=None, head_mask=None):
        batch_size, num_attention_heads, query_length, attn_head_size = query.size()
        key_length = key.size(-2)
        query = query.view(batch_size * num_attention_heads, query_length, attn_head_size)
        key = key.view(batch_size * num_attention_heads, key_length, attn_head_size)
        attn_scores = torch.zeros(batch_size * num_attention_heads, query_length, key_length, dtype=query.dtype)
        attention_scores = torch.baddbmm(attn_scores, query, key.transpose(1, 2), beta=1.0,
                                         alpha=1.0 / self.norm_factor)
        attention_scores = attention_scores.view(batch_size, num_attention_heads, query_length, -1)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask[:, :, :, : key.shape[-2]]
        attn_weights = nn.functional.softmax(attention_scores, dim=-1)
        attn_weights = self.attention_dropout(attn_weights)
        attn_weights = attn_weights.to(value.dtype)
        if head_mask is not None:
            attn_weights = attn_weights * head_mask
        return torch.matmul(attn_weights, value), attn_weights


def bias_dropout_add(x, bias, residual, prob, training):
    if bias is not None:
        x = x + bias
    out = torch.nn.functional.dropout(x, p=prob, training=training)
    if residual is not None:
        out = residual + out
    return out


class GPTNeoXJapaneseMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        intermediate_size = int(c.hidden_size * c.intermediate_multiple_size)
        self.dense_h_to_4h = nn.Linear(c.hidden_size, intermediate_size, bias=False)
        self.dense_4h_to_h = nn.Linear(intermediate_size, c.hidden_size, bias=False)
        self.act = GELUActivation()

    def forward(self, hidden_states):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(hidden_states)))


class GELUActivation(nn.Module):
    def forward(self, input):
        return F.gelu(input)


class GPTNeoXJapaneseLayer(nn.Module):
    def __init__(self, c, layer_number):
        super().__init__()
        self.layer_number = layer_number
        self.input_layernorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        # the bias only in the last layer
        self.attention = GPTNeoXJapaneseAttention(c, use_bias=layer_number == c.num_hidden_layers - 1,
                                                  layer_idx=layer_number)
        self.mlp = GPTNeoXJapaneseMLP(c)
        self.hidden_dropout = c.hidden_dropout

    def forward(self, hidden_states, attention_mask=None, position_ids=None, head_mask=None, use_cache=False,
                layer_past=None, output_attentions=False, cache_position=None):
        residual = hidden_states
        ln_out = self.input_layernorm(hidden_states)
        attn_output, attn_weights, attn_bias = self.attention(
            ln_out, attention_mask=attention_mask, layer_past=layer_past, head_mask=head_mask,
            use_cache=use_cache, output_attentions=output_attentions, position_ids=position_ids,
            cache_position=cache_position)
        attn_output = bias_dropout_add(attn_output,
                                       bias=attn_bias.expand_as(residual) if attn_bias is not None else attn_bias,
                                       residual=residual, prob=self.hidden_dropout, training=self.training)
        mlp_output = self.mlp(self.post_attention_layernorm(attn_output))
        attn_output = bias_dropout_add(mlp_output, bias=None, residual=attn_output, prob=self.hidden_dropout,
                                       training=self.training)
        return attn_output, attn_weights


class GPTNeoXJapaneseModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.embed_in = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([GPTNeoXJapaneseLayer(c, i) for i in range(c.num_hidden_layers)])
        self.final_layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids):
        h = self.embed_in(input_ids)
        n = h.shape[1]
        cache_position = torch.arange(n)
        position_ids = cache_position.unsqueeze(0)
        mask = causal_mask(n, h.dtype)
        for layer in self.layers:
            outputs = layer(h, attention_mask=mask, position_ids=position_ids, head_mask=None, layer_past=None,
                            use_cache=False, output_attentions=False, cache_position=cache_position)
            h = outputs[0]
        return self.final_layer_norm(h)


# --- bamba -------------------------------------------------------------------------------


class BambaConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-5
    rope_theta = 10000.0
    partial_rotary_factor = 0.5
    layers_block_type = ["mamba", "attention"]
    mamba_n_heads = 4
    mamba_d_head = 16
    mamba_n_groups = 1
    mamba_d_state = 8
    mamba_d_conv = 4
    mamba_expand = 2
    mamba_chunk_size = 4
    time_step_limit = (0.0, float("inf"))


class BambaRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = int(c.head_dim * c.partial_rotary_factor)
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def bamba_rotary(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    rd = cos.shape[-1]
    q_rot, q_pass = q[..., :rd], q[..., rd:]
    k_rot, k_pass = k[..., :rd], k[..., rd:]
    q_embed = (q_rot * cos) + (rotate_half(q_rot) * sin)
    k_embed = (k_rot * cos) + (rotate_half(k_rot) * sin)
    return torch.cat([q_embed, q_pass], dim=-1), torch.cat([k_embed, k_pass], dim=-1)


class BambaAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        h, kv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.head_dim, self.groups = d, h // kv
        self.scaling = d ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = bamba_rotary(q, k, cos, sin)
        # SDPA (the default), its softmax written out; is_causal where no mask is passed
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        if attention_mask is None:
            attention_mask = causal_mask(q.shape[-2], q.dtype)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + attention_mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


class BambaRMSNormGated(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states, gate=None):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        if gate is not None:
            hidden_states = hidden_states * F.silu(gate.to(torch.float32))
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def pad_tensor_by_size(input_tensor, pad_size):
    pad_shape = (0, 0, 0, 0, 0, pad_size, 0, 0) if len(input_tensor.shape) == 4 else (0, 0, 0, pad_size, 0, 0)
    return F.pad(input_tensor, pad_shape, mode="constant", value=0)


def reshape_into_chunks(input_tensor, pad_size, chunk_size):
    input_tensor = pad_tensor_by_size(input_tensor, pad_size)
    if len(input_tensor.shape) == 3:
        return input_tensor.reshape(input_tensor.shape[0], -1, chunk_size, input_tensor.shape[2])
    return input_tensor.reshape(input_tensor.shape[0], -1, chunk_size, input_tensor.shape[2], input_tensor.shape[3])


def segment_sum(input_tensor):
    chunk_size = input_tensor.size(-1)
    input_tensor = input_tensor[..., None].expand(*input_tensor.size(), chunk_size)
    mask = torch.tril(torch.ones(chunk_size, chunk_size, dtype=torch.bool), diagonal=-1)
    input_tensor = input_tensor.masked_fill(~mask, 0)
    tensor_segsum = torch.cumsum(input_tensor, dim=-2)
    mask = torch.tril(torch.ones(chunk_size, chunk_size, dtype=torch.bool), diagonal=0)
    return tensor_segsum.masked_fill(~mask, -torch.inf)


def ssd_chunked(x, dt, A, B, C, D, chunk_size):
    """torch_forward's SSD scan (no cache): x [b, l, h, p], dt [b, l, h] (after softplus and
    clamp), A [h], B, C [b, l, h, n] (groups repeated), D [h]; returns y [b, l, h, p]."""
    batch_size, seq_len = x.shape[:2]
    num_heads, head_dim = x.shape[2], x.shape[3]
    pad_size = (chunk_size - seq_len % chunk_size) % chunk_size
    D_residual = D[..., None] * pad_tensor_by_size(x, pad_size)
    hidden_states = x * dt[..., None]
    A = A.to(hidden_states.dtype) * dt
    hidden_states, A, B, C = [reshape_into_chunks(t, pad_size, chunk_size) for t in (hidden_states, A, B, C)]
    A = A.permute(0, 3, 1, 2)
    A_cumsum = torch.cumsum(A, dim=-1)
    L = torch.exp(segment_sum(A))
    G_intermediate = C[:, :, :, None, :, :] * B[:, :, None, :, :, :]
    G = G_intermediate.sum(dim=-1)
    M_intermediate = G[..., None] * L.permute(0, 2, 3, 4, 1)[..., None]
    M = M_intermediate.sum(dim=-1)
    Y_diag = (M[..., None] * hidden_states[:, :, None]).sum(dim=3)
    decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
    B_decay = B * decay_states.permute(0, -2, -1, 1)[..., None]
    states = (B_decay[..., None, :] * hidden_states[..., None]).sum(dim=2)
    previous_states = torch.zeros_like(states[:, :1])
    states = torch.cat([previous_states, states], dim=1)
    decay_chunk = torch.exp(segment_sum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
    decay_chunk = decay_chunk.transpose(1, 3)
    new_states = (decay_chunk[..., None, None] * states[:, :, None, ...]).sum(dim=1)
    states = new_states[:, :-1]
    state_decay_out = torch.exp(A_cumsum)
    C_times_states = (C[..., None, :] * states[:, :, None, ...])
    state_decay_out_permuted = state_decay_out.permute(0, 2, 3, 1)
    Y_off = (C_times_states.sum(-1) * state_decay_out_permuted[..., None])
    y = Y_diag + Y_off
    y = y.reshape(batch_size, -1, num_heads, head_dim)
    y = y + D_residual
    if pad_size > 0:
        y = y[:, :seq_len, :, :]
    return y


class BambaMixer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.num_heads = c.mamba_n_heads
        self.hidden_size = c.hidden_size
        self.ssm_state_size = c.mamba_d_state
        self.conv_kernel_size = c.mamba_d_conv
        self.intermediate_size = int(c.mamba_expand * c.hidden_size)
        self.n_groups = c.mamba_n_groups
        self.head_dim = c.mamba_d_head
        self.chunk_size = c.mamba_chunk_size
        self.time_step_limit = c.time_step_limit
        self.conv_dim = self.intermediate_size + 2 * self.n_groups * self.ssm_state_size
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, bias=True, kernel_size=self.conv_kernel_size,
                                groups=self.conv_dim, padding=self.conv_kernel_size - 1)
        self.act = nn.SiLU()
        projection_size = self.intermediate_size + self.conv_dim + self.num_heads
        self.in_proj = nn.Linear(self.hidden_size, projection_size, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.num_heads))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, self.num_heads + 1).float()))
        self.norm = BambaRMSNormGated(self.intermediate_size, eps=c.rms_norm_eps)
        self.D = nn.Parameter(torch.ones(self.num_heads))
        self.out_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)

    def forward(self, hidden_states, cache_params=None, cache_position=None, attention_mask=None):
        # torch_forward without a cache (no mamba_ssm / causal_conv1d kernels)
        batch_size, seq_len, _ = hidden_states.shape
        dtype = hidden_states.dtype
        projected_states = self.in_proj(hidden_states)
        gate, hidden_states_B_C, dt = projected_states.split(
            [self.intermediate_size, self.conv_dim, self.num_heads], dim=-1)
        hidden_states_B_C = self.act(self.conv1d(hidden_states_B_C.transpose(1, 2))[..., :seq_len].transpose(1, 2))
        hidden_states, B, C = torch.split(
            hidden_states_B_C,
            [self.intermediate_size, self.n_groups * self.ssm_state_size, self.n_groups * self.ssm_state_size],
            dim=-1)
        A = -torch.exp(self.A_log.float())
        dt = F.softplus(dt + self.dt_bias)
        dt = torch.clamp(dt, self.time_step_limit[0], self.time_step_limit[1])
        hidden_states = hidden_states.reshape(batch_size, seq_len, -1, self.head_dim).float()
        B = B.reshape(batch_size, seq_len, -1, self.ssm_state_size).float()
        C = C.reshape(batch_size, seq_len, -1, self.ssm_state_size).float()
        B = B.repeat_interleave(self.num_heads // self.n_groups, dim=2)
        C = C.repeat_interleave(self.num_heads // self.n_groups, dim=2)
        y = ssd_chunked(hidden_states, dt, A, B, C, self.D, self.chunk_size)
        y = y.reshape(batch_size, seq_len, -1)
        scan_output = self.norm(y, gate)
        return self.out_proj(scan_output.to(dtype))


class BambaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class BambaDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx, layer_type="mamba"):
        super().__init__()
        self.feed_forward = BambaMLP(c)
        self.input_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.pre_ff_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.layer_type = layer_type
        if layer_type == "mamba":
            self.mamba = BambaMixer(c, layer_idx)
        else:
            self.self_attn = BambaAttention(c, layer_idx)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        if self.layer_type == "mamba":
            hidden_states = self.mamba(hidden_states=hidden_states, attention_mask=attention_mask)
        else:
            hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask,
                                              position_ids=position_ids, position_embeddings=position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.pre_ff_layernorm(hidden_states)
        hidden_states = self.feed_forward(hidden_states)
        return (residual + hidden_states,)


class BambaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([BambaDecoderLayer(c, i, t) for i, t in enumerate(c.layers_block_type)])
        self.final_layernorm = DiffLlamaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = BambaRotaryEmbedding(c)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        position_ids = torch.arange(h.shape[1])[None]
        pe = self.rotary_emb(h, position_ids=position_ids)
        for layer in self.layers:
            # no padding: the mamba mask is None, and SDPA's causal mask is None (is_causal)
            h = layer(h, attention_mask=None, position_ids=position_ids, position_embeddings=pe)[0]
        return self.final_layernorm(h)


# --- roformer ----------------------------------------------------------------------------


class RoFormerConfig:
    vocab_size = 64
    hidden_size = 32
    num_attention_heads = 2
    num_hidden_layers = 2
    intermediate_size = 48
    max_position_embeddings = 64
    type_vocab_size = 2
    layer_norm_eps = 1e-12


class RoFormerSinusoidalPositionalEmbedding(nn.Embedding):
    """An nn.Embedding read at arange(seq_len): handed the input's shape, no tensor. Its
    weight is the sinusoid table at init (sines in the first half, cosines in the second),
    frozen; randomize redraws it as it redraws every parameter, as the transformers
    captures do, so the trace's table is not on the unit circle."""

    def forward(self, input_ids_shape, past_key_values_length=0):
        bsz, seq_len = input_ids_shape[:2]
        position_ids = torch.arange(past_key_values_length, past_key_values_length + seq_len, dtype=torch.long)
        return super().forward(position_ids)


class RoFormerEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=0)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, input_ids, token_type_ids):
        inputs_embeds = self.word_embeddings(input_ids)
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(embeddings))


class RoFormerSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = c.hidden_size // c.num_attention_heads
        self.all_head_size = c.hidden_size
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, attention_mask=None, sinusoidal_pos=None):
        b = hidden_states.shape[0]
        split = lambda x: x.view(b, -1, self.num_attention_heads, self.attention_head_size).transpose(1, 2)
        query_layer = split(self.query(hidden_states))
        key_layer = split(self.key(hidden_states))
        value_layer = split(self.value(hidden_states))
        query_layer, key_layer = self.apply_rotary_position_embeddings(sinusoidal_pos, query_layer, key_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(*context_layer.size()[:-2], self.all_head_size)
        return context_layer, attention_probs

    @staticmethod
    def apply_rotary_position_embeddings(sinusoidal_pos, query_layer, key_layer):
        sin, cos = sinusoidal_pos.chunk(2, dim=-1)
        sin_pos = torch.stack([sin, sin], dim=-1).reshape_as(sinusoidal_pos)
        cos_pos = torch.stack([cos, cos], dim=-1).reshape_as(sinusoidal_pos)
        rotate_half_query_layer = torch.stack([-query_layer[..., 1::2], query_layer[..., ::2]], dim=-1).reshape_as(query_layer)
        query_layer = query_layer * cos_pos + rotate_half_query_layer * sin_pos
        rotate_half_key_layer = torch.stack([-key_layer[..., 1::2], key_layer[..., ::2]], dim=-1).reshape_as(key_layer)
        key_layer = key_layer * cos_pos + rotate_half_key_layer * sin_pos
        return query_layer, key_layer


class RoFormerAddNorm(nn.Module):
    """BertSelfOutput and BertOutput: dense, dropout, LayerNorm of the sum with the input."""

    def __init__(self, c, width_in):
        super().__init__()
        self.dense = nn.Linear(width_in, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class RoFormerAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = RoFormerSelfAttention(c)
        self.output = RoFormerAddNorm(c, c.hidden_size)

    def forward(self, hidden_states, attention_mask=None, sinusoidal_pos=None):
        self_outputs = self.self(hidden_states, attention_mask=attention_mask, sinusoidal_pos=sinusoidal_pos)
        return (self.output(self_outputs[0], hidden_states),) + self_outputs[1:]


class RoFormerIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class RoFormerLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = RoFormerAttention(c)
        self.intermediate = RoFormerIntermediate(c)
        self.output = RoFormerAddNorm(c, c.intermediate_size)

    def forward(self, hidden_states, attention_mask=None, sinusoidal_pos=None):
        attention_output = self.attention(hidden_states, attention_mask=attention_mask, sinusoidal_pos=sinusoidal_pos)[0]
        return (self.output(self.intermediate(attention_output), attention_output),)


class RoFormerEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_positions = RoFormerSinusoidalPositionalEmbedding(c.max_position_embeddings,
                                                                     c.hidden_size // c.num_attention_heads)
        self.layer = nn.ModuleList([RoFormerLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None):
        sinusoidal_pos = self.embed_positions(hidden_states.shape[:-1], 0)[None, None, :, :]
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask, sinusoidal_pos)[0]
        return hidden_states


class RoFormerModel(nn.Module):
    """embedding_size equals hidden_size (the config's default): no embeddings_project; no
    padding, so no attention mask reaches the layers (transformers 5.x passes None)."""

    def __init__(self, c):
        super().__init__()
        self.embeddings = RoFormerEmbeddings(c)
        self.encoder = RoFormerEncoder(c)

    def forward(self, input_ids):
        token_type_ids = torch.zeros_like(input_ids)
        return self.encoder(self.embeddings(input_ids, token_type_ids))


# --- mamba -------------------------------------------------------------------------------


class MambaConfig:
    hidden_size = 32
    vocab_size = 64
    num_hidden_layers = 2
    state_size = 8
    expand = 2
    conv_kernel = 4
    layer_norm_epsilon = 1e-5
    use_bias = False
    use_conv_bias = True
    residual_in_fp32 = True
    time_step_rank = math.ceil(32 / 16)


class MambaRMSNorm(DiffLlamaRMSNorm):
    """MambaRMSNorm: LlamaRMSNorm's arithmetic."""


class MambaMixer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.hidden_size = c.hidden_size
        self.ssm_state_size = c.state_size
        self.conv_kernel_size = c.conv_kernel
        self.intermediate_size = c.expand * c.hidden_size
        self.time_step_rank = c.time_step_rank
        self.conv1d = nn.Conv1d(self.intermediate_size, self.intermediate_size, bias=c.use_conv_bias,
                                kernel_size=c.conv_kernel, groups=self.intermediate_size, padding=c.conv_kernel - 1)
        self.act = nn.SiLU()
        self.in_proj = nn.Linear(self.hidden_size, self.intermediate_size * 2, bias=c.use_bias)
        self.x_proj = nn.Linear(self.intermediate_size, self.time_step_rank + self.ssm_state_size * 2, bias=False)
        self.dt_proj = nn.Linear(self.time_step_rank, self.intermediate_size, bias=True)
        A = torch.arange(1, self.ssm_state_size + 1, dtype=torch.float32)[None, :]
        A = A.expand(self.intermediate_size, -1).contiguous()
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(self.intermediate_size))
        self.out_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=c.use_bias)

    def forward(self, input_states, cache_params=None, cache_position=None, attention_mask=None):
        # slow_forward without a cache
        batch_size, seq_len, _ = input_states.shape
        dtype = input_states.dtype
        projected_states = self.in_proj(input_states).transpose(1, 2)
        hidden_states, gate = projected_states.chunk(2, dim=1)
        ssm_state = torch.zeros((batch_size, self.intermediate_size, self.ssm_state_size), dtype=dtype)
        hidden_states = self.act(self.conv1d(hidden_states)[..., :seq_len])
        ssm_parameters = self.x_proj(hidden_states.transpose(1, 2))
        time_step, B, C = torch.split(
            ssm_parameters, [self.time_step_rank, self.ssm_state_size, self.ssm_state_size], dim=-1)
        discrete_time_step = self.dt_proj(time_step)
        discrete_time_step = F.softplus(discrete_time_step).transpose(1, 2)
        A = -torch.exp(self.A_log.float())
        discrete_A = torch.exp(A[None, :, None, :] * discrete_time_step[:, :, :, None])
        discrete_B = discrete_time_step[:, :, :, None] * B[:, None, :, :].float()
        deltaB_u = discrete_B * hidden_states[:, :, :, None].float()
        scan_outputs = []
        for i in range(seq_len):
            ssm_state = discrete_A[:, :, i, :] * ssm_state + deltaB_u[:, :, i, :]
            scan_output = torch.matmul(ssm_state.to(dtype), C[:, i, :].unsqueeze(-1))
            scan_outputs.append(scan_output[:, :, 0])
        scan_output = torch.stack(scan_outputs, dim=-1)
        scan_output = scan_output + (hidden_states * self.D[None, :, None])
        scan_output = (scan_output * self.act(gate))
        return self.out_proj(scan_output.transpose(1, 2))


class MambaBlock(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.residual_in_fp32 = c.residual_in_fp32
        self.norm = MambaRMSNorm(c.hidden_size, eps=c.layer_norm_epsilon)
        self.mixer = MambaMixer(c, layer_idx)

    def forward(self, hidden_states, cache_params=None, cache_position=None, attention_mask=None):
        residual = hidden_states
        hidden_states = self.norm(hidden_states.to(dtype=self.norm.weight.dtype))
        if self.residual_in_fp32:
            residual = residual.to(torch.float32)
        hidden_states = self.mixer(hidden_states, attention_mask=attention_mask)
        return residual + hidden_states


class MambaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([MambaBlock(c, i) for i in range(c.num_hidden_layers)])
        self.norm_f = MambaRMSNorm(c.hidden_size, eps=c.layer_norm_epsilon)

    def forward(self, input_ids):
        h = self.embeddings(input_ids)
        for layer in self.layers:
            h = layer(h, attention_mask=None)
        return self.norm_f(h)


class MambaMixerKernelPath(MambaMixer):
    """The mixer as transformers 5.17 runs it on a machine without the mamba_ssm and
    causal_conv1d packages (the real traces of bench/unseen/capture_lm.py's fifth batch): the
    kernels' path with their PyTorch reference implementations, so no call of conv1d, act or
    dt_proj is captured. causal_conv1d_fn's reference is F.conv1d of the channels with the
    conv's own weight, the first seq_len outputs, SiLU; dt = dt_proj.weight @ time_stepᵀ with
    the bias added inside selective_scan_fn's reference (delta = softplus(delta + bias)),
    whose recurrence, D skip and z gate (y·silu(z)) are slow_forward's in f32. Written from the
    call boundaries the real 5.17 trace shows and the references' documented arithmetic; the
    upstream kernels' file was not read."""

    def forward(self, input_states, cache_params=None, cache_position=None, attention_mask=None):
        batch_size, seq_len, _ = input_states.shape
        projected_states = self.in_proj(input_states).transpose(1, 2)
        hidden_states, gate = projected_states.chunk(2, dim=1)
        w = self.conv1d.weight
        hidden_states = F.silu(F.conv1d(hidden_states, w, self.conv1d.bias, padding=w.shape[-1] - 1,
                                        groups=self.intermediate_size)[..., :seq_len])
        ssm_parameters = self.x_proj(hidden_states.transpose(1, 2))
        time_step, B, C = torch.split(
            ssm_parameters, [self.time_step_rank, self.ssm_state_size, self.ssm_state_size], dim=-1)
        discrete_time_step = self.dt_proj.weight @ time_step.transpose(1, 2)
        delta = F.softplus(discrete_time_step + self.dt_proj.bias.float()[None, :, None])
        A = -torch.exp(self.A_log.float())
        discrete_A = torch.exp(A[None, :, None, :] * delta[:, :, :, None])
        deltaB_u = delta[:, :, :, None] * B[:, None, :, :].float() * hidden_states[:, :, :, None].float()
        ssm_state = torch.zeros((batch_size, self.intermediate_size, self.ssm_state_size))
        ys = []
        for i in range(seq_len):
            ssm_state = discrete_A[:, :, i, :] * ssm_state + deltaB_u[:, :, i, :]
            ys.append(torch.matmul(ssm_state, C[:, i, :].unsqueeze(-1))[:, :, 0])
        y = torch.stack(ys, dim=-1) + hidden_states * self.D[None, :, None]
        y = y * F.silu(gate)
        return self.out_proj(y.transpose(1, 2))


class MambaKernelPathModel(MambaModel):
    def __init__(self, c):
        super().__init__(c)
        for i, layer in enumerate(self.layers):
            mixer = MambaMixerKernelPath(c, i)
            mixer.load_state_dict(layer.mixer.state_dict())
            layer.mixer = mixer


# --- nemotron_h --------------------------------------------------------------------------


class NemotronHConfig:
    hidden_size = 32
    vocab_size = 64
    layers_block_type = ["mamba", "mlp", "attention"]
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    intermediate_size = 48
    mlp_bias = False
    mamba_num_heads = 4
    mamba_head_dim = 16
    n_groups = 2
    ssm_state_size = 8
    conv_kernel = 4
    chunk_size = 4
    use_conv_bias = True
    use_bias = False
    time_step_min = 0.001
    layer_norm_epsilon = 1e-5


class Zamba2RMSNormGated(nn.Module):
    def __init__(self, hidden_size, group_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps
        self.group_size = group_size

    def forward(self, hidden_states, gate=None):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        if gate is not None:
            hidden_states = hidden_states * F.silu(gate.to(torch.float32))
        *prefix_dims, last_dim = hidden_states.shape
        group_count = last_dim // self.group_size
        hidden_states_group = hidden_states.view(*prefix_dims, group_count, self.group_size)
        variance = hidden_states_group.pow(2).mean(-1, keepdim=True)
        hidden_states_group = hidden_states_group * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = hidden_states_group.view(*prefix_dims, group_count * self.group_size)
        return self.weight * hidden_states.to(input_dtype)


class NemotronHMamba2Mixer(nn.Module):
    def __init__(self, c, layer_idx=None):
        super().__init__()
        self.hidden_size = c.hidden_size
        self.ssm_state_size = c.ssm_state_size
        self.conv_kernel_size = c.conv_kernel
        self.intermediate_size = c.mamba_num_heads * c.mamba_head_dim
        self.act = nn.SiLU()
        self.n_groups = c.n_groups
        self.head_dim = c.mamba_head_dim
        self.num_heads = c.mamba_num_heads
        self.chunk_size = c.chunk_size
        self.time_step_min = c.time_step_min
        self.conv_dim = self.intermediate_size + 2 * self.n_groups * self.ssm_state_size
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, bias=c.use_conv_bias, kernel_size=c.conv_kernel,
                                groups=self.conv_dim, padding=c.conv_kernel - 1)
        projection_size = self.intermediate_size + self.conv_dim + self.num_heads
        self.in_proj = nn.Linear(self.hidden_size, projection_size, bias=c.use_bias)
        self.dt_bias = nn.Parameter(torch.ones(self.num_heads))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, self.num_heads + 1).float()))
        self.norm = Zamba2RMSNormGated(self.intermediate_size, group_size=self.intermediate_size // self.n_groups,
                                       eps=c.layer_norm_epsilon)
        self.D = nn.Parameter(torch.ones(self.num_heads))
        self.out_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=c.use_bias)

    def forward(self, input_states, cache_params=None, attention_mask=None):
        # torch_forward without a cache, no attention mask
        batch_size, seq_len, _ = input_states.shape
        dtype = input_states.dtype
        projected_states = self.in_proj(input_states)
        d_mlp = (projected_states.shape[-1] - 2 * self.intermediate_size
                 - 2 * self.n_groups * self.ssm_state_size - self.num_heads) // 2
        _, _, gate, hidden_states, dt = projected_states.split(
            [d_mlp, d_mlp, self.intermediate_size, self.conv_dim, self.num_heads], dim=-1)
        hidden_states = hidden_states.transpose(1, 2)
        hidden_states = self.act(self.conv1d(hidden_states)[..., :seq_len].transpose(1, 2))
        hidden_states, B, C = torch.split(hidden_states, [self.intermediate_size, self.n_groups * self.ssm_state_size,
                                                          self.n_groups * self.ssm_state_size], dim=-1)
        A = -torch.exp(self.A_log.float())
        dt = F.softplus(dt + self.dt_bias)
        dt = torch.clamp(dt, self.time_step_min)
        hidden_states = hidden_states.reshape(batch_size, seq_len, -1, self.head_dim).float()
        B = B.reshape(batch_size, seq_len, -1, self.ssm_state_size).float()
        C = C.reshape(batch_size, seq_len, -1, self.ssm_state_size).float()
        B = B.repeat_interleave(self.num_heads // self.n_groups, dim=2)
        C = C.repeat_interleave(self.num_heads // self.n_groups, dim=2)
        pad_size = (self.chunk_size - seq_len % self.chunk_size) % self.chunk_size
        D_residual = self.D[..., None] * pad_tensor_by_size(hidden_states, pad_size)
        hidden_states = hidden_states * dt[..., None]
        A = A.to(hidden_states.dtype) * dt
        hidden_states, A, B, C = [reshape_into_chunks(t, pad_size, self.chunk_size) for t in (hidden_states, A, B, C)]
        A = A.permute(0, 3, 1, 2)
        A_cumsum = torch.cumsum(A, dim=-1)
        L = torch.exp(segment_sum(A))
        G_intermediate = C[:, :, :, None, :, :] * B[:, :, None, :, :, :]
        G = G_intermediate.sum(dim=-1)
        M_intermediate = G[..., None] * L.permute(0, 2, 3, 4, 1)[..., None]
        M = M_intermediate.sum(dim=-1)
        Y_diag = (M[..., None] * hidden_states[:, :, None]).sum(3)
        decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
        B_decay_contraction = B * decay_states.permute(0, 2, 3, 1)[..., None]
        states = (B_decay_contraction.permute(0, 1, 3, 2, 4)[..., None]
                  * hidden_states.permute(0, 1, 3, 2, 4)[..., None, :]).sum(dim=3).permute(0, 1, 2, 4, 3)
        previous_states = torch.zeros_like(states[:, :1])
        states = torch.cat([previous_states, states], dim=1)
        decay_chunk = torch.exp(segment_sum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
        states_permuted = states.permute(0, 2, 1, 3, 4)
        result = (decay_chunk[..., None, None] * states_permuted[:, :, None, ...]).sum(dim=2)
        new_states = result.permute(0, 2, 1, 3, 4)
        states = new_states[:, :-1]
        state_decay_out = torch.exp(A_cumsum)
        C_times_states = (C[..., None, :] * states[:, :, None, ...])
        state_decay_out_permuted = state_decay_out.permute(0, 2, 3, 1)
        Y_off = (C_times_states.sum(-1) * state_decay_out_permuted[..., None])
        y = Y_diag + Y_off
        y = y.reshape(batch_size, -1, self.num_heads, self.head_dim)
        y = y + D_residual
        if pad_size > 0:
            y = y[:, :seq_len, :, :]
        y = y.reshape(batch_size, seq_len, -1)
        scan_output = self.norm(y, gate)
        return self.out_proj(scan_output.to(dtype))


class NemotronHRMSNorm(DiffLlamaRMSNorm):
    """NemotronHRMSNorm: LlamaRMSNorm's arithmetic."""


class ReLUSquaredActivation(nn.Module):
    def forward(self, input):
        relu_applied = F.relu(input)
        return torch.square(relu_applied)


class NemotronHMLP(nn.Module):
    def __init__(self, c, intermediate_size=None, layer_idx=None):
        super().__init__()
        self.up_proj = nn.Linear(c.hidden_size, intermediate_size or c.intermediate_size, bias=c.mlp_bias)
        self.down_proj = nn.Linear(intermediate_size or c.intermediate_size, c.hidden_size, bias=c.mlp_bias)
        self.act_fn = ReLUSquaredActivation()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.up_proj(x)))


class NemotronHAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.head_dim = c.head_dim
        self.num_key_value_groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * self.head_dim, c.hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask=None, past_key_values=None, **kwargs):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        # SDPA (the default), its softmax written out; is_causal where no mask is passed
        k, v = repeat_kv(k, self.num_key_value_groups), repeat_kv(v, self.num_key_value_groups)
        if attention_mask is None:
            attention_mask = causal_mask(q.shape[-2], q.dtype)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + attention_mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


NEMOTRON_H_MIXERS = {"mamba": NemotronHMamba2Mixer, "attention": NemotronHAttention, "mlp": NemotronHMLP}


class NemotronHBlock(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.norm = NemotronHRMSNorm(c.hidden_size, eps=c.layer_norm_epsilon)
        self.block_type = c.layers_block_type[layer_idx]
        self.mixer = NEMOTRON_H_MIXERS[self.block_type](c, layer_idx=layer_idx)

    def forward(self, hidden_states, attention_mask=None, position_ids=None):
        residual = hidden_states
        hidden_states = self.norm(hidden_states.to(dtype=self.norm.weight.dtype))
        if self.block_type == "mamba":
            hidden_states = self.mixer(hidden_states, cache_params=None, attention_mask=attention_mask)
        elif self.block_type == "attention":
            hidden_states, _ = self.mixer(hidden_states=hidden_states, past_key_values=None,
                                          attention_mask=attention_mask, position_ids=position_ids)
        else:
            hidden_states = self.mixer(hidden_states)
        return residual + hidden_states


class NemotronHModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([NemotronHBlock(c, i) for i in range(len(c.layers_block_type))])
        self.norm_f = NemotronHRMSNorm(c.hidden_size, eps=c.layer_norm_epsilon)

    def forward(self, input_ids):
        h = self.embeddings(input_ids)
        position_ids = torch.arange(h.shape[1])[None]
        for layer in self.layers:
            # no padding: the mamba mask is None, and SDPA's causal mask is None (is_causal)
            h = layer(h, attention_mask=None, position_ids=position_ids)
        return self.norm_f(h)


# --- falcon_h1 ---------------------------------------------------------------------------


class FalconH1Config:
    hidden_size = 32
    vocab_size = 64
    num_hidden_layers = 2
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    intermediate_size = 48
    rms_norm_eps = 1e-5
    rope_theta = 10000.0
    mamba_d_ssm = 64
    mamba_n_heads = 4
    mamba_d_head = 16
    mamba_n_groups = 1
    mamba_d_state = 8
    mamba_d_conv = 4
    mamba_chunk_size = 4
    mamba_conv_bias = True
    mamba_proj_bias = False
    mamba_rms_norm = False
    projectors_bias = False
    time_step_limit = (0.0, float("inf"))
    embedding_multiplier = 1.0
    mlp_multipliers = [1.0, 1.0]
    key_multiplier = 1.0
    attention_out_multiplier = 1.0
    attention_in_multiplier = 1.0
    ssm_multipliers = [1.0, 1.0, 1.0, 1.0, 1.0]
    ssm_in_multiplier = 1.0
    ssm_out_multiplier = 1.0


class FalconH1MupConfig(FalconH1Config):
    embedding_multiplier = 5.5
    mlp_multipliers = [0.88, 0.59]
    key_multiplier = 0.39
    attention_out_multiplier = 0.94
    attention_in_multiplier = 0.9
    ssm_multipliers = [0.35, 0.25, 0.5, 0.75, 0.3]
    ssm_in_multiplier = 1.25
    ssm_out_multiplier = 0.24


def falcon_h1_mup_vector(c):
    intermediate_size = c.mamba_d_ssm
    groups_time_state_size = c.mamba_n_groups * c.mamba_d_state
    zxbcdt_multipliers = c.ssm_multipliers
    vector_shape = 2 * intermediate_size + 2 * groups_time_state_size + c.mamba_n_heads
    mup_vector = torch.ones(1, 1, vector_shape)
    mup_vector[:, :, :intermediate_size] *= zxbcdt_multipliers[0]
    mup_vector[:, :, intermediate_size:2 * intermediate_size] *= zxbcdt_multipliers[1]
    mup_vector[:, :, 2 * intermediate_size:2 * intermediate_size + groups_time_state_size] *= zxbcdt_multipliers[2]
    mup_vector[:, :, 2 * intermediate_size + groups_time_state_size:
               2 * intermediate_size + 2 * groups_time_state_size] *= zxbcdt_multipliers[3]
    mup_vector[:, :, 2 * intermediate_size + 2 * groups_time_state_size:] *= zxbcdt_multipliers[4]
    return mup_vector


class FalconH1Mixer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.num_heads = c.mamba_n_heads
        self.hidden_size = c.hidden_size
        self.ssm_state_size = c.mamba_d_state
        self.conv_kernel_size = c.mamba_d_conv
        self.intermediate_size = c.mamba_d_ssm
        self.act = nn.SiLU()
        self.n_groups = c.mamba_n_groups
        self.head_dim = c.mamba_d_head
        self.chunk_size = c.mamba_chunk_size
        self.time_step_limit = c.time_step_limit
        self.conv_dim = self.intermediate_size + 2 * self.n_groups * self.ssm_state_size
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, bias=c.mamba_conv_bias, kernel_size=self.conv_kernel_size,
                                groups=self.conv_dim, padding=self.conv_kernel_size - 1)
        projection_size = self.intermediate_size + self.conv_dim + self.num_heads
        self.in_proj = nn.Linear(self.hidden_size, projection_size, bias=c.mamba_proj_bias)
        self.dt_bias = nn.Parameter(torch.ones(self.num_heads))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, self.num_heads + 1).float()))
        self.mamba_rms_norm = c.mamba_rms_norm
        self.D = nn.Parameter(torch.ones(self.num_heads))
        self.out_proj = nn.Linear(self.intermediate_size, c.hidden_size, bias=c.projectors_bias)
        self.ssm_in_multiplier = c.ssm_in_multiplier

    def forward(self, hidden_states, cache_params=None, cache_position=None, attention_mask=None):
        # torch_forward without a cache, no attention mask
        input_states = hidden_states
        batch_size, seq_len, _ = input_states.shape
        dtype = input_states.dtype
        input_states = input_states * self.ssm_in_multiplier
        projected_states = self.in_proj(input_states)
        projected_states = projected_states * self.mup_vector
        gate, hidden_states_B_C, dt = projected_states.split(
            [self.intermediate_size, self.conv_dim, self.num_heads], dim=-1)
        hidden_states_B_C = self.act(self.conv1d(hidden_states_B_C.transpose(1, 2))[..., :seq_len].transpose(1, 2))
        hidden_states, B, C = torch.split(
            hidden_states_B_C,
            [self.intermediate_size, self.n_groups * self.ssm_state_size, self.n_groups * self.ssm_state_size],
            dim=-1)
        A = -torch.exp(self.A_log.float())
        dt = F.softplus(dt + self.dt_bias)
        dt = torch.clamp(dt, self.time_step_limit[0], self.time_step_limit[1])
        hidden_states = hidden_states.reshape(batch_size, seq_len, -1, self.head_dim).float()
        B = B.reshape(batch_size, seq_len, -1, self.ssm_state_size).float()
        C = C.reshape(batch_size, seq_len, -1, self.ssm_state_size).float()
        B = B.repeat_interleave(self.num_heads // self.n_groups, dim=2)
        C = C.repeat_interleave(self.num_heads // self.n_groups, dim=2)
        # the SSD below is the same code as bamba's torch_forward (ssd_chunked)
        y = ssd_chunked(hidden_states, dt, A, B, C, self.D, self.chunk_size)
        y = y.reshape(batch_size, seq_len, -1)
        scan_output = y * F.silu(gate)  # mamba_rms_norm False: no norm
        return self.out_proj(scan_output.to(dtype))


class FalconH1Attention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.head_dim = c.head_dim
        self.num_key_value_groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * self.head_dim, c.hidden_size, bias=False)
        self.key_multiplier = c.key_multiplier

    def forward(self, hidden_states, position_embeddings, attention_mask, **kwargs):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2) * self.key_multiplier
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = bamba_rotary(q, k, cos, sin)  # full rotary: rd is the head width
        # SDPA (the default), its softmax written out; is_causal where no mask is passed
        k, v = repeat_kv(k, self.num_key_value_groups), repeat_kv(v, self.num_key_value_groups)
        if attention_mask is None:
            attention_mask = causal_mask(q.shape[-2], q.dtype)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + attention_mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


class FalconH1MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = nn.SiLU()
        self.gate_multiplier, self.down_multiplier = c.mlp_multipliers

    def forward(self, x):
        y = self.up_proj(x) * self.act_fn(self.gate_proj(x) * self.gate_multiplier)
        y = self.down_proj(y) * self.down_multiplier
        return y


class FalconH1RMSNorm(DiffLlamaRMSNorm):
    """FalconH1RMSNorm: LlamaRMSNorm's arithmetic."""


class FalconH1DecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.feed_forward = FalconH1MLP(c)
        self.mamba = FalconH1Mixer(c, layer_idx)
        self.self_attn = FalconH1Attention(c, layer_idx)
        self.attention_in_multiplier = c.attention_in_multiplier
        self.ssm_out_multiplier = c.ssm_out_multiplier
        self.attn_out_multiplier = c.attention_out_multiplier
        self.input_layernorm = FalconH1RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.pre_ff_layernorm = FalconH1RMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, mamba_attention_mask=None, position_ids=None,
                position_embeddings=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        mamba_hidden_states = self.mamba(hidden_states=hidden_states, cache_params=None, cache_position=None,
                                         attention_mask=mamba_attention_mask)
        mamba_hidden_states = mamba_hidden_states * self.ssm_out_multiplier
        attention_hidden_states, _ = self.self_attn(hidden_states=hidden_states * self.attention_in_multiplier,
                                                    attention_mask=attention_mask, position_ids=position_ids,
                                                    position_embeddings=position_embeddings)
        attention_hidden_states = attention_hidden_states * self.attn_out_multiplier
        hidden_states = mamba_hidden_states + attention_hidden_states
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.pre_ff_layernorm(hidden_states)
        hidden_states = self.feed_forward(hidden_states)
        hidden_states = residual + hidden_states
        return (hidden_states,)


class FalconH1RotaryEmbedding(BambaRotaryEmbedding):
    """Llama's default RoPE: the whole head rotated (partial_rotary_factor 1)."""


class FalconH1Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([FalconH1DecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.final_layernorm = FalconH1RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        rc = type("RopeConfig", (), dict(head_dim=c.head_dim, partial_rotary_factor=1.0, rope_theta=c.rope_theta))
        self.rotary_emb = FalconH1RotaryEmbedding(rc)
        self.embedding_multiplier = c.embedding_multiplier
        mup_vector = falcon_h1_mup_vector(c)
        for layer in self.layers:
            layer.mamba.register_buffer("mup_vector", mup_vector.clone(), persistent=False)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids) * self.embedding_multiplier
        position_ids = torch.arange(h.shape[1])[None]
        pe = self.rotary_emb(h, position_ids=position_ids)
        for layer in self.layers:
            # no padding: the mamba mask is None, and SDPA's causal mask is None (is_causal)
            h = layer(h, attention_mask=None, mamba_attention_mask=None, position_ids=position_ids,
                      position_embeddings=pe)[0]
        return self.final_layernorm(h)


# --- jamba -------------------------------------------------------------------------------


class JambaConfig:
    hidden_size = 32
    vocab_size = 64
    num_attention_heads = 2
    num_key_value_heads = 1
    intermediate_size = 48
    rms_norm_eps = 1e-6
    layers = ["mamba", "attention"]
    mamba_d_state = 8
    mamba_d_conv = 4
    mamba_expand = 2
    mamba_dt_rank = math.ceil(32 / 16)
    mamba_conv_bias = True
    mamba_proj_bias = False


class JambaRMSNorm(DiffLlamaRMSNorm):
    """JambaRMSNorm: LlamaRMSNorm's arithmetic."""


class JambaMambaMixer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.hidden_size = c.hidden_size
        self.ssm_state_size = c.mamba_d_state
        self.conv_kernel_size = c.mamba_d_conv
        self.intermediate_size = c.mamba_expand * c.hidden_size
        self.time_step_rank = c.mamba_dt_rank
        self.conv1d = nn.Conv1d(self.intermediate_size, self.intermediate_size, bias=c.mamba_conv_bias,
                                kernel_size=self.conv_kernel_size, groups=self.intermediate_size,
                                padding=self.conv_kernel_size - 1)
        self.act = nn.SiLU()
        self.in_proj = nn.Linear(self.hidden_size, self.intermediate_size * 2, bias=c.mamba_proj_bias)
        self.x_proj = nn.Linear(self.intermediate_size, self.time_step_rank + self.ssm_state_size * 2, bias=False)
        self.dt_proj = nn.Linear(self.time_step_rank, self.intermediate_size, bias=True)
        A = torch.arange(1, self.ssm_state_size + 1)[None, :]
        A = A.expand(self.intermediate_size, -1).contiguous()
        self.A_log = nn.Parameter(torch.log(A.float()))
        self.D = nn.Parameter(torch.ones(self.intermediate_size))
        self.out_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=c.mamba_proj_bias)
        self.dt_layernorm = JambaRMSNorm(self.time_step_rank, eps=c.rms_norm_eps)
        self.b_layernorm = JambaRMSNorm(self.ssm_state_size, eps=c.rms_norm_eps)
        self.c_layernorm = JambaRMSNorm(self.ssm_state_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, cache_params=None, attention_mask=None):
        # slow_forward without a cache
        input_states = hidden_states
        batch_size, seq_len, _ = input_states.shape
        dtype = input_states.dtype
        projected_states = self.in_proj(input_states).transpose(1, 2)
        hidden_states, gate = projected_states.chunk(2, dim=1)
        ssm_state = torch.zeros((batch_size, self.intermediate_size, self.ssm_state_size), dtype=dtype)
        hidden_states = self.act(self.conv1d(hidden_states)[..., :seq_len])
        ssm_parameters = self.x_proj(hidden_states.transpose(1, 2))
        time_step, B, C = torch.split(
            ssm_parameters, [self.time_step_rank, self.ssm_state_size, self.ssm_state_size], dim=-1)
        time_step = self.dt_layernorm(time_step)
        B = self.b_layernorm(B)
        C = self.c_layernorm(C)
        discrete_time_step = self.dt_proj(time_step)
        discrete_time_step = F.softplus(discrete_time_step).transpose(1, 2)
        A = -torch.exp(self.A_log.float())
        discrete_A = torch.exp(A[None, :, None, :] * discrete_time_step[:, :, :, None])
        discrete_B = discrete_time_step[:, :, :, None] * B[:, None, :, :].float()
        deltaB_u = discrete_B * hidden_states[:, :, :, None].float()
        scan_outputs = []
        for i in range(seq_len):
            ssm_state = discrete_A[:, :, i, :] * ssm_state + deltaB_u[:, :, i, :]
            scan_output = torch.matmul(ssm_state.to(dtype), C[:, i, :].unsqueeze(-1))
            scan_outputs.append(scan_output[:, :, 0])
        scan_output = torch.stack(scan_outputs, dim=-1)
        scan_output = scan_output + (hidden_states * self.D[None, :, None])
        scan_output = (scan_output * self.act(gate))
        return self.out_proj(scan_output.transpose(1, 2))


class JambaAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.head_dim = c.hidden_size // c.num_attention_heads
        self.num_key_value_groups = c.num_attention_heads // c.num_key_value_heads
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * self.head_dim, c.hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask=None, **kwargs):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        # SDPA (the default), its softmax written out; is_causal where no mask is passed
        k, v = repeat_kv(k, self.num_key_value_groups), repeat_kv(v, self.num_key_value_groups)
        if attention_mask is None:
            attention_mask = causal_mask(q.shape[-2], q.dtype)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim) + attention_mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


class JambaMLP(BambaMLP):
    """JambaMLP: MistralMLP, down(act(gate(x)) · up(x))."""


class JambaDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.kind = c.layers[layer_idx]
        if self.kind == "mamba":
            self.mamba = JambaMambaMixer(c, layer_idx)
        else:
            self.self_attn = JambaAttention(c, layer_idx)
        self.feed_forward = JambaMLP(c)
        self.input_layernorm = JambaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.pre_ff_layernorm = JambaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        if self.kind == "mamba":
            hidden_states = self.mamba(hidden_states=hidden_states, cache_params=None, attention_mask=attention_mask)
        else:
            hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.pre_ff_layernorm(hidden_states)
        hidden_states = self.feed_forward(hidden_states)
        return (residual + hidden_states,)


class JambaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([JambaDecoderLayer(c, i) for i in range(len(c.layers))])
        self.final_layernorm = JambaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            # no padding: the mamba mask is None, and SDPA's causal mask is None (is_causal)
            h = layer(h, attention_mask=None)[0]
        return self.final_layernorm(h)


# --- falcon_mamba --------------------------------------------------------------------------


class FalconMambaConfig(MambaConfig):
    mixer_rms_eps = 1e-6


def rms_forward(hidden_states, variance_epsilon=1e-6):
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(torch.float32)
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + variance_epsilon)
    return hidden_states.to(input_dtype)


class FalconMambaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        return self.weight * rms_forward(hidden_states, variance_epsilon=self.variance_epsilon)


class FalconMambaMixer(MambaMixer):
    def __init__(self, c, layer_idx):
        super().__init__(c, layer_idx)
        self.rms_eps = c.mixer_rms_eps

    def forward(self, input_states, cache_params=None, cache_position=None, attention_mask=None):
        # slow_forward without a cache
        batch_size, seq_len, _ = input_states.shape
        dtype = input_states.dtype
        projected_states = self.in_proj(input_states).transpose(1, 2)
        hidden_states, gate = projected_states.chunk(2, dim=1)
        ssm_state = torch.zeros((batch_size, self.intermediate_size, self.ssm_state_size), dtype=dtype)
        hidden_states = self.act(self.conv1d(hidden_states)[..., :seq_len])
        ssm_parameters = self.x_proj(hidden_states.transpose(1, 2))
        time_step, B, C = torch.split(
            ssm_parameters, [self.time_step_rank, self.ssm_state_size, self.ssm_state_size], dim=-1)
        B = rms_forward(B, variance_epsilon=self.rms_eps)
        C = rms_forward(C, variance_epsilon=self.rms_eps)
        time_step = rms_forward(time_step, variance_epsilon=self.rms_eps)
        discrete_time_step = self.dt_proj(time_step)
        discrete_time_step = F.softplus(discrete_time_step).transpose(1, 2)
        A = -torch.exp(self.A_log.float())
        discrete_A = torch.exp(A[None, :, None, :] * discrete_time_step[:, :, :, None])
        discrete_B = discrete_time_step[:, :, :, None] * B[:, None, :, :].float()
        deltaB_u = discrete_B * hidden_states[:, :, :, None].float()
        scan_outputs = []
        for i in range(seq_len):
            ssm_state = discrete_A[:, :, i, :] * ssm_state + deltaB_u[:, :, i, :]
            scan_output = torch.matmul(ssm_state.to(dtype), C[:, i, :].unsqueeze(-1))
            scan_outputs.append(scan_output[:, :, 0])
        scan_output = torch.stack(scan_outputs, dim=-1)
        scan_output = scan_output + (hidden_states * self.D[None, :, None])
        scan_output = scan_output * self.act(gate)
        return self.out_proj(scan_output.transpose(1, 2))


class FalconMambaBlock(MambaBlock):
    def __init__(self, c, layer_idx):
        super().__init__(c, layer_idx)
        self.norm = FalconMambaRMSNorm(c.hidden_size, eps=c.layer_norm_epsilon)
        self.mixer = FalconMambaMixer(c, layer_idx)


class FalconMambaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([FalconMambaBlock(c, i) for i in range(c.num_hidden_layers)])
        self.norm_f = FalconMambaRMSNorm(c.hidden_size, eps=c.layer_norm_epsilon)

    def forward(self, input_ids):
        h = self.embeddings(input_ids)
        for layer in self.layers:
            h = layer(h, attention_mask=None)
        return self.norm_f(h)

class RecurrentGemmaConfig:
    hidden_size = 32
    lru_width = 32
    vocab_size = 64
    num_attention_heads = 2
    intermediate_size = 96
    conv1d_width = 4
    rms_norm_eps = 1e-6
    layers_block_type = ["recurrent", "recurrent"]


class RecurrentGemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class GELUTanh(nn.Module):
    """transformers.activations.GELUTanh (gelu_pytorch_tanh)."""

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


class RecurrentGemmaRglru(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.block_width = c.lru_width // self.num_attention_heads
        self.recurrent_param = nn.Parameter(torch.empty([c.lru_width]))
        self.input_gate_weight = nn.Parameter(torch.empty([self.num_attention_heads, self.block_width, self.block_width]))
        self.input_gate_bias = nn.Parameter(torch.empty([self.num_attention_heads, self.block_width]))
        self.recurrent_gate_weight = nn.Parameter(torch.empty([self.num_attention_heads, self.block_width, self.block_width]))
        self.recurrent_gate_bias = nn.Parameter(torch.empty([self.num_attention_heads, self.block_width]))
        self.recurrent_states = None

    def forward(self, activations, position_ids):
        batch_size, seq_len, lru_width = activations.shape
        reset = position_ids[:, :, None] == 0
        reshape_act = activations.reshape(batch_size * seq_len, self.num_attention_heads, self.block_width)
        reshape_act = reshape_act.permute(1, 0, 2)
        res = torch.baddbmm(self.input_gate_bias[:, None, :], reshape_act, self.input_gate_weight)
        input_gate = torch.sigmoid(res.transpose(0, 1).reshape(batch_size, seq_len, lru_width))
        res = torch.baddbmm(self.recurrent_gate_bias[:, None, :], reshape_act, self.recurrent_gate_weight)
        recurrent_gate = torch.sigmoid(res.transpose(0, 1).reshape(batch_size, seq_len, lru_width))
        log_recurrent_gate = -8.0 * recurrent_gate * F.softplus(self.recurrent_param)
        recurrent_gate = torch.exp(log_recurrent_gate)
        a_square = torch.exp(2 * log_recurrent_gate)
        gated_inputs = activations * input_gate
        multiplier = torch.sqrt(1 - a_square)  # SqrtBoundDerivative's forward
        multiplier = reset + ~reset * multiplier
        normalized_x = gated_inputs * multiplier.type(activations.dtype)
        hidden_states, recurrent_states = self._rnn_scan(normalized_x, recurrent_gate, reset, self.recurrent_states)
        self.recurrent_states = recurrent_states
        return hidden_states

    def _rnn_scan(self, hidden_states, recurrent_gate, reset, recurrent_states, acc_dtype=torch.float32):
        # the linear mode (seq_len > 1) without a cache
        recurrent_gate = recurrent_gate * ~reset
        recurrent_states = torch.zeros(hidden_states[:, 0].shape, dtype=acc_dtype, device=hidden_states.device)
        contextualized_states = torch.zeros_like(hidden_states)
        for t in range(hidden_states.shape[1]):
            recurrent_states = recurrent_gate[:, t].type(acc_dtype) * recurrent_states
            recurrent_states = recurrent_states + hidden_states[:, t].type(acc_dtype)
            contextualized_states[:, t] = recurrent_states.type(hidden_states.dtype)
        return contextualized_states, recurrent_states


class RecurrentGemmaRecurrentBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.lru_width = c.lru_width
        self.hidden_size = c.hidden_size
        self.linear_y = nn.Linear(in_features=c.hidden_size, out_features=c.lru_width)
        self.linear_x = nn.Linear(in_features=c.hidden_size, out_features=c.lru_width)
        self.linear_out = nn.Linear(in_features=c.lru_width, out_features=c.hidden_size)
        self.conv1d_width = c.conv1d_width
        self.conv_1d = nn.Conv1d(c.lru_width, c.lru_width, kernel_size=c.conv1d_width, groups=c.lru_width,
                                 padding=c.conv1d_width - 1)
        self.rg_lru = RecurrentGemmaRglru(c)
        self.act_fn = GELUTanh()
        self.conv1d_state = None

    def forward(self, input_states, position_ids=None, attention_mask=None, use_cache=False, past_key_values=None):
        # use_cache False: no conv or recurrent state kept
        _, seq_len, _ = input_states.shape
        y_branch = self.linear_y(input_states)
        y_branch = self.act_fn(y_branch)
        x_branch = self.linear_x(input_states)
        x_branch = x_branch.transpose(1, 2)
        self.conv1d_state = None
        self.rg_lru.recurrent_states = None
        x_branch = self.conv_1d(x_branch)[..., :seq_len]
        x_branch = self.rg_lru(x_branch.transpose(1, 2), position_ids)
        hidden_states = x_branch * y_branch
        hidden_states = self.linear_out(hidden_states)
        return hidden_states, None


class RecurrentGemmaMlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.intermediate_size = c.intermediate_size // 2
        self.gate_proj = nn.Linear(c.hidden_size, self.intermediate_size, bias=True)
        self.up_proj = nn.Linear(c.hidden_size, self.intermediate_size, bias=True)
        self.down_proj = nn.Linear(self.intermediate_size, c.hidden_size, bias=True)
        self.act_fn = GELUTanh()

    def forward(self, hidden_states):
        gate = self.act_fn(self.gate_proj(hidden_states))
        return self.down_proj(gate * self.up_proj(hidden_states))


class RecurrentGemmaDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.temporal_pre_norm = RecurrentGemmaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.temporal_block = RecurrentGemmaRecurrentBlock(c)
        self.channel_pre_norm = RecurrentGemmaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.mlp_block = RecurrentGemmaMlp(c)

    def forward(self, activations, position_ids, attention_mask, use_cache=False, past_key_values=None):
        raw_activations = activations
        inputs_normalized = self.temporal_pre_norm(raw_activations)
        hidden_states, _ = self.temporal_block(inputs_normalized, position_ids=position_ids,
                                               attention_mask=attention_mask, use_cache=use_cache,
                                               past_key_values=past_key_values)
        residual = hidden_states + raw_activations
        hidden_states = self.channel_pre_norm(residual)
        hidden_states = self.mlp_block(hidden_states)
        return hidden_states + residual


class RecurrentGemmaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([RecurrentGemmaDecoderLayer(c, i) for i in range(len(c.layers_block_type))])
        self.final_norm = RecurrentGemmaRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.register_buffer("normalizer", torch.tensor(c.hidden_size ** 0.5, dtype=torch.bfloat16), persistent=False)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0)
        hidden_states = hidden_states * self.normalizer.type(hidden_states.dtype)
        for layer in self.layers:
            # no attention layer here: the causal mask reaches the layers as None
            hidden_states = layer(hidden_states, position_ids, None, False, None)
        return self.final_norm(hidden_states)


class RwkvConfig:
    hidden_size = 32
    attention_hidden_size = 32
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    layer_norm_epsilon = 1e-5
    rescale_every = 6


def rwkv_linear_attention_cpu(time_decay, time_first, key, value):
    # without a state (use_cache False): the running maximum keeps the exponentials in range
    _, seq_length, _ = key.size()
    output = torch.zeros_like(key)
    num_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
    den_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
    max_state = torch.zeros_like(key[:, 0], dtype=torch.float32) - 1e38
    time_decay = -torch.exp(time_decay)
    for current_index in range(seq_length):
        current_key = key[:, current_index].float()
        current_value = value[:, current_index]
        max_for_output = torch.maximum(max_state, current_key + time_first)
        e1 = torch.exp(max_state - max_for_output)
        e2 = torch.exp(current_key + time_first - max_for_output)
        numerator = e1 * num_state + e2 * current_value
        denominator = e1 * den_state + e2
        output[:, current_index] = (numerator / denominator).to(output.dtype)
        max_for_state = torch.maximum(max_state + time_decay, current_key)
        e1 = torch.exp(max_state + time_decay - max_for_state)
        e2 = torch.exp(current_key - max_for_state)
        num_state = e1 * num_state + e2 * current_value
        den_state = e1 * den_state + e2
        max_state = max_for_state
    return output, None


class RwkvSelfAttention(nn.Module):
    def __init__(self, c, layer_id=0):
        super().__init__()
        self.layer_id = layer_id
        hidden_size = c.hidden_size
        attention_hidden_size = c.attention_hidden_size
        self.attention_hidden_size = attention_hidden_size
        self.time_decay = nn.Parameter(torch.empty(attention_hidden_size))
        self.time_first = nn.Parameter(torch.empty(attention_hidden_size))
        self.time_mix_key = nn.Parameter(torch.empty(1, 1, hidden_size))
        self.time_mix_value = nn.Parameter(torch.empty(1, 1, hidden_size))
        self.time_mix_receptance = nn.Parameter(torch.empty(1, 1, hidden_size))
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.key = nn.Linear(hidden_size, attention_hidden_size, bias=False)
        self.value = nn.Linear(hidden_size, attention_hidden_size, bias=False)
        self.receptance = nn.Linear(hidden_size, attention_hidden_size, bias=False)
        self.output = nn.Linear(attention_hidden_size, hidden_size, bias=False)

    def extract_key_value(self, hidden, state=None):
        shifted = self.time_shift(hidden)
        key = hidden * self.time_mix_key + shifted * (1 - self.time_mix_key)
        value = hidden * self.time_mix_value + shifted * (1 - self.time_mix_value)
        receptance = hidden * self.time_mix_receptance + shifted * (1 - self.time_mix_receptance)
        key = self.key(key)
        value = self.value(value)
        receptance = torch.sigmoid(self.receptance(receptance))
        return receptance, key, value, state

    def forward(self, hidden, state=None, use_cache=False):
        receptance, key, value, state = self.extract_key_value(hidden, state=state)
        rwkv, _ = rwkv_linear_attention_cpu(self.time_decay, self.time_first, key, value)
        return self.output(receptance * rwkv), state


class RwkvFeedForward(nn.Module):
    def __init__(self, c, layer_id=0):
        super().__init__()
        self.layer_id = layer_id
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.time_mix_key = nn.Parameter(torch.empty(1, 1, c.hidden_size))
        self.time_mix_receptance = nn.Parameter(torch.empty(1, 1, c.hidden_size))
        self.key = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.receptance = nn.Linear(c.hidden_size, c.hidden_size, bias=False)
        self.value = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, hidden, state=None):
        shifted = self.time_shift(hidden)
        key = hidden * self.time_mix_key + shifted * (1 - self.time_mix_key)
        receptance = hidden * self.time_mix_receptance + shifted * (1 - self.time_mix_receptance)
        key = torch.square(torch.relu(self.key(key)))
        value = self.value(key)
        receptance = torch.sigmoid(self.receptance(receptance))
        return receptance * value, state


class RwkvBlock(nn.Module):
    def __init__(self, c, layer_id):
        super().__init__()
        self.layer_id = layer_id
        if layer_id == 0:
            self.pre_ln = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_epsilon)
        self.ln1 = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_epsilon)
        self.ln2 = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_epsilon)
        self.attention = RwkvSelfAttention(c, layer_id)
        self.feed_forward = RwkvFeedForward(c, layer_id)

    def forward(self, hidden, state=None, use_cache=False, output_attentions=False):
        if self.layer_id == 0:
            hidden = self.pre_ln(hidden)
        attention, state = self.attention(self.ln1(hidden), state=state, use_cache=use_cache)
        hidden = hidden + attention
        feed_forward, state = self.feed_forward(self.ln2(hidden), state=state)
        hidden = hidden + feed_forward
        return (hidden, state, None)


class RwkvModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.blocks = nn.ModuleList([RwkvBlock(c, layer_id=i) for i in range(c.num_hidden_layers)])
        self.ln_out = nn.LayerNorm(c.hidden_size)

    def forward(self, input_ids):
        # eval with 2 blocks: _rescale_layers divides by 2 ** (block_id // 6) = 1, and no
        # (idx + 1) % rescale_every == 0 halves the hidden states
        hidden_states = self.embeddings(input_ids)
        state = None
        for idx, block in enumerate(self.blocks):
            hidden_states, state, _ = block(hidden_states, state=state, use_cache=False, output_attentions=False)
            if self.config.rescale_every > 0 and (idx + 1) % self.config.rescale_every == 0:
                hidden_states = hidden_states / 2
        return self.ln_out(hidden_states)


class MiniMaxConfig:
    hidden_size = 32
    num_attention_heads = 4
    num_key_value_heads = 2
    head_dim = 8
    intermediate_size = 48
    num_local_experts = 4
    num_experts_per_tok = 2
    vocab_size = 64
    num_hidden_layers = 2
    layer_types = ["linear_attention", "full_attention"]
    block_size = 4
    rms_norm_eps = 1e-5
    rope_theta = 1000000.0
    full_attn_alpha_factor = 1.0
    full_attn_beta_factor = 1.0
    linear_attn_alpha_factor = 1.0
    linear_attn_beta_factor = 1.0
    mlp_alpha_factor = 1.0
    mlp_beta_factor = 1.0


class MiniMaxRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class MiniMaxLightningAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = c.head_dim
        self.num_attention_heads = c.num_attention_heads
        self.num_hidden_layers = c.num_hidden_layers
        self.block_size = c.block_size
        self.act_fn = nn.SiLU()
        self.norm = MiniMaxRMSNorm(self.head_dim * self.num_attention_heads)
        self.qkv_proj = nn.Linear(c.hidden_size, self.num_attention_heads * self.head_dim * 3, bias=False)
        self.out_proj = nn.Linear(self.num_attention_heads * self.head_dim, c.hidden_size, bias=False)
        self.output_gate = nn.Linear(c.hidden_size, self.num_attention_heads * self.head_dim, bias=False)
        slope_rate = self.get_slope_rate()
        query_decay, key_decay, diagonal_decay = self.decay_factors(slope_rate)
        self.register_buffer("slope_rate", slope_rate)
        self.register_buffer("query_decay", query_decay)
        self.register_buffer("key_decay", key_decay)
        self.register_buffer("diagonal_decay", diagonal_decay)

    def get_slope_rate(self):
        base = 1 / (2 ** (8 / self.num_attention_heads))
        exponent = torch.arange(self.num_attention_heads) + 1
        factor = 1 - self.layer_idx / (self.num_hidden_layers - 1 + 1e-5) + 1e-5
        rate = base ** exponent
        rate = rate * factor
        return rate[:, None, None]

    def decay_factors(self, slope_rate):
        block_size_range = torch.arange(self.block_size) + 1
        query_decay = torch.exp(-slope_rate * block_size_range[:, None])
        key_decay = torch.exp(-slope_rate * (self.block_size - block_size_range[:, None]))
        diagonal_decay = block_size_range[:, None] - block_size_range[None, :]
        diagonal_decay = diagonal_decay[None, None, :, :]
        diagonal_decay = slope_rate * diagonal_decay
        diagonal_decay = torch.where(diagonal_decay >= 0, -diagonal_decay, float("-inf"))
        diagonal_decay = torch.exp(diagonal_decay)
        return query_decay, key_decay, diagonal_decay

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids=None, past_key_values=None,
                use_cache=False):
        # no cache: the blockwise path from a zero kv state
        batch_size, seq_len, hidden_size = hidden_states.shape
        num_blocks = (seq_len + self.block_size - 1) // self.block_size
        qkv_states = self.act_fn(self.qkv_proj(hidden_states))
        qkv_states = qkv_states.reshape(batch_size, seq_len, self.num_attention_heads, 3 * self.head_dim)
        query_states, key_states, value_states = torch.split(qkv_states, self.head_dim, dim=3)
        query_states = query_states.transpose(1, 2)
        key_states = key_states.transpose(1, 2)
        value_states = value_states.transpose(1, 2)
        attn_weights_inter = torch.zeros(batch_size, self.num_attention_heads, self.head_dim, self.head_dim).to(
            value_states)
        attn_output = []
        for i in range(num_blocks):
            start_idx = i * self.block_size
            end_idx = min(start_idx + self.block_size, seq_len)
            current_block_size = end_idx - start_idx
            current_query_states = query_states[:, :, start_idx:end_idx]
            current_key_states = key_states[:, :, start_idx:end_idx]
            current_value_states = value_states[:, :, start_idx:end_idx]
            current_query_decay = self.query_decay[:, :current_block_size]
            current_key_decay = self.key_decay[:, -current_block_size:]
            current_diagonal_decay = self.diagonal_decay[:, :, :current_block_size, :current_block_size]
            block_decay = torch.exp(-self.slope_rate * current_block_size)
            attn_weights_intra = torch.matmul(current_query_states, current_key_states.transpose(-1, -2))
            attn_output_intra = torch.matmul(attn_weights_intra * current_diagonal_decay, current_value_states)
            attn_output_inter = torch.matmul(current_query_states * current_query_decay, attn_weights_inter)
            current_attn_output = attn_output_inter + attn_output_intra
            attn_output.append(current_attn_output)
            next_attn_weights_inter = torch.matmul(
                (current_key_states * current_key_decay).transpose(-1, -2), current_value_states)
            attn_weights_inter = attn_weights_inter * block_decay + next_attn_weights_inter
        attn_output = torch.cat(attn_output, dim=-2)
        attn_output = attn_output.transpose(1, 2)
        attn_output = attn_output.reshape(batch_size, seq_len, self.num_attention_heads * self.head_dim)
        attn_output = self.norm(attn_output)
        attn_output = torch.sigmoid(self.output_gate(hidden_states)) * attn_output
        attn_output = self.out_proj(attn_output)
        return attn_output, attn_weights_inter


class MiniMaxRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = c.head_dim
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.attention_scaling = 1.0
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class MiniMaxAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        h, kv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.head_dim, self.num_key_value_groups = d, h // kv
        self.scaling = d ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, kv * d, bias=False)
        self.o_proj = nn.Linear(h * d, c.hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids=None, past_key_values=None,
                use_cache=False):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        # SDPA (the default), its softmax written out; is_causal where no mask is passed
        k, v = repeat_kv(k, self.num_key_value_groups), repeat_kv(v, self.num_key_value_groups)
        if attention_mask is None:
            attention_mask = causal_mask(q.shape[-2], q.dtype)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling + attention_mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


class MiniMaxTopKRouter(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.top_k = c.num_experts_per_tok
        self.num_experts = c.num_local_experts
        self.hidden_dim = c.hidden_size
        self.weight = nn.Parameter(torch.empty(self.num_experts, self.hidden_dim))

    def forward(self, hidden_states):
        hidden_states = hidden_states.reshape(-1, self.hidden_dim)
        # transformers 5.17's router: out.0 the logits, not the probabilities
        router_logits = F.linear(hidden_states, self.weight)
        router_probs = torch.nn.functional.softmax(router_logits.float(), dim=-1)
        router_top_value, router_indices = torch.topk(router_probs, self.top_k, dim=-1)
        router_top_value /= router_top_value.sum(dim=-1, keepdim=True)
        router_scores = router_top_value
        return router_logits, router_scores, router_indices


class MiniMaxExperts(PhimoeExperts):
    """MiniMaxExperts: MixtralExperts' weights and arithmetic (gate_up_proj [E, 2I, D], gate then up);
    act_fn called once over every (token, pick) pair, as the real trace shows ([T·k, I])."""


class MiniMaxSparseMoeBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate = MiniMaxTopKRouter(c)
        self.experts = MiniMaxExperts(c)

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_states.shape[-1])
        _, top_k_weights, top_k_index = self.gate(hidden_states)
        hidden_states = self.experts(hidden_states, top_k_index, top_k_weights)
        return hidden_states.reshape(batch_size, sequence_length, hidden_dim)


class MiniMaxDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.input_layernorm = MiniMaxRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = MiniMaxRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.layer_type = c.layer_types[layer_idx]
        self.mlp_alpha_factor = c.mlp_alpha_factor
        self.mlp_beta_factor = c.mlp_beta_factor
        self.mlp = MiniMaxSparseMoeBlock(c)
        if self.layer_type == "linear_attention":
            self.self_attn = MiniMaxLightningAttention(c, layer_idx)
            self.attn_alpha_factor = c.linear_attn_alpha_factor
            self.attn_beta_factor = c.linear_attn_beta_factor
        else:
            self.self_attn = MiniMaxAttention(c, layer_idx)
            self.attn_alpha_factor = c.full_attn_alpha_factor
            self.attn_beta_factor = c.full_attn_beta_factor

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, position_ids=None,
                past_key_values=None, use_cache=False):
        hidden_states = self.input_layernorm(hidden_states)
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, position_embeddings=position_embeddings,
                                          attention_mask=attention_mask, position_ids=position_ids,
                                          past_key_values=past_key_values, use_cache=use_cache)
        hidden_states = residual * self.attn_alpha_factor + hidden_states * self.attn_beta_factor
        hidden_states = self.post_attention_layernorm(hidden_states)
        residual = hidden_states
        hidden_states = self.mlp(hidden_states)
        return residual * self.mlp_alpha_factor + hidden_states * self.mlp_beta_factor


class MiniMaxModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([MiniMaxDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = MiniMaxRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = MiniMaxRotaryEmbedding(c)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(hidden_states.shape[1])[None]
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for decoder_layer in self.layers:
            # no padding: the full-attention layers get no mask tensor (SDPA's is_causal), the
            # lightning layers the original attention_mask, None
            hidden_states = decoder_layer(hidden_states, attention_mask=None, position_embeddings=position_embeddings,
                                          position_ids=position_ids, past_key_values=None, use_cache=False)
        return self.norm(hidden_states)


class Qwen3NextConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    partial_rotary_factor = 0.25
    rope_theta = 10000.0
    linear_num_value_heads = 4
    linear_num_key_heads = 2
    linear_key_head_dim = 8
    linear_value_head_dim = 8
    linear_conv_kernel_dim = 4
    num_experts = 4
    num_experts_per_tok = 2
    norm_topk_prob = True
    moe_intermediate_size = 16
    shared_expert_intermediate_size = 24
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    # a full-attention layer after the linear one, so that the gated softmax attention shows (the config's
    # default for two layers, full_attention_interval 4, makes both linear, as the real 5.17 traces hold them)
    layer_types = ["linear_attention", "full_attention"]
    rms_norm_eps = 1e-6


class Qwen3NextRMSNormGated(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states, gate):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        # norm before gate
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight * hidden_states.to(input_dtype)
        hidden_states = hidden_states * F.silu(gate.to(torch.float32))
        return hidden_states.to(input_dtype)


class Qwen3NextRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = int(c.head_dim * c.partial_rotary_factor)
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.attention_scaling = 1.0
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.register_buffer("original_inv_freq", inv_freq.clone(), persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class Qwen3NextRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


def qwen3_next_rotary(q, k, cos, sin, unsqueeze_dim=1):
    # apply_rotary_pos_emb with partial rotary: the first cos.shape[-1] columns turn, the rest pass
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = (q_rot * cos) + (rotate_half(q_rot) * sin)
    k_embed = (k_rot * cos) + (rotate_half(k_rot) * sin)
    return torch.cat([q_embed, q_pass], dim=-1), torch.cat([k_embed, k_pass], dim=-1)


class Qwen3NextAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.head_dim = c.head_dim
        self.num_key_value_groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * self.head_dim * 2, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * self.head_dim, c.hidden_size, bias=False)
        self.q_norm = Qwen3NextRMSNorm(self.head_dim, eps=c.rms_norm_eps)
        self.k_norm = Qwen3NextRMSNorm(self.head_dim, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask, position_ids=None, past_key_values=None,
                use_cache=False):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states, gate = torch.chunk(self.q_proj(hidden_states).view(*input_shape, -1, self.head_dim * 2), 2, dim=-1)
        gate = gate.reshape(*input_shape, -1)
        query_states = self.q_norm(query_states.view(hidden_shape)).transpose(1, 2)
        key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = qwen3_next_rotary(query_states, key_states, cos, sin)
        # SDPA (the default), its softmax written out; is_causal where no mask is passed
        k, v = repeat_kv(key_states, self.num_key_value_groups), repeat_kv(value_states, self.num_key_value_groups)
        if attention_mask is None:
            attention_mask = causal_mask(query_states.shape[-2], query_states.dtype)
        w = torch.matmul(query_states, k.transpose(2, 3)) * self.scaling + attention_mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(w, v).transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = attn_output * torch.sigmoid(gate)
        return self.o_proj(attn_output), None


def causal_conv1d_fn(hidden_states, weight, bias=None, activation=None):
    _, hidden_size, seq_len = hidden_states.shape
    padding = weight.shape[-1] - 1
    out = F.conv1d(hidden_states.to(weight.dtype), weight=weight.unsqueeze(1), bias=bias, padding=padding,
                   groups=hidden_size)[:, :, :seq_len]
    if activation is not None:
        out = F.silu(out)
    return out.to(hidden_states.dtype)


def l2norm(x, dim=-1, eps=1e-6):
    inv_norm = torch.rsqrt((x * x).sum(dim=dim, keepdim=True) + eps)
    return x * inv_norm


def torch_chunk_gated_delta_rule(query, key, value, g, beta, chunk_size=64, initial_state=None,
                                 output_final_state=False, use_qk_l2norm_in_kernel=False):
    initial_dtype = query.dtype
    batch_size, sequence_length, _, k_head_dim = key.shape
    num_v_heads, v_head_dim = value.shape[-2:]
    recurrent_state_shape = (batch_size, num_v_heads, k_head_dim, v_head_dim)
    padded_output_shape = (batch_size, num_v_heads, -1, v_head_dim)
    decay = g
    query, key, value, beta, decay = [
        x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
        for x in (query, key, value, beta, decay)
    ]
    if use_qk_l2norm_in_kernel:
        query = l2norm(query, dim=-1, eps=1e-6)
        key = l2norm(key, dim=-1, eps=1e-6)
    scaling = query.shape[-1] ** -0.5
    query = query * scaling
    pad_size = (chunk_size - sequence_length % chunk_size) % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad_size)) for x in (query, key, value))
    beta, decay = (F.pad(x, (0, pad_size)) for x in (beta, decay))
    total_sequence_length = sequence_length + pad_size
    num_chunks = total_sequence_length // chunk_size
    v_beta = value * beta.unsqueeze(-1)
    k_beta = key * beta.unsqueeze(-1)
    query, key, k_beta, v_beta = [
        x.reshape(x.shape[0], x.shape[1], -1, chunk_size, x.shape[-1]) for x in (query, key, k_beta, v_beta)
    ]
    decay = decay.reshape(decay.shape[0], decay.shape[1], -1, chunk_size)
    strictly_upper_mask = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device).triu(1)
    cum_decay = decay.cumsum(dim=3)
    pairwise_decay = cum_decay.unsqueeze(4) - cum_decay.unsqueeze(3)
    pairwise_decay = pairwise_decay.masked_fill(strictly_upper_mask, float("-inf"))
    pairwise_decay = pairwise_decay.exp()
    ut_system = (k_beta @ key.transpose(-1, -2)) * pairwise_decay
    intra_chunk_attn = (query @ key.transpose(-1, -2)) * pairwise_decay
    decayed_k_beta = k_beta * cum_decay.exp().unsqueeze(-1)
    # not exporting (is_torchdynamo_exporting() False): the triangular solver
    new_values = torch.linalg.solve_triangular(ut_system, v_beta, upper=False, unitriangular=True)
    k_cumdecay = torch.linalg.solve_triangular(ut_system, decayed_k_beta, upper=False, unitriangular=True)
    if initial_state is None:
        last_recurrent_state = torch.zeros(recurrent_state_shape, dtype=new_values.dtype, device=new_values.device)
    else:
        last_recurrent_state = initial_state.to(new_values)
    core_attn_out = torch.zeros_like(new_values)
    query = query * cum_decay.exp().unsqueeze(-1)
    key = key * (cum_decay[..., -1:] - cum_decay).exp().unsqueeze(-1)
    chunk_decay = cum_decay[..., -1].exp()[..., None, None]
    for i in range(num_chunks):
        v_new = new_values[:, :, i] - k_cumdecay[:, :, i] @ last_recurrent_state
        inter_chunk_attn = query[:, :, i] @ last_recurrent_state
        core_attn_out[:, :, i] = inter_chunk_attn + intra_chunk_attn[:, :, i] @ v_new
        last_recurrent_state = last_recurrent_state * chunk_decay[:, :, i] + key[:, :, i].transpose(-1, -2) @ v_new
    last_recurrent_state = None if not output_final_state else last_recurrent_state
    core_attn_out = core_attn_out.reshape(padded_output_shape)
    core_attn_out = core_attn_out[:, :, :sequence_length]
    core_attn_out = core_attn_out.transpose(1, 2).to(initial_dtype, memory_format=torch.contiguous_format)
    return core_attn_out, last_recurrent_state


class Qwen3NextGatedDeltaNet(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.hidden_size = c.hidden_size
        self.num_v_heads = c.linear_num_value_heads
        self.num_k_heads = c.linear_num_key_heads
        self.head_k_dim = c.linear_key_head_dim
        self.head_v_dim = c.linear_value_head_dim
        self.key_dim = self.head_k_dim * self.num_k_heads
        self.value_dim = self.head_v_dim * self.num_v_heads
        self.conv_kernel_size = c.linear_conv_kernel_dim
        self.layer_idx = layer_idx
        self.conv_dim = self.key_dim * 2 + self.value_dim
        self.conv1d = nn.Conv1d(in_channels=self.conv_dim, out_channels=self.conv_dim, bias=False,
                                kernel_size=self.conv_kernel_size, groups=self.conv_dim,
                                padding=self.conv_kernel_size - 1)
        projection_size_qkvz = self.key_dim * 2 + self.value_dim * 2
        projection_size_ba = self.num_v_heads * 2
        self.in_proj_qkvz = nn.Linear(self.hidden_size, projection_size_qkvz, bias=False)
        self.in_proj_ba = nn.Linear(self.hidden_size, projection_size_ba, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.num_v_heads))
        A = torch.empty(self.num_v_heads).uniform_(0.01, 16)
        self.A_log = nn.Parameter(torch.log(A))
        self.norm = Qwen3NextRMSNormGated(self.head_v_dim, eps=c.rms_norm_eps)
        self.out_proj = nn.Linear(self.value_dim, self.hidden_size, bias=False)

    def fix_query_key_value_ordering(self, mixed_qkvz, mixed_ba):
        new_tensor_shape_qkvz = mixed_qkvz.size()[:-1] + (
            self.num_k_heads, 2 * self.head_k_dim + 2 * self.head_v_dim * self.num_v_heads // self.num_k_heads)
        new_tensor_shape_ba = mixed_ba.size()[:-1] + (self.num_k_heads, 2 * self.num_v_heads // self.num_k_heads)
        mixed_qkvz = mixed_qkvz.view(*new_tensor_shape_qkvz)
        mixed_ba = mixed_ba.view(*new_tensor_shape_ba)
        split_arg_list_qkvz = [self.head_k_dim, self.head_k_dim,
                               (self.num_v_heads // self.num_k_heads * self.head_v_dim),
                               (self.num_v_heads // self.num_k_heads * self.head_v_dim)]
        split_arg_list_ba = [self.num_v_heads // self.num_k_heads, self.num_v_heads // self.num_k_heads]
        query, key, value, z = torch.split(mixed_qkvz, split_arg_list_qkvz, dim=3)
        b, a = torch.split(mixed_ba, split_arg_list_ba, dim=3)
        value = value.reshape(value.size(0), value.size(1), -1, self.head_v_dim)
        z = z.reshape(z.size(0), z.size(1), -1, self.head_v_dim)
        b = b.reshape(b.size(0), b.size(1), self.num_v_heads)
        a = a.reshape(a.size(0), a.size(1), self.num_v_heads)
        return query, key, value, z, b, a

    def forward(self, hidden_states, cache_params=None, attention_mask=None, use_cache=False):
        # no cache, no padding mask (apply_mask_to_padding_states leaves the states as they are)
        projected_states_qkvz = self.in_proj_qkvz(hidden_states)
        projected_states_ba = self.in_proj_ba(hidden_states)
        query, key, value, z, b, a = self.fix_query_key_value_ordering(projected_states_qkvz, projected_states_ba)
        query, key, value = (x.reshape(x.shape[0], x.shape[1], -1) for x in (query, key, value))
        mixed_qkv = torch.cat((query, key, value), dim=-1)
        mixed_qkv = mixed_qkv.transpose(1, 2)
        mixed_qkv = causal_conv1d_fn(mixed_qkv, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation="silu")
        mixed_qkv = mixed_qkv.transpose(1, 2)
        query, key, value = torch.split(mixed_qkv, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        query = query.reshape(query.shape[0], query.shape[1], -1, self.head_k_dim)
        key = key.reshape(key.shape[0], key.shape[1], -1, self.head_k_dim)
        value = value.reshape(value.shape[0], value.shape[1], -1, self.head_v_dim)
        beta = b.sigmoid()
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)
        if self.num_v_heads // self.num_k_heads > 1:
            query = query.repeat_interleave(self.num_v_heads // self.num_k_heads, dim=2)
            key = key.repeat_interleave(self.num_v_heads // self.num_k_heads, dim=2)
        core_attn_out, last_recurrent_state = torch_chunk_gated_delta_rule(
            query, key, value, g=g, beta=beta, initial_state=None, output_final_state=False,
            use_qk_l2norm_in_kernel=True)
        z_shape_og = z.shape
        core_attn_out = core_attn_out.reshape(-1, core_attn_out.shape[-1])
        z = z.reshape(-1, z.shape[-1])
        core_attn_out = self.norm(core_attn_out, z)
        core_attn_out = core_attn_out.reshape(z_shape_og)
        core_attn_out = core_attn_out.reshape(core_attn_out.shape[0], core_attn_out.shape[1], -1)
        return self.out_proj(core_attn_out)


class Qwen3NextMLP(nn.Module):
    def __init__(self, c, intermediate_size=None):
        super().__init__()
        self.intermediate_size = c.intermediate_size if intermediate_size is None else intermediate_size
        self.gate_proj = nn.Linear(c.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Qwen3NextExperts(PhimoeExperts):
    """Qwen3NextExperts: MixtralExperts' weights and arithmetic (gate_up_proj [E, 2I, D], gate then up, the
    moe_intermediate_size); act_fn called once over every (token, pick) pair, as the real trace shows ([T·k, I])."""

    def __init__(self, c):
        class E:
            num_local_experts = c.num_experts
            intermediate_size = c.moe_intermediate_size
            hidden_size = c.hidden_size
        super().__init__(E)


class Qwen3NextTopKRouter(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.top_k = c.num_experts_per_tok
        self.num_experts = c.num_experts
        self.norm_topk_prob = c.norm_topk_prob
        self.hidden_dim = c.hidden_size
        self.weight = nn.Parameter(torch.zeros(self.num_experts, self.hidden_dim))

    def forward(self, hidden_states):
        hidden_states = hidden_states.reshape(-1, self.hidden_dim)
        router_logits = F.linear(hidden_states, self.weight)
        router_probs = torch.nn.functional.softmax(router_logits, dtype=torch.float, dim=-1)
        router_top_value, router_indices = torch.topk(router_probs, self.top_k, dim=-1)
        if self.norm_topk_prob:
            router_top_value /= router_top_value.sum(dim=-1, keepdim=True)
        router_top_value = router_top_value.to(router_logits.dtype)
        router_scores = router_top_value
        return router_logits, router_scores, router_indices


class Qwen3NextSparseMoeBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate = Qwen3NextTopKRouter(c)
        self.experts = Qwen3NextExperts(c)
        self.shared_expert = Qwen3NextMLP(c, intermediate_size=c.shared_expert_intermediate_size)
        self.shared_expert_gate = torch.nn.Linear(c.hidden_size, 1, bias=False)

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states_reshaped = hidden_states.view(-1, hidden_dim)
        shared_expert_output = self.shared_expert(hidden_states_reshaped)
        _, routing_weights, selected_experts = self.gate(hidden_states_reshaped)
        expert_output = self.experts(hidden_states_reshaped, selected_experts, routing_weights)
        shared_expert_output = torch.sigmoid(self.shared_expert_gate(hidden_states_reshaped)) * shared_expert_output
        expert_output = expert_output + shared_expert_output
        return expert_output.reshape(batch_size, sequence_length, hidden_dim)


class Qwen3NextDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.block_type = c.layer_types[layer_idx]
        if self.block_type == "linear_attention":
            self.linear_attn = Qwen3NextGatedDeltaNet(c, layer_idx)
        else:
            self.self_attn = Qwen3NextAttention(c, layer_idx)
        self.mlp = Qwen3NextSparseMoeBlock(c)  # decoder_sparse_step 1, no mlp_only_layers
        self.input_layernorm = Qwen3NextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = Qwen3NextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, position_ids=None,
                past_key_values=None, use_cache=False):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        if self.block_type == "linear_attention":
            hidden_states = self.linear_attn(hidden_states=hidden_states, cache_params=past_key_values,
                                             attention_mask=attention_mask, use_cache=use_cache)
        else:
            hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask,
                                              position_ids=position_ids, past_key_values=past_key_values,
                                              position_embeddings=position_embeddings, use_cache=use_cache)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class Qwen3NextModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, 0)
        self.layers = nn.ModuleList([Qwen3NextDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = Qwen3NextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = Qwen3NextRotaryEmbedding(c)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for decoder_layer in self.layers:
            # no padding: create_causal_mask gives None (SDPA's is_causal) and create_recurrent_attention_mask None
            hidden_states = decoder_layer(hidden_states, position_embeddings=position_embeddings, attention_mask=None,
                                          position_ids=position_ids, past_key_values=None, use_cache=False)
        return self.norm(hidden_states)


CASES = {"gpt_oss": (GptOssModel, Config), "llama4_text": (Llama4TextModel, Llama4Config),
         "diffllama": (DiffLlamaModel, DiffLlamaConfig), "phimoe": (PhimoeModel, PhimoeConfig),
         "doge": (DogeModel, DogeConfig), "ctrl": (CTRLModel, CTRLConfig),
         "apertus": (ApertusModel, ApertusConfig),
         "gpt_neox_japanese": (GPTNeoXJapaneseModel, GPTNeoXJapaneseConfig),
         "bamba": (BambaModel, BambaConfig), "mamba": (MambaModel, MambaConfig),
         "nemotron_h": (NemotronHModel, NemotronHConfig), "falcon_h1": (FalconH1Model, FalconH1Config),
         "falcon_h1_mup": (FalconH1Model, FalconH1MupConfig), "jamba": (JambaModel, JambaConfig),
         "falcon_mamba": (FalconMambaModel, FalconMambaConfig), "roformer": (RoFormerModel, RoFormerConfig),
         "mamba_kernel_path": (MambaKernelPathModel, MambaConfig),
         "recurrent_gemma": (RecurrentGemmaModel, RecurrentGemmaConfig), "rwkv": (RwkvModel, RwkvConfig),
         "minimax": (MiniMaxModel, MiniMaxConfig), "qwen3_next": (Qwen3NextModel, Qwen3NextConfig)}
import reimpl_encoders  # noqa: E402  (xglm, mobilebert, ...: the encoders' cases)
import reimpl_mixers  # noqa: E402  (jetmoe, ...: token mixers earlier forms did not read)
import reimpl_text  # noqa: E402  (t5, umt5, clip_text_model: the pipelines' text encoders)
CASES.update(reimpl_encoders.CASES)
CASES.update(reimpl_mixers.CASES)
CASES.update(reimpl_text.CASES)
import reimpl_lm6  # noqa: E402  (qwen3_vl_text, olmo_hybrid, gemma4_text: the sixth batch's decoders)
CASES.update(reimpl_lm6.CASES)
import reimpl_lm7  # noqa: E402  (m2m_100, switch_transformers, muse_glimmer_text: the seventh batch's encoders)
CASES.update(reimpl_lm7.CASES)
import reimpl_lm7_attention  # noqa: E402  (fsmt, longformer, longt5: sequence-first rows, local attention)
CASES.update(reimpl_lm7_attention.CASES)
import reimpl_hc  # noqa: E402  (deepseek_v4_hc: DeepSeek-V4's hyper-connections around plain sub-layers)
CASES.update(reimpl_hc.CASES)
import reimpl_dsv4  # noqa: E402  (deepseek_v4_attn: DeepSeek-V4's attention in a plain decoder)
CASES.update(reimpl_dsv4.CASES)
import reimpl_sam3_lite_text  # noqa: E402  (sam3_lite_text_text_model: a resized position table, RepMixer blocks)
CASES.update(reimpl_sam3_lite_text.CASES)
import reimpl_pegasus_x  # noqa: E402  (pegasus_x: global tokens beside block-local attention; not read yet)
CASES.update(reimpl_pegasus_x.CASES)
import reimpl_canine  # noqa: E402  (canine: character hashing, downsampling conv, upsampling)
CASES.update(reimpl_canine.CASES)
PREPARE = {"gpt_oss": widen_experts, "diffllama": diffllama_lambdas}
PREPARE.update(reimpl_lm7.PREPARE)


def capture(case, outdir):
    torch.manual_seed(0)
    build, config = CASES[case]
    model = build(config())
    randomize(model, torch.Generator().manual_seed(1))
    if case in PREPARE:
        PREPARE[case](model, torch.Generator().manual_seed(3))
    model.eval()
    # 8 ids, or the config's seq_len (mpnet: long enough to reach its log-spaced buckets)
    ids = torch.randint(0, config.vocab_size, (1, getattr(config, "seq_len", 8)), generator=torch.Generator().manual_seed(2))
    path = os.path.join(outdir, f"{case}-f32.npz")
    prod = {"case": case, "library": "transformers (reimplemented, torch 1.13)", "model_type": case}
    with zflow_capture.Capture(model, name="text_encoder", path=path, producer=prod) as cap:
        cap.input("input_ids", ids)
        with torch.no_grad():
            h = model(ids)
        if isinstance(h, dict):  # a ModelOutput's fields: the last hidden state, else its first
            h = h["last_hidden_state"] if "last_hidden_state" in h else next(iter(h.values()))
        cap.output("hidden", h)
    return f"{cap.summary['calls']} calls, {os.path.getsize(path)} bytes"


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for case in sys.argv[2:] or list(CASES):
        print(f"{case:10s} {capture(case, outdir)}", flush=True)


if __name__ == "__main__":
    main()
