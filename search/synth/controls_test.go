package synth

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/check"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// TestPlantedControls: on the project's own planted controls
// (fixtures/controls, one semantic factor flipped in each, see its
// README.md) the program search finds the flipped value, decisively
// where the program measures it, and the plain fixture's value where the
// control keeps it. No ../shared needed.
func TestPlantedControls(t *testing.T) {
	for _, tc := range []struct {
		control, factor string
		want            any
	}{
		{"tanh_gate", "gate_fn", "tanh"},
		{"half_rope", "rope_layout", "half"},
		{"image_first", "joint_order", "image_first"},
		{"final_shift_scale", "final_norm_order", "shift,scale"},
		{"euler_minus", "euler_sign", -1},
		{"rms_norm", "norm_kind", "rms"},
		{"patchify", "patch_layout", "c_ph_pw"},
		// unflipped, in every control: the reference's own
		{"tanh_gate", "final_norm_order", "scale,shift"},
		{"euler_minus", "gate_fn", "identity"},
	} {
		t.Run(tc.control+"/"+tc.factor, func(t *testing.T) {
			res, _ := discovered(t, filepath.Join("..", "..", "fixtures", "controls", tc.control+".npz"))
			if err := res.Doc.Validate(); err != nil {
				t.Fatal(err)
			}
			var got []any
			found := false
			for _, f := range res.Doc.Factors {
				if f.Name != tc.factor {
					continue
				}
				got = append(got, f.Value)
				if sameValue(f.Value, tc.want) {
					found = true
					if f.Evidence.Metric != "declared" && !f.Decisive {
						t.Errorf("%s at %s = %v, margin %v: not decisive", f.Name, f.Scope, f.Value, float64(f.Margin))
					}
				}
			}
			if !found {
				t.Errorf("%s: %v, want %v", tc.factor, got, tc.want)
			}
		})
	}
}

// TestPlantedConstructs: constructs no shared trace shows (fixtures/
// constructs, README.md there): partial rotary, a per-head fused q/k/v, a
// fused gate/up projection, parallel residuals from two norms, modulation
// without shift, tanh gates. Each document is complete (nothing taken
// from the trace, the self-check passed), reproduces the trace's output,
// and says what the code does.
func TestPlantedConstructs(t *testing.T) {
	for _, tc := range []struct {
		trace  string
		want   map[string]any
		rotary int  // the RoPE nodes' rotary width (0: no RoPE, or whole heads)
		whole  bool // RoPE over whole heads (rotary width 0)
	}{
		{"lm.npz", map[string]any{"rope_layout": "half", "rope_theta": 10000.0, "mlp_glu": true, "mlp_act": "silu", "attention_causal": true}, 4, false},
		{"lm_inline.npz", map[string]any{"rope_layout": "interleaved", "rope_theta": 10000.0, "mlp_glu": false, "mlp_act": "gelu_tanh", "attention_causal": true}, 4, false},
		{"dit.npz", map[string]any{"gate_fn": "tanh", "modulation_plus_one": true, "timestep_scale": 1000.0, "timestep_scale_at": "input", "euler_sign": 1.0}, 0, false},
		{"dit_narrow.npz", map[string]any{"gate_fn": "tanh", "modulation_plus_one": true}, 0, false},
		{"pooled.npz", map[string]any{"modulation_plus_one": true, "timestep_scale": 1000.0}, 0, false},
		// two latents stepped by their own outputs of one call
		{"two_latents.npz", map[string]any{"euler_sign": 1.0, "timestep_scale": 1000.0}, 0, false},
		// cross-attention whose q and k take each stream's own table
		{"own_tables.npz", map[string]any{"rope_layout": "half", "rope_theta": 10000.0}, 0, true},
		// a table of more rows than the chunks added to it (its last row the gate's)
		{"table_run.npz", map[string]any{"modulation_plus_one": true, "timestep_scale": 1000.0, "euler_sign": 1.0}, 0, false},
		// a batch whose samples each take their own RoPE table [B, S, d]
		{"per_sample_rope.npz", map[string]any{"rope_layout": "half", "rope_theta": 10000.0, "euler_sign": 1.0}, 0, true},
	} {
		t.Run(tc.trace, func(t *testing.T) {
			res, tr := discoverComplete(t, filepath.Join("..", "..", "fixtures", "constructs", tc.trace))
			for name, want := range tc.want {
				ok := false
				for _, f := range res.Doc.Factors {
					ok = ok || f.Name == name && sameValue(f.Value, want)
				}
				if !ok {
					t.Errorf("no %s = %v", name, want)
				}
			}
			ropes := 0
			for _, n := range res.Doc.Program.Nodes {
				if n.Op == "rope" {
					ropes++
					if n.Attrs.Rope.RotaryDim != tc.rotary {
						t.Errorf("rope rotary_dim %d, want %d", n.Attrs.Rope.RotaryDim, tc.rotary)
					}
				}
			}
			if (ropes > 0) != (tc.rotary > 0 || tc.whole) {
				t.Errorf("%d rope nodes", ropes)
			}
			if rel := generate(t, res.Doc, tr); rel > 1e-5 {
				t.Errorf("generated output rel-RMS %.3g > 1e-5", rel)
			}
			selfChecked(t, res.Doc, tr)
		})
	}
}

// TestUnseenArchitectures: real models (transformers) the shared set does
// not hold, discovered complete (nothing taken from the trace, every
// boundary reproduced teacher forced by the self-check) and generating
// their output; each shows constructs listed in fixtures/unseen/README.md.
//
// Every fixture with ZFLOW_UNSEEN=all (`make unseen`, which .ci/run
// calls); otherwise every unseenStride-th in name order, a sample that
// keeps `make test` well under its 10 minutes on 2 cores (the whole
// sweep is about 400 CPU-seconds).
func TestUnseenArchitectures(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "fixtures", "unseen", "*.npz"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures/unseen traces (%v)", err)
	}
	if os.Getenv("ZFLOW_UNSEEN") != "all" {
		slices.Sort(paths)
		var sample []string
		for i, p := range paths {
			if i%unseenStride == 0 {
				sample = append(sample, p)
			}
		}
		t.Logf("%d of %d fixtures (every %d-th; ZFLOW_UNSEEN=all or make unseen runs them all)", len(sample), len(paths), unseenStride)
		paths = sample
	}
	// the longest first, so that the parallel runs end together rather
	// than on one core
	slices.SortStableFunc(paths, func(a, b string) int {
		return cmp.Compare(slowFixtures[fixtureName(b)], slowFixtures[fixtureName(a)])
	})
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".npz"), func(t *testing.T) {
			t.Parallel() // each fixture's discovery is independent (discovered is safe for concurrent use)
			res, tr := discoverComplete(t, path)
			selfChecked(t, res.Doc, tr)
			namesWhatItShows(t, res.Doc)
			name := fixtureName(path)
			bound := 1e-5
			if b, ok := unseenGenerate[name]; ok {
				bound = b
			}
			if rel := generate(t, res.Doc, tr); rel > bound {
				t.Errorf("generated output rel-RMS %.3g > %g", rel, bound)
			}
			for factor, want := range unseenFactors[name] {
				ok := false
				for _, f := range res.Doc.Factors {
					ok = ok || f.Name == factor && sameValue(f.Value, want)
				}
				if !ok {
					t.Errorf("no %s = %v", factor, want)
				}
			}
		})
	}
}

// unseenStride: make test's sample of fixtures/unseen is every
// unseenStride-th fixture in name order.
const unseenStride = 4

// slowFixtures are the fixtures whose discovery takes longest, in seconds
// on one core of the 2-core CI machine (go test -v, session 45): the
// sweep starts them first. Scheduling only; every fixture is run.
var slowFixtures = map[string]float64{"xlstm": 50, "mamba": 30, "joyai_image": 23, "gpt_oss": 20, "wavlm": 16,
	"cogvideox_vae": 15, "swinv2": 15, "unet_if_blocks": 14, "deepseek_v4_hc": 13, "rwkv": 12}

// fixtureName is a fixture's model name: its file name less "-f32.npz".
func fixtureName(path string) string {
	return strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".npz"), "-f32")
}

// unseenGenerate bounds a fixture's free-running output where 1e-5 does
// not hold for any port: kandinsky5 rounds q and k to bf16 inside its f32
// run, so a last-bit difference upstream (unavoidable: torch and zflow sum
// in other orders) moves a value across a bf16 rounding boundary, and one
// such flip in k changes the reference's own attention output by up to
// 3e-4 rel-RMS (measured flipping each q and k element of the trace's step
// 1 by one bf16 step); the f32 boundary gate (1e-4) holds.
//
// nemotron_h: torch's chunked SSD scan in f32 is itself 9.9e-6 from the
// recurrence computed in float64 (ours 5.5e-8: TestSSMScanAgainstChunkedTorch
// in exec/cpu), and the gated norm's statistics over groups of 32
// channels weigh each group alike, so the heads where torch's error lies
// (1.9e-5 in head 0) count more after it: the norm's output differs from
// torch's by 6.7e-5, the model's output by 5.1e-5, every boundary within
// the f32 gate (1e-4) teacher forced.
//
// oobleck_vae: the reference amplifies its own last-bit differences about
// 140-fold: its input moved by 1e-7 (relative, random) moves its output
// by 1.4e-5 rel-RMS (measured in torch 1.13 on the replica: 40 weight-
// normed convolutions between 27 Snake activations whose redrawn β make
// sin²'s slope large); every boundary is within 2e-7 teacher forced, the
// free-running output 2.0e-5 from the reference's.
var unseenGenerate = map[string]float64{"kandinsky5": 1e-4, "nemotron_h": 1e-4, "oobleck_vae": 1e-4}

// unseenFactors are facts of fixtures/unseen's models read from their
// source (transformers 5.17): what the documents must say.
var unseenFactors = map[string]map[string]any{
	"hunyuan_v1_dense": {"rope_layout": "half", "qk_norm": "rms", "mlp_act": "silu", "mlp_glu": true},
	"helium":           {"rope_layout": "interleaved", "mlp_glu": true},
	"glm":              {"rope_layout": "interleaved"},
	"mlcd_vision":      {"rope_layout": "half", "mlp_act": "gelu_erf"},
	"sd_unet":          {"timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "mlp_act": "gelu_erf", "mlp_glu": true},
	"stable_cascade":   {"timestep_flip_sin_to_cos": false, "timestep_freq_shift": 1.0, "timestep_scale": 10000.0, "timestep_scale_at": "input"},
	"gemma":            {"mlp_act": "gelu_tanh", "mlp_glu": true},
	"arcee":            {"mlp_act": "relu", "mlp_squared": true, "mlp_glu": false},
	"bitnet":           {"mlp_act": "relu", "mlp_squared": true, "mlp_glu": true},
	"persimmon":        {"qk_norm": "layer", "mlp_squared": true},
	"mixtral":          {"mlp_act": "silu", "mlp_glu": true, "rope_layout": "half"},
	"qwen2_moe":        {"mlp_act": "silu", "mlp_glu": true},
	"falcon_alibi":     {"attention_alibi": true, "rope_layout": "none", "attention_causal": true},
	"falcon_new":       {"rope_layout": "half", "mlp_act": "gelu_erf"},
	"granitemoe":       {"attention_scale": 0.0625},
	"opt":              {"mlp_act": "relu", "rope_layout": "none"},
	"olmo":             {"attention_clip": 2.0, "rope_layout": "half", "mlp_act": "silu", "mlp_glu": true},
	"deepseek_v2":      {"rope_layout": "interleaved", "attention_causal": true, "mlp_act": "silu", "mlp_glu": true},
	"dbrx":             {"attention_clip": 2.0, "rope_layout": "half", "mlp_act": "silu", "mlp_glu": true},
	"afmoe":            {"rope_layout": "half", "qk_norm": "rms", "mlp_act": "silu", "mlp_glu": true},
	"aria_text":        {"rope_layout": "half", "mlp_act": "silu", "mlp_glu": true},
	"levit":            {"mlp_act": "hardswish"},
	// the vision towers of transformers' modeling_qwen2_vl.py and
	// modeling_qwen2_5_vl.py: 2-D RoPE of head_dim/4 frequencies per axis
	// joined then laid out as halves; Qwen2.5's windowed blocks attend
	// within cu_seqlens' windows (4 windows of 16 patches at 8×8)
	"qwen2_vl_vision":   {"rope_layout": "half", "rope_axes": []int{8, 8}, "rope_theta": 10000.0, "mlp_swish_beta": 1.702},
	"qwen2_5_vl_vision": {"rope_layout": "half", "rope_axes": []int{8, 8}, "attention_segments": []int{0, 16, 32, 48, 64}, "mlp_act": "silu", "mlp_glu": true},
	// modeling_wav2vec2_bert.py with rotary positions: the hidden states
	// rotated (rotate_half) before linear_q and linear_k
	"wav2vec2-bert": {"rope_layout": "half", "rope_theta": 10000.0, "mlp_act": "silu"},
	// modeling_wav2vec2_conformer.py (rotary): the same rotation, and a
	// BatchNorm1d in eval mode at its initial statistics in the conv module
	"wav2vec2-conformer": {"rope_layout": "half", "batch_norm_stats": "initial"},
	// timm's cait.py: talking heads (linears over the heads on the scores
	// and on the probabilities), then class attention of the class token
	"timm_cait": {"rope_layout": "none", "mlp_act": "gelu_erf", "attention_causal": false},
	// timm's eva.py as the Perception Encoder builds it: a [sin | cos]
	// table of interleaved pairs over grid positions (i + 1)·ref/n, x first
	"timm_pe_core": {"rope_layout": "interleaved", "mlp_act": "gelu_erf"},
	// modeling_swinv2.py: cosine attention (q, k L2-normalised per head,
	// exp(min(logit_scale, ln 100)) per head), a position MLP's table
	// gathered at the windows' relative offsets as 16·σ
	"swinv2": {"qk_norm": "l2", "attention_temperature": "exp", "mlp_act": "gelu_erf"},
	// timm's convit.py: gated positional self-attention in the local
	// layers, plain attention after
	"timm_convit": {"mlp_act": "gelu_erf"},
	// timm's xcit.py: cross-covariance attention (q, k normalised over the
	// tokens, a [H, 1, 1] temperature as it is), Fourier positions
	"timm_xcit": {"qk_norm": "l2", "attention_temperature": "param", "mlp_act": "gelu_erf"},
	// torch.nn.TransformerEncoderLayer (sequence first, post- and pre-norm):
	// nn.MultiheadAttention's packed in_proj_weight, out_proj never called
	"torch_encoder_post": {"attention_causal": false, "mlp_act": "gelu_erf"},
	"torch_encoder_pre":  {"attention_causal": false, "mlp_act": "gelu_erf"},
	// nn.MultiheadAttention called directly, batch first, need_weights on:
	// self-attention, then cross-attention with q/k/v weights apart
	"torch_mha_cross": {"attention_causal": false, "mlp_act": "gelu_erf"},
	// transformers' modeling_bamba.py, reimplemented: a Mamba-2 mixer (its
	// conv1d, scan and gated norm) beside partial-rotary attention
	"bamba": {"rope_layout": "half", "mlp_act": "silu", "mlp_glu": true, "ssm_skip": true},
	// transformers' modeling_mamba.py, reimplemented: Mamba-1 mixers (a depthwise causal conv1d
	// read channels first, dt_proj's softplus, A = −exp(A_log) [64, 8] per channel and state, B and
	// C the last columns of x_proj, the D skip, times silu(gate)), no attention
	"mamba": {"ssm_skip": true},
	// transformers' modeling_nemotron_h.py, reimplemented: a Mamba-2 mixer (2 groups of B and
	// C) whose gated norm takes its statistics over each group of 32 channels
	// (Zamba2RMSNormGated), a relu² MLP block, an attention block without positions
	// transformers' modeling_falcon_h1.py, reimplemented: a Mamba-2 mixer in parallel with
	// attention in every layer, no gated norm (mamba_rms_norm False): y·silu(gate) read off a
	// cut of in_proj's output; multipliers all 1 as the config's defaults
	"falcon_h1": {"ssm_skip": true, "rope_layout": "half", "rope_theta": 10000.0, "attention_causal": true, "mlp_act": "silu", "mlp_glu": true},
	// transformers' modeling_jamba.py, reimplemented: a Mamba-1 mixer whose time step, B and C
	// pass through RMSNorm modules of their own, an attention layer without positions
	"jamba": {"ssm_skip": true, "rope_layout": "none", "attention_causal": true, "mlp_act": "silu", "mlp_glu": true},
	// transformers' modeling_falcon_mamba.py, reimplemented: mamba's Mamba-1 mixer with time
	// step, B and C each through an RMS norm without a weight in the forward
	"falcon_mamba": {"ssm_skip": true},
	// mamba's mixer on the kernels' reference path (transformers 5.17 without mamba_ssm): no call
	// of conv1d, act or dt_proj; the time step the first columns of x_proj's result
	"mamba_kernel_path": {"ssm_skip": true},
	"nemotron_h":        {"ssm_skip": true, "mlp_act": "relu", "mlp_squared": true, "mlp_glu": false, "attention_causal": true, "rope_layout": "none"},
	// transformers' modeling_recurrent_gemma.py, reimplemented: RG-LRU recurrent blocks (a
	// causal conv1d, block-diagonal gates, a gated diagonal linear recurrence) times a GELU
	// branch, Gemma's 1 + γ RMS norms, a GELU gated MLP
	"recurrent_gemma": {"mlp_act": "gelu_tanh", "mlp_glu": true, "norm_kind": "rms", "norm_offset": 1.0},
	// transformers' modeling_ctrl.py, reimplemented: embeddings ×√32 plus a sinusoid table of
	// positions computed in the forward, a 0/1 causal mask ×−1e4, a ReLU MLP
	"ctrl": {"rope_layout": "none", "attention_causal": true, "mlp_act": "relu", "mlp_glu": false},
	// transformers' modeling_roformer.py, reimplemented: a position table (an nn.Embedding
	// handed the input's shape) whose [sin | cos] halves rotate adjacent pairs of q and k
	"roformer": {"rope_layout": "interleaved", "attention_causal": false, "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_xglm.py, reimplemented: rows ×√32 by the embedding's own forward, fairseq's
	// sinusoid table of positions + 2 ([sin | cos], ln 10000/(half − 1)) output by a module of its own
	"xglm": {"position_offset": 2.0, "rope_layout": "none", "attention_causal": true, "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_m2m_100.py, reimplemented: the position module handed the ids, positions
	// made inside past the padding index 1 (cumsum of ids ≠ 1, + 1): fairseq's table at arange + 2
	"m2m_100": {"position_offset": 2.0, "rope_layout": "none", "attention_causal": false, "mlp_act": "relu", "mlp_glu": false},
	// transformers' modeling_switch_transformers.py, reimplemented: T5 with a top-1 switch router
	// (one-hot choice) and 4 ungated ReLU experts weighted by the chosen probability
	"switch_transformers": {"attention_causal": false, "attention_scale": 1.0, "rope_layout": "none", "mlp_act": "relu"},
	// transformers' modeling_muse_glimmer.py, reimplemented: q and k RMS-normed without weight, q × 3.87
	// (the scale 3.87/√8), gated attention, half RoPE in layer 0 only, SiLU gated MLP
	// modeling_deepseek_v4.py's attention, reimplemented (reimpl_dsv4.py): one kv head read as keys and
	// values, interleaved RoPE from one angle per pair, sinks, the output rotated back, a grouped o_a_proj
	"deepseek_v4_attn":  {"rope_layout": "interleaved", "attention_causal": true, "attention_sinks": true, "rope_theta": 10000.0, "mlp_act": "silu", "mlp_glu": true},
	"deepseek_v4_hc":    {"mix_sinkhorn_steps": 5.0, "mix_sinkhorn_eps": 1e-6, "rope_layout": "half", "attention_causal": true, "mlp_act": "silu", "mlp_glu": true},
	"muse_glimmer_text": {"attention_causal": true, "attention_scale": 1.3682518005371094, "qk_norm": "rms", "rope_theta": 10000.0, "mlp_act": "silu", "mlp_glu": true},
	// modeling_fsmt.py, reimplemented (reimpl_lm7_attention.py): rows sequence first through every layer, fairseq
	// attention (q·head_dim^-½ after q_proj), ReLU FFNs
	"fsmt": {"rope_layout": "none", "attention_causal": false, "attention_scale": 0.0, "mlp_act": "relu", "mlp_glu": false},
	// modeling_longt5.py, reimplemented: local block attention (one block of 8), unscaled, the relative
	// bias of the block's 3-block window (queries centred among 24 keys), RMS norms, a ReLU FFN
	"longt5": {"rope_layout": "none", "attention_causal": false, "attention_scale": 1.0, "mlp_act": "relu", "mlp_glu": false},
	// modeling_longformer.py, reimplemented: attention_window 4, each query over |i − j| ≤ 2 (a band:
	// window 3 counting the query's own key), projections read sequence first, GELU (erf) FFNs
	"longformer": {"rope_layout": "none", "attention_causal": false, "attention_window": 3.0, "attention_scale": 0.0, "mlp_act": "gelu_erf", "mlp_glu": false},
	// modeling_pegasus_x.py, reimplemented at block_size 4 and 2 global tokens: token queries in blocks
	// of 4 over [the global keys | their block's keys], the second layer's blocks staggered by half a block
	"pegasus_x_b4": {"attention_block": 4.0, "attention_causal": false, "rope_layout": "none", "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_mobilebert.py, reimplemented: the trigram input (the word rows shifted up
	// and down one row with a zero row, joined along the channels), bottlenecks, NoNorm, no mask
	"mobilebert": {"attention_causal": false, "rope_layout": "none"},
	// transformers' modeling_layoutlm.py, reimplemented: nine tables' rows summed (words, positions,
	// the x and y tables twice each at a box of zeros, h, w, token types), BERT layers, GELU
	"layoutlm": {"attention_causal": false, "rope_layout": "none", "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_mpnet.py, reimplemented: T5's bidirectional relative buckets (32, max
	// distance 128) index a [32, heads] table added to the scores; positions from the ids; BERT layers
	"mpnet": {"attention_causal": false, "rope_layout": "none", "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_nystromformer.py, reimplemented: the exact softmax path (64 landmarks =
	// segment_means_seq_len) plus a depthwise (65, 1) convolution of the values added per head; gelu_new
	"nystromformer": {"attention_causal": false, "rope_layout": "none", "mlp_act": "gelu_tanh", "mlp_glu": false},
	// transformers' modeling_convbert.py, reimplemented: half the heads attend, half convolve (a
	// dynamic convolution: per-position softmax kernels of 9 over the unfolded rows), joined per position
	"convbert": {"attention_causal": false, "rope_layout": "none", "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_yoso.py, reimplemented: YOSO's expectation (1 − acos(q̂·k̂)/π)^9 weighting
	// the values without a softmax, L2-normalised per head
	"yoso": {"attention_angular_power": 9.0, "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_t5.py, reimplemented: the first attention computes its bias from
	// its own bucket table ([S, S, heads], moved heads first) and hands it on; no 1/√d; ReLU FFN
	"t5": {"attention_causal": false, "attention_scale": 1.0, "rope_layout": "none", "mlp_act": "relu", "mlp_glu": false},
	// transformers' modeling_umt5.py, reimplemented: every attention its own bucket table;
	// gated gelu_new FFN
	"umt5": {"attention_causal": false, "attention_scale": 1.0, "rope_layout": "none", "mlp_act": "gelu_tanh", "mlp_glu": true},
	// transformers' modeling_clip.py (CLIPTextModel), reimplemented: learned positions, causal
	// attention, quick GELU x·σ(1.702·x): the silu gate as Swish-β
	"clip_text_model": {"attention_causal": true, "rope_layout": "none", "mlp_act": "silu", "mlp_swish_beta": 1.702, "mlp_glu": false},
	// transformers' modeling_dpr.py, reimplemented: the question encoder makes the mask and the
	// token types from the ids; BERT layers, GELU; the output the first row
	"dpr": {"attention_causal": false, "rope_layout": "none", "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_deberta.py, reimplemented: a per-head fused bias-free in_proj, the
	// self-attention's own q_bias and v_bias added in the forward, TF-style LayerNorm, GELU
	"deberta": {"attention_causal": false, "rope_layout": "none", "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_apertus.py, reimplemented: xIELU (a learned activation split at
	// zero, its scalars through softplus), q/k RMS norms, llama3-scaled RoPE halves
	"apertus": {"rope_layout": "half", "qk_norm": "rms", "attention_causal": true, "mlp_glu": false},
	// transformers' modeling_gpt_neox_japanese.py, reimplemented: per-head fused q/k/v, RoPE
	// halves, probabilities through a Dropout call, the last layer's dense bias returned and
	// added with the residual, a GELU MLP
	"gpt_neox_japanese": {"rope_layout": "half", "attention_causal": true, "mlp_act": "gelu_erf", "mlp_glu": false},
	// transformers' modeling_gpt_oss.py, reimplemented (bench/unseen/capture_reimpl.py):
	// swiglu_limit 7, alpha 1.702, (up + 1), sinks, sliding window 4 in even layers
	"gpt_oss": {"attention_sinks": true, "attention_window": 4.0, "rope_layout": "half", "mlp_act": "silu", "mlp_glu": true,
		"mlp_limit": 7.0, "mlp_swish_beta": 1.702, "mlp_up_offset": 1.0},
	// transformers' modeling_llama4.py, reimplemented: complex (pair) RoPE and an L2 q/k
	// norm in the RoPE layer, silu experts and shared expert
	"llama4_text": {"rope_layout": "interleaved", "qk_norm": "rms", "attention_causal": true, "mlp_act": "silu", "mlp_glu": true},
	// transformers' phimoe (modular_phimoe.py), reimplemented: sparsemixer's eval router,
	// silu experts, LayerNorm
	"phimoe": {"rope_layout": "half", "attention_causal": true, "mlp_act": "silu", "mlp_glu": true},
	// transformers' modeling_diffllama.py, reimplemented: differential attention, λ from the
	// attention's vectors, RoPE halves, causal, silu gated MLP
	"diffllama": {"attention_lambda": "vectors", "rope_layout": "half", "attention_causal": true, "mlp_act": "silu", "mlp_glu": true},
	// transformers' modeling_doge.py, reimplemented: the dynamic mask (a score bias
	// exp(A·softplus(dt_proj(v))) per kv head) alone, no mask tensor so not causal (SDPA
	// given a mask), RMSNorm q/k norms, RoPE halves, silu gated MLP
	"doge": {"attention_causal": false, "rope_layout": "half", "qk_norm": "rms", "mlp_act": "silu", "mlp_glu": true},
	// diffusers (the reconstructed tree, bench/unseen/capture_dit.py --small)
	"sana":         {"attention_kernel": "relu", "modulation_plus_one": true, "rope_layout": "none"},
	"lumina2":      {"rope_layout": "interleaved", "rope_theta": 10000.0, "rope_axes": []any{2.0, 2.0, 4.0}, "qk_norm": "rms", "gate_fn": "tanh", "mlp_glu": true},
	"dit":          {"mlp_act": "gelu_tanh", "modulation_plus_one": true, "gate_fn": "identity", "rope_layout": "none"},
	"stableaudio":  {"rope_layout": "half", "mlp_act": "silu", "mlp_glu": true},
	"chroma":       {"rope_layout": "interleaved", "joint_order": "text_first", "qk_norm": "rms", "mlp_act": "gelu_tanh"},
	"cogview3plus": {"rope_layout": "none", "qk_norm": "layer", "mlp_act": "gelu_tanh"},
	"latte":        {"rope_layout": "none", "mlp_act": "gelu_tanh", "modulation_plus_one": true},
	"omnigen":      {"rope_layout": "half", "mlp_act": "silu", "mlp_glu": true},
	"hidream":      {"rope_layout": "interleaved", "joint_order": "image_first", "qk_norm": "rms", "mlp_act": "silu", "mlp_glu": true},
	// the same on wide latents: the padding rows' keys multiplied by the model's row mask
	"hidream_i1_wide": {"rope_layout": "interleaved", "joint_order": "image_first", "qk_norm": "rms", "mlp_act": "silu", "mlp_glu": true},
	// replicas of diffusers code on torch 1.13 (bench/unseen/replicas)
	// attn1's scale: √(log₆₄ 16)/√8 = 12^-0.5 (proportional attention at 16 rows, base 64), correctly rounded.
	// Not listed though true (SwiGLU): mlp_act silu, mlp_glu; the search explains the FFN's product as two
	// row halves joined (joined is tried before pointwise), which the MLP reader does not see as a gated MLP.
	"luminanext": {"rope_layout": "interleaved", "attention_scale": 0.28867513459481287, "qk_norm": "layer", "gate_fn": "tanh", "euler_sign": -1.0},
	"kandinsky5": {"rope_layout": "interleaved", "attention_qk_format": "bf16", "qk_norm": "rms", "mlp_act": "gelu_erf", "mlp_glu": false, "modulation_plus_one": true, "gate_fn": "identity", "euler_sign": 1.0},
	// transformer_prx.py: image queries over [text, image] keys (text first; the trace cannot
	// tell the keys' order, TestUnseenJoinedKeys checks the document says so), 2×2-matrix RoPE
	// on adjacent pairs, RMSNorm q/k, default scale, gelu_tanh(gate)·up, (1 + scale), x + gate·y
	"prx": {"rope_layout": "interleaved", "joint_order": "text_first", "qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false,
		"mlp_act": "gelu_tanh", "mlp_glu": true, "modulation_plus_one": true, "gate_fn": "identity", "euler_sign": 1.0},
	// transformer_wan_vace.py: Wan blocks (interleaved 3-D RoPE of 6/6/6 channels, θ 10⁴, RMSNorm
	// q/k across heads, gelu_tanh FFN, (1 + scale), x + gate·y) and a VACE block whose hint is added
	// after main block 0; heads of 18, which the cross-attention (no RoPE) takes from the self-attention
	"wanvace": {"rope_layout": "interleaved", "rope_axes": []any{6.0, 6.0, 6.0}, "rope_theta": 10000.0, "qk_norm": "rms",
		"attention_scale": 0.0, "mlp_act": "gelu_tanh", "mlp_glu": false, "modulation_plus_one": true, "gate_fn": "identity",
		"timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "euler_sign": 1.0},
	// transformer_allegro.py: each head's t/h/w thirds rotated by rotate-half with tables gathered
	// by the pipeline's long positions; no q/k norm, default scale, no causal mask; GELU-tanh FFN;
	// AdaLayerNormSingle (shift, scale, gate) plus each block's table, (1 + scale), x + gate·y
	"allegro": {"rope_layout": "half", "qk_norm": "none", "attention_scale": 0.0, "attention_causal": false, "mlp_act": "gelu_tanh",
		"mlp_glu": false, "modulation_plus_one": true, "gate_fn": "identity", "timestep_flip_sin_to_cos": true,
		"timestep_freq_shift": 0.0, "euler_sign": 1.0, "modulation_order": "shift,scale,gate", "final_norm_order": "shift,scale"},
	// transformer_mochi.py: interleaved per-head RoPE from learned frequencies, weightless RMSNorm q/k,
	// default scale, joint attention over [video, valid caption], SwiGLU FFNs, scale-only (1 + scale)
	// norms, an AdaLayerNormContinuous [scale, shift] head; the pipeline negates the output
	"ltx2": {"rope_layout": "interleaved", "rope_theta": 10000.0, "rope_position_max": []any{20.0, 2048.0, 2048.0}, "qk_norm": "rms",
		"mlp_act": "gelu_tanh", "modulation_plus_one": true},
	"mochi": {"rope_layout": "interleaved", "qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false, "mlp_act": "silu",
		"mlp_glu": true, "timestep_flip_sin_to_cos": true, "final_norm_order": "scale,shift", "euler_sign": -1.0},
	// consisid_transformer_3d.py: CogVideoX body (joint [text, video] attention, per-head LayerNorm q/k,
	// interleaved RoPE on the video rows, GELU-tanh FFN over both streams, shift/scale/gate (1 + scale),
	// x + gate·y, AdaLayerNorm shift, scale); perceiver cross-attention after block 0; output as is
	"consisid": {"rope_layout": "interleaved", "qk_norm": "layer", "attention_scale": 0.0, "attention_causal": false,
		"mlp_act": "gelu_tanh", "mlp_glu": false, "modulation_plus_one": true, "gate_fn": "identity",
		"modulation_order": "shift,scale,gate", "final_norm_order": "shift,scale", "timestep_flip_sin_to_cos": true,
		"timestep_freq_shift": 0.0, "euler_sign": 1.0},
	// transformer_cosmos.py: adaLN-LoRA (its own projection plus the shared 3·d timestep
	// embedding, chunked) before every attention, the FFN and the head, (1 + scale), x + gate·y;
	// half-layout RoPE (unbind −2) on self-attention only, per-head RMSNorm q/k, GELU (erf)
	// FFN, cos-first sinusoid of shift 0, linear patches
	"cosmos": {"rope_layout": "half", "qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false, "mlp_act": "gelu_erf",
		"mlp_glu": false, "modulation_plus_one": true, "gate_fn": "identity", "timestep_flip_sin_to_cos": true,
		"timestep_freq_shift": 0.0, "patch_layout": "c_ph_pw", "euler_sign": 1.0, "modulation_order": "shift,scale,gate",
		"final_norm_order": "shift,scale"},
	// transformer_z_image.py: complex (pair) RoPE from integer ids (axes 4/6/6, θ 256), per-head RMSNorm q/k, default
	// scale, an all-ones key mask; silu(w1)·w3 FFN; tanh gates; scale-only modulation (1 + scale);
	// the pipeline negates the output
	"zimage": {"rope_layout": "interleaved", "qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false, "mlp_act": "silu",
		"mlp_glu": true, "gate_fn": "tanh", "modulation_plus_one": true, "euler_sign": -1.0, "rope_axes": []any{4.0, 6.0, 6.0},
		"rope_theta": 256.0},
	// transformer_skyreels_v2.py (text to video): Wan's blocks; the timestep sinusoid computed in
	// float64 ([cos, sin], shift 0) and cast to f32, which the self-check reads rounded
	"skyreels_v2": {"rope_layout": "interleaved", "rope_axes": []any{6.0, 6.0, 6.0}, "rope_theta": 10000.0, "qk_norm": "rms",
		"attention_scale": 0.0, "mlp_act": "gelu_tanh", "mlp_glu": false, "modulation_plus_one": true, "gate_fn": "identity",
		"timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "euler_sign": 1.0},
	// transformer_anyflow.py (bidirectional): Wan blocks (interleaved 3-D RoPE of 6/6/6 channels in
	// complex128, θ 10⁴, RMSNorm q/k across heads, default scale, no mask, gelu_tanh FFN, (1 + scale),
	// x + gate·y, [cos, sin] sinusoid of shift 0); the target timestep r = the next σ·1000 embedded
	// beside t, the output used as is
	"anyflow": {"rope_layout": "interleaved", "rope_axes": []any{6.0, 6.0, 6.0}, "rope_theta": 10000.0, "qk_norm": "rms",
		"attention_scale": 0.0, "attention_causal": false, "mlp_act": "gelu_tanh", "mlp_glu": false, "modulation_plus_one": true,
		"gate_fn": "identity", "timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "euler_sign": 1.0},
	// transformer_chronoedit.py (Wan2.1 I2V body): interleaved 3-D RoPE (frame rows 0 and 7 at two
	// frames), RMSNorm q/k across heads, default scale, no mask; the image context's attention
	// added to the caption's; gelu_tanh FFN, 6-way (shift, scale, gate) with (1 + scale), x + gate·y,
	// [cos, sin] sinusoid of shift 0, final (shift, scale)
	"chronoedit": {"rope_layout": "interleaved", "qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false,
		"mlp_act": "gelu_tanh", "mlp_glu": false, "modulation_plus_one": true, "gate_fn": "identity",
		"timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "euler_sign": 1.0, "modulation_order": "shift,scale,gate",
		"final_norm_order": "shift,scale"},
	// transformer_hunyuan_video_framepack.py (HunyuanVideo body): interleaved 3-axis RoPE (4, 6, 6), θ 256,
	// on the image rows only; per-head RMSNorm q/k, default scale, no mask at batch 1; gelu_tanh FFN and
	// single-stream MLP, AdaLayerNormZero (shift, scale, gate) with (1 + scale), x + gate·y, [cos, sin]
	// sinusoid of shift 0, AdaLayerNormContinuous [scale, shift]
	"framepack": {"rope_layout": "interleaved", "rope_axes": []any{4.0, 6.0, 6.0}, "rope_theta": 256.0, "qk_norm": "rms",
		"attention_scale": 0.0, "attention_causal": false, "mlp_act": "gelu_tanh", "mlp_glu": false, "modulation_plus_one": true,
		"gate_fn": "identity", "timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "euler_sign": 1.0,
		"modulation_order": "shift,scale,gate", "final_norm_order": "scale,shift"},
	// transformer_flux2.py: 4-axis ids (t, h, w, l), axes (4, 4, 4, 4), θ 2000, interleaved pairs;
	// [text, image] joint attention, RMSNorm q/k, SwiGLU (silu(first half)·second half), modulation
	// (shift, scale, gate) with (1 + scale) from model-level linears, x + gate·y, final [scale, shift]
	"flux2": {"rope_layout": "interleaved", "rope_axes": []any{4.0, 4.0, 4.0, 4.0}, "rope_theta": 2000.0, "joint_order": "text_first",
		"qk_norm": "rms", "attention_scale": 0.0, "mlp_act": "silu", "mlp_glu": true, "modulation_plus_one": true,
		"modulation_order": "shift,scale,gate", "final_norm_order": "scale,shift", "gate_fn": "identity", "euler_sign": 1.0},
	// the same with a reference image (Flux2Pipeline's image argument): its latents joined after the noisy
	// ones, of the output's shape too, ids (10, h, w, 0); the velocity the noisy rows of the output
	"flux2_ref": {"rope_layout": "interleaved", "rope_theta": 2000.0, "joint_order": "text_first", "qk_norm": "rms",
		"mlp_act": "silu", "mlp_glu": true, "modulation_plus_one": true, "gate_fn": "identity", "euler_sign": 1.0},
	// transformer_hunyuanimage.py: [image, text] joint attention under a bool key mask, RoPE from the
	// latents' grid (axes 8, 8, θ 256) on the image rows only, RMSNorm q/k, gelu-tanh FFNs, AdaLayerNormZero
	// (shift, scale, gate) with (1 + scale), x + y·gate; the refiner's pairwise mask, not causal
	"hunyuanimage21": {"rope_layout": "interleaved", "rope_axes": []any{8.0, 8.0}, "rope_theta": 256.0, "joint_order": "image_first",
		"qk_norm": "rms", "attention_causal": false, "mlp_act": "gelu_tanh", "modulation_plus_one": true,
		"modulation_order": "shift,scale,gate", "final_norm_order": "scale,shift", "gate_fn": "identity", "euler_sign": 1.0},
	// the same file's distilled layout (use_meanflow, guidance_embeds): a second timestep, the next
	// step's σ·1000, embedded by its own MLP and averaged with the first; the pipeline passes σ·1000
	"hunyuanimage21_distilled": {"rope_layout": "interleaved", "rope_theta": 256.0, "joint_order": "image_first",
		"qk_norm": "rms", "mlp_act": "gelu_tanh", "modulation_plus_one": true, "gate_fn": "identity",
		"timestep_scale": 1.0, "euler_sign": 1.0},
	// transformer_ovis_image.py: Flux-style MMDiT, ids (0, l, l) and (0, h, w), axes (4, 6, 6), θ 10000,
	// interleaved pairs; SwiGLU FFNs (value·silu(gate)); RMSNorm q/k; (1 + scale); x + gate·y
	"ovis_image": {"rope_layout": "interleaved", "rope_axes": []any{4.0, 6.0, 6.0}, "rope_theta": 10000.0, "joint_order": "text_first",
		"qk_norm": "rms", "attention_causal": false, "mlp_act": "silu", "mlp_glu": true, "modulation_plus_one": true,
		"modulation_order": "shift,scale,gate", "final_norm_order": "scale,shift", "gate_fn": "identity", "euler_sign": 1.0},
	// transformer_longcat_image.py: ids (0, l, l) and (1, h + 512, w + 512), axes (4, 6, 6), θ 10000,
	// interleaved pairs; gelu-tanh FFNs; RMSNorm q/k; (1 + scale); x + gate·y
	"longcat_image": {"rope_layout": "interleaved", "rope_axes": []any{4.0, 6.0, 6.0}, "rope_theta": 10000.0, "joint_order": "text_first",
		"qk_norm": "rms", "attention_causal": false, "mlp_act": "gelu_tanh", "modulation_plus_one": true,
		"modulation_order": "shift,scale,gate", "final_norm_order": "scale,shift", "gate_fn": "identity", "euler_sign": 1.0},
	// transformer_bria_fibo.py: every block's caption rebuilt from the running caption's first half and
	// its own projection of a text-encoder layer; ids (0, 0, 0) and (0, h, w), axes (4, 6, 6), θ 10000,
	// interleaved pairs; RMSNorm q/k; gelu-tanh FFNs; (1 + scale); x + gate·y; the pipeline passes σ·1000
	"bria_fibo": {"rope_layout": "interleaved", "rope_axes": []any{4.0, 6.0, 6.0}, "rope_theta": 10000.0, "joint_order": "text_first",
		"qk_norm": "rms", "attention_causal": false, "attention_scale": 0.0, "mlp_act": "gelu_tanh", "mlp_glu": false,
		"modulation_plus_one": true, "modulation_order": "shift,scale,gate", "final_norm_order": "scale,shift", "gate_fn": "identity",
		"timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "timestep_scale": 1.0, "euler_sign": 1.0},
	// transformer_sana_video.py: ReLU linear attention whose numerator reads interleaved-RoPE'd kernels
	// (Wan's 3-D table, sections 12/10/10, θ 10⁴); SDPA cross-attention without RoPE, RMSNorm q/k across
	// heads, default scale; scale_shift_table + timestep (shift, scale, gate), (1 + scale), x + gate·y;
	// final [shift, scale]; [cos, sin] sinusoid of shift 0 over σ·1000
	"sana_video": {"attention_kernel": "relu", "rope_layout": "interleaved", "rope_axes": []any{12.0, 10.0, 10.0}, "rope_theta": 10000.0,
		"qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false, "modulation_plus_one": true, "gate_fn": "identity",
		"modulation_order": "shift,scale,gate", "final_norm_order": "shift,scale", "timestep_flip_sin_to_cos": true,
		"timestep_freq_shift": 0.0, "timestep_scale": 1.0, "euler_sign": 1.0},
	// transformer_glm_image.py: joint [text, image] attention, weightless LayerNorm q/k, half-layout 2-D
	// RoPE (8 + 8, θ 10⁴) on the image rows, default scale; one gelu-tanh FFN for both streams; 12-way
	// (shift, scale, gate per stream) with (1 + scale), x + y·gate; final [scale, shift]; 2×2 patches
	// channels first; [cos, sin] sinusoids of shift 0
	"glm_image": {"rope_layout": "half", "rope_axes": []any{8.0, 8.0}, "rope_theta": 10000.0, "joint_order": "text_first",
		"qk_norm": "layer", "attention_scale": 0.0, "attention_causal": false, "mlp_act": "gelu_tanh", "mlp_glu": false,
		"modulation_plus_one": true, "gate_fn": "identity", "final_norm_order": "scale,shift", "patch_layout": "c_ph_pw",
		"timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "euler_sign": 1.0},
	// transformer_ernie_image.py: rows sequence first, [image, text]; one model-level 6-way modulation
	// (shift, scale, gate) with (1 + scale), x + gate·y; RMSNorm q/k per head; RoPE angles repeated per
	// pair, applied rotate-half; gated FFN up·gelu(gate) (erf); final [scale, shift]; [sin, cos] sinusoids
	"ernie_image": {"rope_layout": "half", "qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false,
		"mlp_act": "gelu_erf", "mlp_glu": true, "modulation_plus_one": true, "gate_fn": "identity",
		"final_norm_order": "scale,shift", "timestep_flip_sin_to_cos": false, "timestep_freq_shift": 0.0, "euler_sign": 1.0},
	// transformer_kandinsky6.py: 2×2-matrix RoPE (interleaved pairs); RMSNorm q/k per head; GELU (erf)
	// FFNs without a gate; (scale + 1), x + gate·y, (shift, scale, gate); output [shift, scale];
	// [cos, sin] sinusoids of shift 0
	"kandinsky6": {"rope_layout": "interleaved", "qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false,
		"mlp_act": "gelu_erf", "mlp_glu": false, "modulation_plus_one": true, "gate_fn": "identity",
		"modulation_order": "shift,scale,gate", "final_norm_order": "shift,scale", "timestep_flip_sin_to_cos": true,
		"timestep_freq_shift": 0.0, "euler_sign": 1.0},
	// transformer_ideogram4.py: interleaved multi-axis RoPE (frequency i of one θ 5·10⁶ ladder turned
	// by t, h, w as i mod 3 within 3·section: sections 3/3/2 of 8), rotate-half; RMSNorm q/k per head,
	// default scale, a segment mask (not causal); scale-only (1 + scale), x + tanh(gate)·norm(y);
	// the pipeline steps with −v
	"ideogram4": {"rope_layout": "half", "rope_theta": 5e6, "rope_freq_axes": []any{0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0, 1.0},
		"qk_norm": "rms", "attention_scale": 0.0, "attention_causal": false, "modulation_plus_one": true, "gate_fn": "tanh",
		"euler_sign": -1.0},
	// ace_step_transformer.py: half-layout RoPE θ 1e6 (Qwen3's), a sliding window of |i − j| ≤ 2 in
	// the first layer (the band |i − j| < 3 of exec's window), RMS q/k norms,
	// SwiGLU, x·(1 + scale) + shift
	"ace_step": {"rope_layout": "half", "rope_theta": 1e6, "attention_window": 3.0, "qk_norm": "rms", "mlp_act": "silu",
		"mlp_glu": true, "modulation_plus_one": true},
	// transformer_cosmos3.py: rotate-half interleaved MRoPE, θ 5e6, sections (4, 2, 2): h and w
	// frequencies every third channel; the caption prefix causal; SwiGLU MLPs
	"cosmos3": {"rope_layout": "half", "rope_theta": 5e6, "rope_freq_axes": []any{0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0, 0.0},
		"attention_causal": true, "qk_norm": "rms", "mlp_act": "silu", "mlp_glu": true},
	// jit_transformer_2d.py: RoPE modules rotating adjacent pairs of q and k by their own
	// tables, axes of 8 channels (h, w), θ 10000; the pipeline steps with (z − x̂)/σ, sign +1
	"jit": {"rope_layout": "interleaved", "rope_theta": 10000.0, "rope_axes": []any{8.0, 8.0}, "qk_norm": "rms",
		"attention_causal": false, "mlp_act": "silu", "mlp_glu": true, "modulation_plus_one": true, "euler_sign": 1.0},
	// transformer_hidream_o1.py with Qwen3-VL's text decoder: MRoPE sections [2, 1, 1] interleaved
	// (T, H, W, T over 4 frequencies), θ 5·10⁶, rotate-half; per-head RMSNorm q/k; the timestep 1 − σ
	// times 1000 inside, [cos, sin]; the model predicts the clean patches and the loop steps with
	// v = (x − x̂)/σ (x-prediction, sign +1)
	"hidream_o1": {"rope_layout": "half", "rope_theta": 5e6, "rope_freq_axes": []any{0.0, 1.0, 2.0, 0.0},
		"qk_norm": "rms", "timestep_flip_sin_to_cos": true, "timestep_scale": 1000.0, "euler_sign": 1.0},
	// transformer_joyai_image.py: [image, text] joint attention (4 image rows, 5 caption rows: the
	// image the shorter stream) under a bool key mask, interleaved RoPE (t/h/w 4/6/6, θ 256) on the
	// image rows, per-head RMSNorm q/k, gelu-tanh FFNs, Wan-style (shift, scale, gate) with (1 + scale),
	// x + y·gate; a [cos, sin] sinusoid (flip_sin_to_cos, shift 0); the output stepped as is
	"joyai_image": {"rope_layout": "interleaved", "rope_axes": []any{4.0, 6.0, 6.0}, "rope_theta": 256.0, "joint_order": "image_first",
		"qk_norm": "rms", "attention_causal": false, "mlp_act": "gelu_tanh", "mlp_glu": false, "modulation_plus_one": true,
		"gate_fn": "identity", "timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0, "euler_sign": 1.0},
}

// discoverComplete discovers path (once per test binary for a repository
// fixture: discovered_test.go), failing the test unless the program makes
// everything from the request.
func discoverComplete(t *testing.T, path string) (*Result, *trace.Trace) {
	t.Helper()
	res, tr := discovered(t, path)
	if !res.Complete() {
		t.Fatalf("taken from the trace: %v", res.Opaque)
	}
	return res, tr
}

// TestUnseenSinusoidPositions: CTRL's positional encoding (no parameter,
// computed in the forward) is found as a sinusoid of positions 0…S−1
// added to the scaled embeddings: [sin | cos] halves over a geometric
// ladder of period 10000, one timestep_embed node in the program.
func TestUnseenSinusoidPositions(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "ctrl-f32.npz")
	res, _ := discoverComplete(t, path)
	found := 0
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "timestep_embed" {
			continue
		}
		found++
		ts := n.Attrs.Timestep
		if ts == nil || ts.Dim != 32 || ts.FlipSinToCos || ts.FreqShift != 0 || ts.MaxPeriod != 10000 || ts.Scale != 1 {
			t.Errorf("sinusoid %+v, want dim 32, [sin | cos], shift 0, period 10000, scale 1", ts)
		}
		if len(n.In) != 1 || !strings.HasSuffix(n.In[0], "/positions") {
			t.Errorf("sinusoid reads %v, want the positions constant", n.In)
		}
	}
	if found != 1 {
		t.Errorf("%d sinusoid nodes, want 1", found)
	}
	// the evidence: every layout scored, the winner's margin
	for _, v := range res.Doc.Program.Values {
		if strings.HasSuffix(v.Name, "/positions") && (!strings.Contains(v.Note, "margin ×") || strings.Count(v.Note, "sinusoid of positions") < 8) {
			t.Errorf("positions note %q lacks the candidates' scores", v.Note)
		}
	}
}

// TestUnseenShiftedRows: MobileBERT's trigram input is found as the word
// embeddings shifted up one row, themselves, and shifted down one row,
// the emptied rows zero, joined along the channels: one concat of three
// along the last axis, two of them shifts (a slice and a zero row joined
// along the rows, in the embeddings).
func TestUnseenShiftedRows(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "mobilebert-f32.npz")
	res, _ := discoverComplete(t, path)
	joins, shifts := 0, 0
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "concat" {
			continue
		}
		switch {
		case n.Attrs.Axis == 2 && len(n.In) == 3:
			joins++
		case n.Attrs.Axis == 1 && len(n.In) == 2 && strings.HasPrefix(n.Role, "text_encoder.embeddings."):
			shifts++
		}
	}
	if joins != 1 || shifts != 2 {
		t.Errorf("%d joins of three along the channels and %d row shifts, want 1 and 2", joins, shifts)
	}
}

// TestUnseenManySummed: LayoutLM's embeddings are the sum of nine
// tables' rows, the x and y tables each called twice at the same ids (two
// values of equal data, each taken once): eight adds in the embeddings,
// left to right in the order the rows were made, every table's rows read.
func TestUnseenManySummed(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "layoutlm-f32.npz")
	res, _ := discoverComplete(t, path)
	var read []string
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "add" || !strings.HasPrefix(n.Role, "text_encoder.embeddings.") {
			continue
		}
		for _, in := range n.In {
			if strings.Contains(in, "_embeddings") {
				read = append(read, in[:strings.LastIndex(in, ".")])
			}
		}
	}
	want := []string{"word_embeddings", "position_embeddings", "x_position_embeddings", "y_position_embeddings",
		"x_position_embeddings#1", "y_position_embeddings#1", "h_position_embeddings", "w_position_embeddings", "token_type_embeddings"}
	for i := range want {
		want[i] = "text_encoder.embeddings." + want[i]
	}
	if !slices.Equal(read, want) {
		t.Errorf("the embeddings' adds read %v, want %v", read, want)
	}
}

// TestUnseenRelBuckets: MPNet's relative attention bias reads T5's
// bidirectional buckets of the 24 positions: one rel_bucket node (32
// buckets, the table's rows; max distance 128, the usual one of the
// distances that reproduce the ids) read by the table's gather, the
// fitted distances named in the positions' note.
func TestUnseenRelBuckets(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "mpnet-f32.npz")
	res, _ := discoverComplete(t, path)
	var out string
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "rel_bucket" {
			continue
		}
		if out != "" {
			t.Fatal("two rel_bucket nodes, want one")
		}
		out = n.Out[0]
		if b := n.Attrs.Bucket; b == nil || b.NumBuckets != 32 || b.MaxDistance != 128 || !b.Bidirectional {
			t.Errorf("buckets %+v, want 32, max distance 128, bidirectional", b)
		}
	}
	gathered := false
	for _, n := range res.Doc.Program.Nodes {
		gathered = gathered || n.Op == "gather" && strings.HasSuffix(n.In[0], "relative_attention_bias.weight") && n.In[1] == out
	}
	if out == "" || !gathered {
		t.Errorf("rel_bucket %q not read by the bias table's gather", out)
	}
	for _, v := range res.Doc.Program.Values {
		if strings.HasSuffix(v.Name, "/query_positions") && !strings.Contains(v.Note, "max distances from 119 to 128") {
			t.Errorf("positions note %q lacks the distances that fit", v.Note)
		}
	}
}

// TestUnseenAttentionPlusConv: Nyströmformer's attention adds a
// depthwise convolution of the values along the sequence (kernel (65, 1),
// padding (32, 0)) before the heads are joined: per layer, a conv2d padded
// 32 on both axes whose middle 16 columns are kept, and the attention's
// output plus it.
func TestUnseenAttentionPlusConv(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "nystromformer-f32.npz")
	res, _ := discoverComplete(t, path)
	convs, kept, sums := 0, 0, 0
	for _, n := range res.Doc.Program.Nodes {
		switch {
		case n.Op == "conv2d" && n.Attrs.Conv != nil && n.Attrs.Conv.Pad == 32 && n.Attrs.Conv.Groups == 2:
			convs++
		case n.Op == "slice" && n.Attrs.Axis == 3 && n.Attrs.Start == 32 && n.Attrs.End == 48:
			kept++
		case n.Op == "add" && slices.ContainsFunc(n.In, func(in string) bool { return strings.Contains(in, ".attention.self.attention") }):
			sums++
		}
	}
	if convs != 2 || kept != 2 || sums != 2 {
		t.Errorf("%d convolutions padded 32, %d middle slices, %d attentions plus a value: want 2 of each", convs, kept, sums)
	}
}

// TestUnseenDynamicConv: ConvBERT's self-attention is found as attention
// joined per position with a dynamic convolution: per layer one softmax
// of the per-position kernel logits, nine taps (eight shifted copies of
// the rows, each a slice joined with a zero row, and the centre), and the
// attention's output joined with the taps' sum along the width.
func TestUnseenDynamicConv(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "convbert-f32.npz")
	res, _ := discoverComplete(t, path)
	softmaxes, shifts, joins := 0, 0, 0
	for _, n := range res.Doc.Program.Nodes {
		if !strings.Contains(n.Role, ".attention.self.") {
			continue
		}
		switch {
		case n.Op == "softmax":
			softmaxes++
		case n.Op == "concat" && n.Attrs.Axis == 1 && len(n.In) == 2:
			shifts++
		case n.Op == "concat" && n.Attrs.Axis == 2 && len(n.In) == 2 && strings.Contains(n.In[0], ".attention.self.attention"):
			joins++
		}
	}
	if softmaxes != 2 || shifts != 16 || joins != 2 {
		t.Errorf("%d kernel softmaxes, %d shifted rows, %d joins: want 2, 16 and 2", softmaxes, shifts, joins)
	}
}

// TestUnseenAngularAttention: YOSO's attention is one angular_attention
// node per layer, 2 heads, power 9 (hash_code_len), read from the scope's
// q, k and v projections.
func TestUnseenAngularAttention(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "yoso-f32.npz")
	res, _ := discoverComplete(t, path)
	n := 0
	for _, nd := range res.Doc.Program.Nodes {
		if nd.Op != "angular_attention" {
			continue
		}
		n++
		if a := nd.Attrs.Angular; a == nil || a.Heads != 2 || a.Power != 9 {
			t.Errorf("%s: %+v, want 2 heads, power 9", nd.Role, a)
		}
		for i, want := range []string{".query.", ".key.", ".value."} {
			if !strings.Contains(nd.In[i], want) {
				t.Errorf("%s reads %v, want q, k, v from the projections", nd.Role, nd.In)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d angular attentions, want 2", n)
	}
}

// TestUnseenReturnedBias: gpt_neox_japanese's last attention returns its
// dense bias beside its output; the block's residual is found as
// residual + (output + bias), the bias read from the parameter.
func TestUnseenReturnedBias(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "gpt_neox_japanese-f32.npz")
	res, _ := discoverComplete(t, path)
	adds := 0
	for _, n := range res.Doc.Program.Nodes {
		if n.Op == "add" && slices.ContainsFunc(n.In, func(in string) bool { return strings.HasSuffix(in, ".attention.dense_bias") }) {
			adds++
		}
	}
	if adds != 1 {
		t.Errorf("%d adds read the returned bias, want 1 (the last layer's)", adds)
	}
}

// TestUnseenAttentionSinks: gpt_oss (fixtures/unseen, a faithful torch
// reimplementation of transformers' code, bench/unseen/capture_reimpl.py)
// has attention sinks, a sliding window of 4 in its first layer and full
// causal attention in its second, and RoPE from a YaRN table of half a
// head's width carrying a magnitude. Discovery must explain every
// attention output with the sink bound to the attention's [H] parameter
// and read the windows and the RoPE table (TestUnseenArchitectures checks
// the whole document and its generation).
func TestUnseenAttentionSinks(t *testing.T) {
	res, _ := discovered(t, filepath.Join("..", "..", "fixtures", "unseen", "gpt_oss-f32.npz"))
	for _, u := range res.Unexplained {
		if strings.Contains(u, "o_proj/arg0") || strings.Contains(u, "rotary_emb/") {
			t.Errorf("%s not explained", u)
		}
	}
	pg := res.Doc.Program
	weights := map[string]string{}
	for _, v := range pg.Values {
		if v.Kind == "weight" {
			weights[v.Name] = v.Source
		}
	}
	// each of the program's attentions reads its own module's sink logits
	bound := 0
	for _, n := range pg.Nodes {
		if n.Op != "attention" {
			continue
		}
		if len(n.In) < 6 || !strings.HasSuffix(weights[n.In[5]], ".self_attn.sinks") {
			t.Errorf("attention node %v reads no sinks", n.In)
		}
		bound++
	}
	if bound != 2 {
		t.Errorf("%d attention nodes in the program, want one per layer (2)", bound)
	}
	var sinks []string
	for _, f := range res.Doc.Factors {
		if f.Name == "attention_sinks" {
			sinks = append(sinks, f.Scope)
		}
	}
	if want := []string{"text_encoder.layers.0.self_attn", "text_encoder.layers.1.self_attn"}; !slices.Equal(sinks, want) {
		t.Errorf("attention sinks found at %v, want %v", sinks, want)
	}
	windows := map[string]any{}
	for _, f := range res.Doc.Factors {
		switch f.Name {
		case "attention_window":
			windows[f.Scope] = f.Value
		case "attention_sinks", "rope_layout", "attention_causal":
			if want := map[string]any{"attention_sinks": true, "rope_layout": "half", "attention_causal": true}[f.Name]; !sameValue(f.Value, want) {
				t.Errorf("%s at %s = %v, want %v", f.Name, f.Scope, f.Value, want)
			}
		}
	}
	if len(windows) != 1 || !sameValue(windows["text_encoder.layers.0.self_attn"], 4.0) {
		t.Errorf("attention windows %v, want 4 in the first layer only", windows)
	}
}

// selfChecked runs the self-check on doc (check.Apply writes its result
// in) and fails the test unless the document is complete: every captured
// boundary reproduced teacher forced at every step.
// namesWhatItShows: a document names the catalogue factors its program
// shows (an op that holds the fact → the factor's name is among the
// document's factors), however the program search came to the op.
func namesWhatItShows(t *testing.T, doc *semantics.Document) {
	t.Helper()
	shows := map[string][]string{
		"timestep_embed": {"timestep_flip_sin_to_cos", "timestep_freq_shift", "timestep_scale"},
		"gated_residual": {"gate_fn"},
		"modulate":       {"modulation_plus_one"},
		"rope_table":     {"rope_theta", "rope_axes"},
		"attention":      {"attention_causal", "attention_scale", "rope_layout", "qk_norm"},
	}
	named := map[string]bool{}
	for _, f := range doc.Factors {
		named[f.Name] = true
	}
	for _, n := range doc.Program.Nodes {
		for _, name := range shows[n.Op] {
			if !named[name] {
				t.Errorf("the program holds a %s node and the document names no %s", n.Op, name)
				named[name] = true // once
			}
		}
	}
}

func selfChecked(t *testing.T, doc *semantics.Document, tr *trace.Trace) {
	t.Helper()
	res, err := check.Self(cpu.New(0), doc, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	check.Apply(doc, res)
	if res.NotRun != "" {
		t.Errorf("self-check not run: %s", res.NotRun)
	}
	for _, f := range res.Failures {
		t.Errorf("self-check: %s not reproduced at step %d (%d steps): rel-RMS %.3g > %.3g, %d masked values mismatched", f.Boundary, f.Step, f.Steps, f.RelRMS, f.Tolerance, f.Mismatched)
	}
	if doc.Status != semantics.StatusComplete {
		t.Errorf("self-check: status %s", doc.Status)
	}
}

// TestUnseenSparseMixer: phimoe (fixtures/unseen, a faithful torch
// reimplementation, bench/unseen/capture_reimpl.py) routes by sparsemixer's
// eval path with router_jitter_noise 0.05: each of its two picks weighted
// by the softmax over the logits left within 2·0.05 = 0.1 of it,
// relatively. Both layers' routers must be read as stepwise routes whose
// margin reproduces the weights; the margin each takes is the midpoint of
// what its layer's weights allow, so it is near 0.1, not equal to it.
func TestUnseenSparseMixer(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "phimoe-f32.npz"))
	routes := 0
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "route" {
			continue
		}
		routes++
		r := n.Attrs.Route
		if r == nil || !r.Stepwise || r.K != 2 || r.Margin < 0.05 || r.Margin > 0.2 {
			t.Errorf("route node %v: %+v, want stepwise top 2 with a margin near 0.1", n.Out, r)
		}
	}
	if routes != 2 {
		t.Errorf("%d route nodes, want one per layer (2)", routes)
	}
}

// TestUnseenDifferentialAttention: diffllama (fixtures/unseen, a faithful
// torch 1.13 reimplementation) computes λ = exp(Σ λ_q1·λ_k1) − exp(Σ
// λ_q2·λ_k2) + λ_init per layer, λ_init = 1 − the scale applied after the
// groupnorm; the document must read that pairing from the vectors,
// decisively, in every layer.
func TestUnseenDifferentialAttention(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "diffllama-f32.npz")
	res, _ := discoverComplete(t, path)
	n := 0
	for _, f := range res.Doc.Factors {
		if f.Name != "attention_lambda" {
			continue
		}
		n++
		layer := strings.TrimSuffix(f.Scope, ".self_attn")
		want := fmt.Sprintf("λ = exp(Σ %[1]s.self_attn.lambda_q1·%[1]s.self_attn.lambda_k1) − exp(Σ %[1]s.self_attn.lambda_q2·%[1]s.self_attn.lambda_k2) + ", layer)
		if f.Value != "vectors" || !f.Decisive || !strings.Contains(f.Evidence.Note, want) {
			t.Errorf("%s: %v decisive=%v margin %v: %s", f.Scope, f.Value, f.Decisive, f.Margin, f.Evidence.Note)
		}
	}
	if n != 2 {
		t.Errorf("%d attention_lambda factors, want one per layer (2)", n)
	}
}

// TestUnseenSelectiveScan: each replica's mixer is found as one ssm_scan
// (bamba's and nemotron_h's Mamba-2: over heads of the activation's
// pieces, A [H], B and C in 1 or 2 groups; falcon_h1's times silu of a
// cut of in_proj's output, no norm; mamba's, jamba's and falcon_mamba's
// Mamba-1 (jamba's B and C normed by modules of their own, falcon_mamba's
// by weightless RMS norms in the forward): its channels
// the heads, A [W, N] per channel and state), its skip a weight vector
// read as it is, and its causal conv1d as one depthwise conv2d (one
// filter per channel) padded by kernel − 1; nemotron_h's gated norm is an
// RMS norm over groups of 32 channels.
func TestUnseenSelectiveScan(t *testing.T) {
	for _, c := range []struct {
		trace        string
		layers       int   // mixers
		groups       int   // the conv's channels
		rate         []int // A's shape
		stateOperand []int // B's and C's shape
		normGroup    int   // a norm node's group (0: none wanted)
	}{
		{"bamba-f32.npz", 1, 80, []int{4}, []int{1, 8, 1, 8}, 0},
		{"mamba-f32.npz", 2, 64, []int{64, 8}, []int{1, 8, 1, 8}, 0},
		{"nemotron_h-f32.npz", 1, 96, []int{4}, []int{1, 8, 2, 8}, 32},
		{"falcon_h1-f32.npz", 2, 80, []int{4}, []int{1, 8, 1, 8}, 0},
		{"jamba-f32.npz", 1, 64, []int{64, 8}, []int{1, 8, 1, 8}, 0},
		{"falcon_mamba-f32.npz", 2, 64, []int{64, 8}, []int{1, 8, 1, 8}, 0},
	} {
		t.Run(c.trace, func(t *testing.T) {
			res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", c.trace))
			kinds, shapes := map[string]string{}, map[string][]int{}
			for _, v := range res.Doc.Program.Values {
				kinds[v.Name], shapes[v.Name] = v.Kind, v.Shape
			}
			var scans, convs, grouped int
			for _, n := range res.Doc.Program.Nodes {
				switch n.Op {
				case "norm":
					if c.normGroup > 0 && n.Attrs.Norm != nil && n.Attrs.Norm.Group == c.normGroup {
						grouped++
					}
				case "ssm_scan":
					scans++
					if len(n.In) != 6 || kinds[n.In[5]] != "weight" {
						t.Errorf("ssm_scan reads %v: want x, dt, A, B, C and a weight D", n.In)
						continue
					}
					if !slices.Equal(shapes[n.In[2]], c.rate) || !slices.Equal(shapes[n.In[3]], c.stateOperand) {
						t.Errorf("ssm_scan A %v, B %v: want %v, %v", shapes[n.In[2]], shapes[n.In[3]], c.rate, c.stateOperand)
					}
				case "conv2d":
					convs++
					if cv := n.Attrs.Conv; cv == nil || cv.Pad != 3 || cv.Groups != c.groups {
						t.Errorf("conv2d attrs %+v: want pad 3 (kernel 4, causal), %d groups (depthwise)", cv, c.groups)
					}
				}
			}
			if scans != c.layers || convs != c.layers {
				t.Errorf("%d ssm_scan and %d conv2d nodes, want %d of each", scans, convs, c.layers)
			}
			if c.normGroup > 0 && grouped != c.layers {
				t.Errorf("%d norms over groups of %d, want %d", grouped, c.normGroup, c.layers)
			}
		})
	}
}

// TestUnseenRecurrences: the recurrent replicas' recurrences are found as
// ssm_scans of one head of width 1 and one state per channel, without
// the skip: recurrent_gemma's RG-LRU one per layer (its causal conv1d a
// depthwise conv2d padded by 3), rwkv's WKV two per layer (the decayed
// sums of e^k·v and of e^k).
func TestUnseenRecurrences(t *testing.T) {
	for _, c := range []struct {
		trace        string
		scans, convs int
	}{
		{"recurrent_gemma-f32.npz", 2, 2},
		{"rwkv-f32.npz", 4, 0},
	} {
		t.Run(c.trace, func(t *testing.T) {
			res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", c.trace))
			shapes := map[string][]int{}
			for _, v := range res.Doc.Program.Values {
				shapes[v.Name] = v.Shape
			}
			var scans, convs int
			for _, n := range res.Doc.Program.Nodes {
				switch n.Op {
				case "ssm_scan":
					scans++
					if len(n.In) != 6 || n.In[5] != "" {
						t.Errorf("ssm_scan reads %v: want x, dt, A, B, C and no D", n.In)
						continue
					}
					if !slices.Equal(shapes[n.In[2]], []int{32}) || !slices.Equal(shapes[n.In[3]], []int{1, 8, 32, 1}) {
						t.Errorf("ssm_scan A %v, B %v: want [32], [1 8 32 1]", shapes[n.In[2]], shapes[n.In[3]])
					}
				case "conv2d":
					convs++
					if cv := n.Attrs.Conv; cv == nil || cv.Pad != 3 || cv.Groups != 32 {
						t.Errorf("conv2d attrs %+v: want pad 3 (kernel 4, causal), 32 groups (depthwise)", cv)
					}
				}
			}
			if scans != c.scans || convs != c.convs {
				t.Errorf("%d ssm_scan and %d conv2d nodes, want %d and %d", scans, convs, c.scans, c.convs)
			}
		})
	}
}

// TestUnseenLinearAttention: minimax's lightning attention (layer 0 of
// two, four heads of 8) is found as one ssm_scan over a D×D state per head
// (x = v, B = k, C = q [1, 8, 4, 8], no skip), its per-head rates the
// buffer's −slope_h = −2^(−8(h+1)/4)·(1 + 1e-5) read off the values.
func TestUnseenLinearAttention(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "minimax-f32.npz"))
	vals := map[string]int{}
	for i, v := range res.Doc.Program.Values {
		vals[v.Name] = i
	}
	var scans int
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "ssm_scan" {
			continue
		}
		scans++
		if len(n.In) != 6 || n.In[5] != "" {
			t.Fatalf("ssm_scan reads %v: want x, dt, A, B, C and no D", n.In)
		}
		a := res.Doc.Program.Values[vals[n.In[2]]]
		for _, in := range []int{0, 3, 4} {
			if s := res.Doc.Program.Values[vals[n.In[in]]].Shape; !slices.Equal(s, []int{1, 8, 4, 8}) {
				t.Errorf("ssm_scan input %d of shape %v, want [1 8 4 8]", in, s)
			}
		}
		if len(a.Data) != 4 {
			t.Fatalf("A %v: want 4 rates held as a constant", a.Data)
		}
		for h, got := range a.Data {
			want := -math.Pow(2, -8*float64(h+1)/4) * (1 + 1e-5)
			if math.Abs(float64(got)-want) > 1e-5*math.Abs(want) {
				t.Errorf("head %d rate %g, want %g", h, got, want)
			}
		}
	}
	if scans != 1 {
		t.Errorf("%d ssm_scan nodes, want 1", scans)
	}
}

// TestUnseenDeltaRule: qwen3_next's gated DeltaNet (layer 0, 4 value
// heads of 8 over 2 key groups of 8) is found as one delta_scan reading q
// and k per key group [1, 8, 2, 8] and v [1, 8, 4, 8].
func TestUnseenDeltaRule(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "qwen3_next-f32.npz"))
	shapes := map[string][]int{}
	for _, v := range res.Doc.Program.Values {
		shapes[v.Name] = v.Shape
	}
	var scans int
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "delta_scan" {
			continue
		}
		scans++
		want := [][]int{{1, 8, 2, 8}, {1, 8, 2, 8}, {1, 8, 4, 8}, {1, 8, 4}, {1, 8, 4}}
		for i, in := range n.In {
			if !slices.Equal(shapes[in], want[i]) {
				t.Errorf("delta_scan input %d of shape %v, want %v", i, shapes[in], want[i])
			}
		}
	}
	if scans != 1 {
		t.Errorf("%d delta_scan nodes, want 1", scans)
	}
}
