package cpu

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// blocks are the calls whose module is prefix followed by a block index.
func (c *conf) blocks(prefix string) []trace.Call {
	re := regexp.MustCompile("^" + regexp.QuoteMeta(prefix) + `\.[0-9]+$`)
	var out []trace.Call
	for _, k := range c.tr.Tree().Calls() {
		if re.MatchString(k.Module) {
			out = append(out, k)
		}
	}
	return out
}

// src names a tensor relative to a block call: a descendant module's port
// ("" is the block itself), optionally chunk idx of chunks along the last
// axis (a modulation vector).
type src struct {
	mod, port   string
	chunks, idx int
}

func (c *conf) get(block trace.Call, s src) *Tensor {
	c.t.Helper()
	call := block
	if s.mod != "" {
		call = c.mustChild(block, block.Module+"."+s.mod)
	}
	t := c.port(call, s.port)
	if s.chunks == 0 {
		return t
	}
	parts := c.mustChunks(c.bk.Chunk(t, s.chunks, -1))
	return parts[s.idx]
}

func (c *conf) mustChunks(ts []exec.Tensor, err error) []*Tensor {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("%s: %v", c.name, err)
	}
	out := make([]*Tensor, len(ts))
	for i, t := range ts {
		out[i] = t.(*Tensor)
	}
	return out
}

// checkLinears runs every call with a 2-D weight and a float arg0.
func (c *conf) checkLinears(s exec.Spec) {
	for _, call := range c.tr.Tree().Calls() {
		if len(call.Params) == 0 {
			continue
		}
		w := c.param(call, "weight")
		if w == nil || len(w.Shape()) != 2 {
			continue
		}
		k, ok := call.Tensors.Key("arg0")
		if !ok {
			continue
		}
		if info, err := c.tr.Info(k); err != nil || info.DType != trace.BFloat16 && info.DType != trace.Float32 {
			continue
		}
		y := c.must(c.bk.Linear(c.port(call, "arg0"), w, c.param(call, "bias"), s))
		c.compare("linear", call, y, c.port(call, "out"))
	}
}

// checkNorms runs Norm on arg0 of every call matching glob, with the
// module's own weight and bias when it has them. Every value that is not
// bit-exact must be a near-tie: our f32 value before the final rounding
// within two f32 ulps of the midpoint between two values of the stored
// format (so that an f32-ulp difference in the reference's statistics,
// e.g. CUDA's approximate rsqrtf, decides the rounding). Checks named
// with a "[variant]" suffix are the losing candidates, reported only.
func (c *conf) checkNorms(check, glob string, p exec.NormParams, s exec.Spec) {
	for _, call := range c.calls(glob) {
		x, g, b := c.port(call, "arg0"), c.param(call, "weight"), c.param(call, "bias")
		y := c.must(c.bk.Norm(x, g, b, p, s))
		ref := c.port(call, "out")
		row := c.compare(check, call, y, ref)
		if row.exact == 1 || ref.format == precision.F32 || strings.Contains(check, "[") {
			continue
		}
		wide := s
		wide.Out = precision.F32
		if s.Round != 0 {
			continue // an internal rounding point: the final f32 value is not the whole story
		}
		y32 := c.must(c.bk.Norm(x, g, b, p, wide))
		for i, v := range y32.data {
			if ref.format.Round(v) == ref.data[i] {
				continue
			}
			if !nearTie(ref.format, v) {
				c.t.Errorf("%s %s %s: element %d: ours %g (f32 %.9g), reference %g: not a near-tie", c.name, check, row.boundary, i, y.data[i], v, ref.data[i])
			}
		}
	}
}

// nearTie reports whether v is within two f32 ulps of a rounding midpoint
// of format f.
func nearTie(f precision.Format, v float32) bool {
	lo := f.Round(v)
	for _, w := range []float32{nextAfter(v, 2), nextAfter(v, -2)} {
		if f.Round(w) != lo {
			return true
		}
	}
	return false
}

// nextAfter moves v by n f32 ulps (n may be negative).
func nextAfter(v float32, n int) float32 {
	for ; n > 0; n-- {
		v = math.Nextafter32(v, float32(math.Inf(1)))
	}
	for ; n < 0; n++ {
		v = math.Nextafter32(v, float32(math.Inf(-1)))
	}
	return v
}

// checkActs runs Act on arg0 (or, with fromProj, on the output of the
// module's child "proj": diffusers' GELU module holds its projection).
func (c *conf) checkActs(check, glob string, f exec.ActKind, fromProj bool, s exec.Spec) {
	for _, call := range c.calls(glob) {
		var x *Tensor
		if fromProj {
			x = c.port(c.mustChild(call, call.Module+".proj"), "out")
		} else {
			x = c.port(call, "arg0")
		}
		y := c.must(c.bk.Act(x, f, s))
		c.compare(check, call, y, c.port(call, "out"))
	}
}

// modCheck: target = modulate(norm, shift, scale) within a block.
type modCheck struct {
	norm, shift, scale, target src
}

func (c *conf) checkModulate(prefix string, cases []modCheck, s exec.Spec) {
	for _, blk := range c.blocks(prefix) {
		for _, m := range cases {
			y := c.must(c.bk.Modulate(c.get(blk, m.norm), c.get(blk, m.shift), c.get(blk, m.scale), exec.ModulateParams{PlusOne: true}, s))
			c.compare("modulate", c.at(blk, m.target), y, c.get(blk, m.target))
		}
	}
}

// at is the call a src lives on (for naming rows).
func (c *conf) at(blk trace.Call, s src) trace.Call {
	if s.mod == "" {
		return blk
	}
	return c.mustChild(blk, blk.Module+"."+s.mod)
}

// gateCheck: target = x + gate·y within a block; x and target may be
// concatenations along the sequence axis (the single-stream blocks).
type gateCheck struct {
	x, target []src
	y, gate   src
}

func (c *conf) cat(blk trace.Call, ss []src) *Tensor {
	c.t.Helper()
	if len(ss) == 1 {
		return c.get(blk, ss[0])
	}
	ts := make([]exec.Tensor, len(ss))
	for i, s := range ss {
		ts[i] = c.get(blk, s)
	}
	return c.must(c.bk.Concat(ts, 1))
}

func (c *conf) checkGated(prefix string, cases []gateCheck, s exec.Spec) {
	for _, blk := range c.blocks(prefix) {
		for _, g := range cases {
			y := c.must(c.bk.GatedResidual(c.cat(blk, g.x), c.get(blk, g.y), c.get(blk, g.gate), exec.ActIdentity, s))
			c.compare("gated_residual", c.at(blk, g.target[len(g.target)-1]), y, c.cat(blk, g.target))
		}
	}
}

// attnCheck describes one attention: per stream (text first), the
// projected q, k (normed or not) and v, the rope tables, and the output.
type attnCheck struct {
	q, k, v, out []src
	cos, sin     []src // per stream, or one for the joint sequence
	complexRope  bool  // tables are complex [S, R/2] (cos = real, sin = imag)
	maskFrom     *src  // a [B, S_text] boolean mask for the text rows; image rows visible
	layout       exec.RopeLayout
	ropeSpec     exec.Spec
	heads, kv    int
	mask         exec.MaskKind
}

// flat reshapes [B, S, H, D] to [B, S, H·D].
func (c *conf) flat(t *Tensor) *Tensor {
	if len(t.shape) == 4 {
		return c.must(c.bk.Reshape(t, []int{t.shape[0], t.shape[1], t.shape[2] * t.shape[3]}))
	}
	return t
}

// tables turns a rope table source into real cos, sin [S, R].
func (c *conf) tables(blk trace.Call, a attnCheck, i int) (*Tensor, *Tensor) {
	if !a.complexRope {
		return c.get(blk, a.cos[i]), c.get(blk, a.sin[i])
	}
	z := c.get(blk, a.cos[i]) // [S, R/2, 2]
	s, h := z.shape[0], z.shape[1]
	cs, sn := make([]float32, s*2*h), make([]float32, s*2*h)
	for r := range s {
		for j := range h {
			re, im := z.data[(r*h+j)*2], z.data[(r*h+j)*2+1]
			cs[r*2*h+2*j], cs[r*2*h+2*j+1] = re, re
			sn[r*2*h+2*j], sn[r*2*h+2*j+1] = im, im
		}
	}
	ct := c.must(c.bk.Upload(cs, []int{s, 2 * h}, z.format))
	st := c.must(c.bk.Upload(sn, []int{s, 2 * h}, z.format))
	return ct, st
}

// checkAttention runs rope then attention under each named attention spec.
func (c *conf) checkAttention(prefix string, a attnCheck, specs map[string]exec.Spec) {
	kvh := a.kv
	if kvh == 0 {
		kvh = a.heads
	}
	perStream := len(a.cos) > 1
	rope := func(q, k *Tensor, cs, sn *Tensor) (*Tensor, *Tensor) {
		q = c.must(c.bk.Rope(q, cs, sn, exec.RopeParams{Heads: a.heads, Layout: a.layout}, a.ropeSpec))
		k = c.must(c.bk.Rope(k, cs, sn, exec.RopeParams{Heads: kvh, Layout: a.layout}, a.ropeSpec))
		return q, k
	}
	for _, blk := range c.blocks(prefix) {
		var qs, ks, vs []exec.Tensor
		for i := range a.q {
			q, k := c.flat(c.get(blk, a.q[i])), c.flat(c.get(blk, a.k[i]))
			if perStream {
				cs, sn := c.tables(blk, a, i)
				q, k = rope(q, k, cs, sn)
			}
			qs, ks, vs = append(qs, q), append(ks, k), append(vs, c.flat(c.get(blk, a.v[i])))
		}
		q, k, v := c.must(c.bk.Concat(qs, 1)), c.must(c.bk.Concat(ks, 1)), c.must(c.bk.Concat(vs, 1))
		if !perStream {
			cs, sn := c.tables(blk, a, 0)
			q, k = rope(q, k, cs, sn)
		}
		var mask exec.Tensor
		if a.maskFrom != nil {
			m := c.get(blk, *a.maskFrom) // [B, S_text]
			b, st := m.shape[0], m.shape[1]
			sk := k.shape[1]
			full := make([]float32, b*sk)
			for bb := range b {
				for j := range sk {
					full[bb*sk+j] = 1
					if j < st {
						full[bb*sk+j] = m.data[bb*st+j]
					}
				}
			}
			mask = c.must(c.bk.Upload(full, []int{b, 1, sk}, precision.F32))
		}
		ref := c.cat(blk, a.out)
		for name, s := range specs {
			y := c.must(c.bk.Attention(q, k, v, mask, nil, nil, exec.AttentionParams{Heads: a.heads, KVHeads: a.kv, Mask: a.mask}, s))
			c.compare("rope+attention"+name, c.at(blk, a.out[len(a.out)-1]), y, ref)
		}
	}
}

// checkAdds: target = a + b within a block (plain residuals).
func (c *conf) checkAdds(prefix string, cases [][3]src, s exec.Spec) {
	for _, blk := range c.blocks(prefix) {
		for _, cs := range cases {
			y := c.must(c.bk.Add(c.get(blk, cs[0]), c.get(blk, cs[1]), s))
			c.compare("residual_add", c.at(blk, cs[2]), y, c.get(blk, cs[2]))
		}
	}
}

// checkGLU: down_proj input = f(gate)·up within a block.
func (c *conf) checkGLU(prefix string, gate, up, target src, f exec.ActKind, s exec.Spec) {
	for _, blk := range c.blocks(prefix) {
		y := c.must(c.bk.GLU(c.get(blk, gate), c.get(blk, up), f, s))
		c.compare("glu", c.at(blk, target), y, c.get(blk, target))
	}
}

// checkTimestep runs TimestepEmbed on arg0 of the sinusoid modules.
func (c *conf) checkTimestep(glob string, p exec.TimestepParams, variants map[string]exec.Math) {
	for _, call := range c.calls(glob) {
		t := c.port(call, "arg0")
		for name, m := range variants {
			y := c.must(c.bk.TimestepEmbed(t, p, exec.Spec{Out: precision.F32, Math: m}))
			ref := c.port(call, "out")
			c.compare("timestep_embed"+name, call, y, ref)
			if c.act != precision.F32 {
				// What the next linear consumes: both cast to the activations' format.
				c.compare("timestep_embed"+name+"→"+c.act.String(), call,
					c.must(c.bk.Cast(y, c.act)), c.must(c.bk.Cast(ref, c.act)))
			}
		}
	}
}

// checkRopeTable runs RopeTable on a positions port (reshaped to
// [S, axes]) against the module's out.0 (cos) and out.1 (sin).
func (c *conf) checkRopeTable(glob, posPort string, p exec.RopeTableParams, out precision.Format) {
	for _, call := range c.calls(glob) {
		pos := c.port(call, posPort)
		s := pos.shape[len(pos.shape)-1]
		axes := len(p.AxesDims)
		if len(pos.shape) == 2 && pos.shape[1] == axes {
			s = pos.shape[0]
		}
		pos = c.must(c.bk.Reshape(pos, []int{s, axes}))
		cs, sn, err := c.bk.RopeTable(pos, p, exec.Out(out))
		if err != nil {
			c.t.Fatal(err)
		}
		c.compare("rope_table.cos", call, cs.(*Tensor), c.port(call, "out.0"))
		c.compare("rope_table.sin", call, sn.(*Tensor), c.port(call, "out.1"))
	}
}

// checkEuler replays each sampler step from the captured transformer
// inputs and outputs: x_{i+1} = x_i + (σ_{i+1} − σ_i)·v_i.
func (c *conf) checkEuler(model string, specs map[string]exec.Spec) {
	sig := c.load(c.tr.Manifest.Inputs["sigmas"]).data
	calls := c.calls(model)
	for i, call := range calls {
		x, v := c.port(call, "kw.hidden_states"), c.port(call, "out.0")
		var ref *Tensor
		if i+1 < len(calls) {
			ref = c.port(calls[i+1], "kw.hidden_states")
		} else {
			ref = c.load(c.tr.Manifest.Outputs["latents"])
		}
		for name, s := range specs {
			y := c.must(exec.EulerStep(c.bk, x, v, sig[i], sig[i+1], 1, s))
			c.compare("euler_step"+name, call, y, ref)
		}
	}
}

// checkModelTimestep compares what the model was given with the sampler's
// timestep transform.
func (c *conf) checkModelTimestep(model string, tt exec.TimestepTransform) {
	sig := c.load(c.tr.Manifest.Inputs["sigmas"]).data
	p := exec.EulerParams{Sigmas: sig, Sign: 1, Timestep: tt}
	want := p.Timesteps()
	for i, call := range c.calls(model) {
		got := c.port(call, "kw.timestep")
		ours := c.must(c.bk.Upload([]float32{want[i]}, []int{1}, tt.Format))
		c.compare("sampler_timestep", call, ours, got)
	}
}

func (r confRow) String() string {
	return fmt.Sprintf("%s %s: %d values, exact %.4f%%, rel-RMS %.3g", r.check, r.boundary, r.n, 100*r.exact, r.relRMS)
}
