package cpu

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// The op-level conformance checks: every op fed the reference's own inputs
// and parameters at a captured boundary (teacher forcing), scored against
// the captured output. Module paths here are fixture addresses, read from
// ../shared/conformance/README.md; the ops know nothing of them.

// attnSpecs are the attention rounding variants reported side by side.
func attnSpecs(f precision.Format) map[string]exec.Spec {
	if f == precision.F32 {
		return map[string]exec.Spec{"": exec.Out(f)}
	}
	return map[string]exec.Spec{
		"":          exec.Out(f),
		"[probs]":   {Out: f, Round: exec.RoundProbs},
		"[weights]": {Out: f, Round: exec.RoundWeights},
	}
}

func eulerSpecs(f precision.Format) map[string]exec.Spec {
	return map[string]exec.Spec{
		"":             exec.Out(f),
		"[round dt·v]": {Out: f, Round: exec.RoundProduct},
	}
}

// rmsHF is RMSNorm as HF Llama and diffusers write it: x̂ in f32, cast to
// the activation format, then ·γ.
func rmsHF(f precision.Format) exec.Spec { return exec.Spec{Out: f, Round: exec.RoundNormalized} }

var (
	layer6 = exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}
	rms6   = exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6}
	ts256  = func(scale float32) exec.TimestepParams {
		return exec.TimestepParams{Dim: 256, FlipSinToCos: true, Scale: scale, MaxPeriod: 10000}
	}
	tsVariants = map[string]exec.Math{"": exec.MathPrecise, "[recip div]": exec.MathRecipDiv}
)

func checkFlux(c *conf) {
	f := c.act
	c.checkLinears(exec.Out(f))
	c.checkNorms("norm.layer", "transformer.*norm*.norm", layer6, exec.Out(f))
	c.checkNorms("norm.layer", "transformer.transformer_blocks.*.norm2*", layer6, exec.Out(f))
	// torch.nn.RMSNorm (fused: x̂·γ in f32, rounded once), not diffusers' RMSNorm.
	c.checkNorms("norm.rms", "transformer.*.attn.norm_*", rms6, exec.Out(f))
	c.checkNorms("norm.rms[round x̂]", "transformer.*.attn.norm_*", rms6, rmsHF(f))
	c.checkActs("act.silu", "transformer.*silu", exec.ActSiLU, false, exec.Out(f))
	c.checkActs("act.silu", "transformer.time_text_embed.*.act*", exec.ActSiLU, false, exec.Out(f))
	c.checkActs("act.gelu_tanh", "transformer.single_transformer_blocks.*.act_mlp", exec.ActGELUTanh, false, exec.Out(f))
	c.checkActs("act.gelu_tanh", "transformer.transformer_blocks.*.ff*.net.0", exec.ActGELUTanh, true, exec.Out(f))
	lin6 := func(mod string, i int) src { return src{mod: mod, port: "out", chunks: 6, idx: i} }
	c.checkModulate("transformer.transformer_blocks", []modCheck{
		{norm: src{mod: "norm1.norm", port: "out"}, shift: lin6("norm1.linear", 0), scale: lin6("norm1.linear", 1), target: src{mod: "norm1", port: "out.0"}},
		{norm: src{mod: "norm1_context.norm", port: "out"}, shift: lin6("norm1_context.linear", 0), scale: lin6("norm1_context.linear", 1), target: src{mod: "norm1_context", port: "out.0"}},
		{norm: src{mod: "norm2", port: "out"}, shift: src{mod: "norm1", port: "out.2"}, scale: src{mod: "norm1", port: "out.3"}, target: src{mod: "ff", port: "arg0"}},
		{norm: src{mod: "norm2_context", port: "out"}, shift: src{mod: "norm1_context", port: "out.2"}, scale: src{mod: "norm1_context", port: "out.3"}, target: src{mod: "ff_context", port: "arg0"}},
	}, exec.Composed(f))
	c.checkModulate("transformer.single_transformer_blocks", []modCheck{
		{norm: src{mod: "norm.norm", port: "out"}, shift: src{mod: "norm.linear", port: "out", chunks: 3, idx: 0}, scale: src{mod: "norm.linear", port: "out", chunks: 3, idx: 1}, target: src{mod: "norm", port: "out.0"}},
	}, exec.Composed(f))
	c.checkGated("transformer.transformer_blocks", []gateCheck{
		{x: []src{{port: "kw.hidden_states"}}, y: src{mod: "attn", port: "out.0"}, gate: src{mod: "norm1", port: "out.1"}, target: []src{{mod: "norm2", port: "arg0"}}},
		{x: []src{{mod: "norm2", port: "arg0"}}, y: src{mod: "ff", port: "out"}, gate: src{mod: "norm1", port: "out.4"}, target: []src{{port: "out.1"}}},
		{x: []src{{port: "kw.encoder_hidden_states"}}, y: src{mod: "attn", port: "out.1"}, gate: src{mod: "norm1_context", port: "out.1"}, target: []src{{mod: "norm2_context", port: "arg0"}}},
		{x: []src{{mod: "norm2_context", port: "arg0"}}, y: src{mod: "ff_context", port: "out"}, gate: src{mod: "norm1_context", port: "out.4"}, target: []src{{port: "out.0"}}},
	}, exec.Composed(f))
	c.checkGated("transformer.single_transformer_blocks", []gateCheck{
		{x: []src{{port: "kw.encoder_hidden_states"}, {port: "kw.hidden_states"}}, y: src{mod: "proj_out", port: "out"}, gate: src{mod: "norm", port: "out.1"}, target: []src{{port: "out.0"}, {port: "out.1"}}},
	}, exec.Composed(f))
	c.checkAttention("transformer.transformer_blocks", attnCheck{
		q:   []src{{mod: "attn.norm_added_q", port: "out"}, {mod: "attn.norm_q", port: "out"}},
		k:   []src{{mod: "attn.norm_added_k", port: "out"}, {mod: "attn.norm_k", port: "out"}},
		v:   []src{{mod: "attn.add_v_proj", port: "out"}, {mod: "attn.to_v", port: "out"}},
		cos: []src{{port: "kw.image_rotary_emb.0"}}, sin: []src{{port: "kw.image_rotary_emb.1"}},
		out:    []src{{mod: "attn.to_add_out", port: "arg0"}, {mod: "attn.to_out.0", port: "arg0"}},
		layout: exec.RopeInterleaved, ropeSpec: exec.Out(f), heads: 4,
	}, attnSpecs(f))
	c.checkAttention("transformer.single_transformer_blocks", attnCheck{
		q:   []src{{mod: "attn.norm_q", port: "out"}},
		k:   []src{{mod: "attn.norm_k", port: "out"}},
		v:   []src{{mod: "attn.to_v", port: "out"}},
		cos: []src{{port: "kw.image_rotary_emb.0"}}, sin: []src{{port: "kw.image_rotary_emb.1"}},
		out:    []src{{mod: "attn", port: "out"}},
		layout: exec.RopeInterleaved, ropeSpec: exec.Out(f), heads: 4,
	}, attnSpecs(f))
	c.checkTimestep("transformer.time_text_embed.time_proj", ts256(1), tsVariants)
	c.checkRopeTable("transformer.pos_embed", "arg0", exec.RopeTableParams{
		Theta: 10000, AxesDims: []int{4, 6, 6}, Layout: exec.RopeInterleaved,
		FreqFormat: precision.F64, AngleFormat: precision.F64,
	}, precision.F32)
	c.checkModelTimestep("transformer", exec.TimestepTransform{Scale: 1, Format: f})
	c.checkEuler("transformer", eulerSpecs(f))
}

func TestConformanceFluxBF16(t *testing.T) { runConf(t, "flux-bf16", checkFlux) }
func TestConformanceFluxF32(t *testing.T)  { runConf(t, "flux-f32", checkFlux) }

// expect is what a check must reach, pooled over its boundaries.
type expect struct {
	minExact  float64 // fraction bit-exact in the stored format
	maxRelRMS float64 // worst boundary's rel-RMS
}

// bf16Half is half a bf16 ulp, relative: rel-RMS at or below it means the
// values differ by less than if every one were off by half an ulp.
const bf16Half = 1.0 / 512

// expectations: bit-exact wherever PyTorch's arithmetic is elementwise and
// deterministic; the GEMM-based checks (linear, attention), whose
// summation order differs, within bf16 rounding (or 1e-6 in f32); ops whose
// reference uses CUDA's/Sleef's own exp, sin, cos (timestep sinusoid) or
// differently ordered statistics (norms in f32) to their f32 error.
func expectations(f precision.Format) map[string]expect {
	if f == precision.F32 {
		return map[string]expect{
			"modulate": {1, 0}, "gated_residual": {1, 0}, "residual_add": {1, 0},
			"euler_step": {1, 0}, "euler_step[round dt·v]": {1, 0}, "sampler_timestep": {1, 0},
			"act.silu": {0, 1e-6}, "act.gelu_tanh": {0, 1e-6}, "glu": {0, 1e-6},
			"norm.layer": {0, 1e-6}, "norm.rms": {0, 1e-6}, "linear": {0, 1e-6},
			"rope+attention": {0, 1e-6}, "rope_table.cos": {0, 1e-7}, "rope_table.sin": {0, 1e-7},
			"timestep_embed": {0, 1e-5},
		}
	}
	return map[string]expect{
		"act.silu": {1, 0}, "act.gelu_tanh": {1, 0}, "glu": {1, 0},
		"modulate": {1, 0}, "gated_residual": {1, 0}, "residual_add": {1, 0},
		"norm.rms": {1, 0}, "norm.layer": {0.9999, bf16Half},
		"euler_step[round dt·v]": {1, 0}, "sampler_timestep": {1, 0},
		"rope_table.cos": {1, 0}, "rope_table.sin": {1, 0},
		"linear": {0.999, bf16Half}, "rope+attention[weights]": {0.999, bf16Half},
		"timestep_embed": {0, 2e-5}, "timestep_embed→bf16": {0.99, bf16Half},
	}
}

func runConf(t *testing.T, name string, check func(*conf)) map[string]confRow {
	c := openConf(t, name)
	check(c)
	got := c.summary()
	for name, e := range expectations(c.act) {
		r, ok := got[name]
		if !ok {
			continue // not every model has every op
		}
		if r.exact < e.minExact || r.relRMS > e.maxRelRMS {
			t.Errorf("%s %s: exact %.5f%% (want ≥ %.5f%%), max rel-RMS %.3g (want ≤ %.3g)",
				c.name, name, 100*r.exact, 100*e.minExact, r.relRMS, e.maxRelRMS)
		}
	}
	return got
}

func checkQwen(c *conf) {
	f := c.act
	c.checkLinears(exec.Out(f))
	c.checkNorms("norm.layer", "transformer.transformer_blocks.*_norm[12]", layer6, exec.Out(f))
	c.checkNorms("norm.layer", "transformer.norm_out.norm", layer6, exec.Out(f))
	for _, g := range []string{"transformer.*.attn.norm_*", "transformer.txt_norm"} {
		c.checkNorms("norm.rms", g, rms6, rmsHF(f))
		c.checkNorms("norm.rms[fused]", g, rms6, exec.Out(f))
	}
	c.checkActs("act.silu", "transformer.*_mod.0", exec.ActSiLU, false, exec.Out(f))
	c.checkActs("act.silu", "transformer.*silu", exec.ActSiLU, false, exec.Out(f))
	c.checkActs("act.silu", "transformer.time_text_embed.*.act", exec.ActSiLU, false, exec.Out(f))
	c.checkActs("act.gelu_tanh", "transformer.transformer_blocks.*_mlp.net.0", exec.ActGELUTanh, true, exec.Out(f))
	mod := func(stream string, i int) src { return src{mod: stream + "_mod.1", port: "out", chunks: 6, idx: i} }
	c.checkModulate("transformer.transformer_blocks", []modCheck{
		{norm: src{mod: "img_norm1", port: "out"}, shift: mod("img", 0), scale: mod("img", 1), target: src{mod: "attn", port: "kw.hidden_states"}},
		{norm: src{mod: "txt_norm1", port: "out"}, shift: mod("txt", 0), scale: mod("txt", 1), target: src{mod: "attn", port: "kw.encoder_hidden_states"}},
		{norm: src{mod: "img_norm2", port: "out"}, shift: mod("img", 3), scale: mod("img", 4), target: src{mod: "img_mlp", port: "arg0"}},
		{norm: src{mod: "txt_norm2", port: "out"}, shift: mod("txt", 3), scale: mod("txt", 4), target: src{mod: "txt_mlp", port: "arg0"}},
	}, exec.Composed(f))
	c.checkGated("transformer.transformer_blocks", []gateCheck{
		{x: []src{{port: "kw.hidden_states"}}, y: src{mod: "attn", port: "out.0"}, gate: mod("img", 2), target: []src{{mod: "img_norm2", port: "arg0"}}},
		{x: []src{{mod: "img_norm2", port: "arg0"}}, y: src{mod: "img_mlp", port: "out"}, gate: mod("img", 5), target: []src{{port: "out.1"}}},
		{x: []src{{port: "kw.encoder_hidden_states"}}, y: src{mod: "attn", port: "out.1"}, gate: mod("txt", 2), target: []src{{mod: "txt_norm2", port: "arg0"}}},
		{x: []src{{mod: "txt_norm2", port: "arg0"}}, y: src{mod: "txt_mlp", port: "out"}, gate: mod("txt", 5), target: []src{{port: "out.0"}}},
	}, exec.Composed(f))
	c.checkAttention("transformer.transformer_blocks", attnCheck{
		q:           []src{{mod: "attn.norm_added_q", port: "out"}, {mod: "attn.norm_q", port: "out"}},
		k:           []src{{mod: "attn.norm_added_k", port: "out"}, {mod: "attn.norm_k", port: "out"}},
		v:           []src{{mod: "attn.add_v_proj", port: "out"}, {mod: "attn.to_v", port: "out"}},
		cos:         []src{{port: "kw.image_rotary_emb.1"}, {port: "kw.image_rotary_emb.0"}},
		sin:         []src{{port: "kw.image_rotary_emb.1"}, {port: "kw.image_rotary_emb.0"}},
		out:         []src{{mod: "attn.to_add_out", port: "arg0"}, {mod: "attn.to_out.0", port: "arg0"}},
		complexRope: true, maskFrom: &src{port: "kw.encoder_hidden_states_mask"},
		layout: exec.RopeInterleaved, ropeSpec: exec.Out(f), heads: 4, mask: exec.MaskExplicit,
	}, attnSpecs(f))
	c.checkTimestep("transformer.time_text_embed.time_proj", ts256(1000), tsVariants)
	c.checkModelTimestep("transformer", exec.TimestepTransform{Scale: 1, Format: f})
	c.checkEuler("transformer", eulerSpecs(f))
}

func TestConformanceQwenImageBF16(t *testing.T) { runConf(t, "qwenimage-bf16", checkQwen) }
func TestConformanceQwenImageF32(t *testing.T)  { runConf(t, "qwenimage-f32", checkQwen) }

func checkLlama(c *conf) {
	f := c.act
	c.checkLinears(exec.Out(f))
	c.checkNorms("norm.rms", "text_encoder.*norm", rms6, rmsHF(f))
	c.checkNorms("norm.rms[fused]", "text_encoder.*norm", rms6, exec.Out(f))
	c.checkActs("act.silu", "text_encoder.layers.*.mlp.act_fn", exec.ActSiLU, false, exec.Out(f))
	c.checkGLU("text_encoder.layers", src{mod: "mlp.gate_proj", port: "out"}, src{mod: "mlp.up_proj", port: "out"},
		src{mod: "mlp.down_proj", port: "arg0"}, exec.ActSiLU, exec.Composed(f))
	c.checkAdds("text_encoder.layers", [][3]src{
		{{port: "arg0"}, {mod: "self_attn", port: "out.0"}, {mod: "post_attention_layernorm", port: "arg0"}},
		{{mod: "post_attention_layernorm", port: "arg0"}, {mod: "mlp", port: "out"}, {port: "out"}},
	}, exec.Out(f))
	c.checkAttention("text_encoder.layers", attnCheck{
		q:   []src{{mod: "self_attn.q_proj", port: "out"}},
		k:   []src{{mod: "self_attn.k_proj", port: "out"}},
		v:   []src{{mod: "self_attn.v_proj", port: "out"}},
		cos: []src{{port: "kw.position_embeddings.0"}}, sin: []src{{port: "kw.position_embeddings.1"}},
		out:    []src{{mod: "self_attn.o_proj", port: "arg0"}},
		layout: exec.RopeHalf, ropeSpec: exec.Composed(f), heads: 4, kv: 2, mask: exec.MaskCausal,
	}, attnSpecs(f))
	freq := precision.F32
	if f == precision.BF16 {
		freq = precision.BF16 // the whole-model cast reaches the inv_freq buffer
	}
	c.checkRopeTable("text_encoder.rotary_emb", "kw.position_ids", exec.RopeTableParams{
		Theta: 10000, AxesDims: []int{16}, Layout: exec.RopeHalf, FreqFormat: freq, AngleFormat: precision.F32,
	}, f)
}

func TestConformanceLlamaBF16(t *testing.T) { runConf(t, "llama-bf16", checkLlama) }
func TestConformanceLlamaF32(t *testing.T)  { runConf(t, "llama-f32", checkLlama) }
