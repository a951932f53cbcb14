package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// embedder emits one stream's embedder: an optional norm and a linear over
// features, or rows of a table by integer ids.
func (b *builder) embedder(e *semantics.Embedder) error {
	addr := "embed." + e.Stream
	if !hasStream(b.st, e.Stream) {
		return fmt.Errorf("%s: no such stream", addr)
	}
	x, err := b.inputValue(e.Input)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	switch e.Kind {
	case "linear":
		if e.Input == "latents" {
			layout, err := b.doc.String("patch_layout", addr)
			if err != nil {
				return err
			}
			if x, err = b.patchify(x, e, addr, layout); err != nil {
				return err
			}
		}
		if r, ok := e.Roles["norm"]; ok {
			if x, err = b.norm(x, addr+".norm", r, 0, ""); err != nil {
				return err
			}
		}
		if x, err = b.linear(x, addr+".proj", e.Roles["proj"]); err != nil {
			return err
		}
	case "table":
		r := e.Roles["table"]
		w, err := b.weight(r.Weight)
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		if x, err = b.emit1(OpGather, addr+".table", []string{w, x}, Attrs{}); err != nil {
			return err
		}
		b.tapRole(x, r)
	default:
		return fmt.Errorf("%s: embedder kind %q is not supported", addr, e.Kind)
	}
	s := b.shape(x)
	if len(s) != 3 || s[2] != b.st.Hidden {
		return fmt.Errorf("%s: embedded rows are %v, not [batch, rows, %d]", addr, s, b.st.Hidden)
	}
	if sourceSized(b.st, b.shapes) {
		for i, st := range b.st.Streams {
			if st.Name == e.Stream && st.Tokens != s[1] {
				return fmt.Errorf("%s: structure.streams[%d].tokens is %d, but the source run's inputs make %d rows", addr, i, st.Tokens, s[1])
			}
		}
	}
	b.stream[e.Stream], b.tokens[e.Stream] = x, s[1]
	return nil
}

// patchify turns the latents into the image embedder's rows by
// patch_layout: "none" takes them as they are (tokens [batch, rows,
// features]); "c_ph_pw" cuts [B, C, H, W] latents into p×p patches
// (p: the embedder's patch), features (c, ph, pw), rows (h, w), as
// diffusers' pack_latents, and has final undo it after the head.
func (b *builder) patchify(x string, e *semantics.Embedder, addr, layout string) (string, error) {
	s := b.shape(x)
	switch layout {
	case "none":
		if e.Patch > 1 {
			return "", fmt.Errorf("%s: patch_layout none with patch %d: patches need a layout", addr, e.Patch)
		}
		return x, nil
	case "c_ph_pw":
	default:
		return "", fmt.Errorf("%s: patch_layout %q is not supported: latents must arrive as tokens or as [batch, channels, height, width] cut into patches c_ph_pw", addr, layout)
	}
	if b.patch != nil {
		return "", fmt.Errorf("%s: the latents are patchified twice", addr)
	}
	p := e.Patch
	if p <= 0 {
		return "", fmt.Errorf("%s: patch_layout c_ph_pw needs the embedder's patch size (structure embedders[].patch)", addr)
	}
	if len(s) != 4 {
		return "", fmt.Errorf("%s: patch_layout c_ph_pw needs latents [batch, channels, height, width], not %v", addr, s)
	}
	if s[2]%p != 0 || s[3]%p != 0 {
		return "", fmt.Errorf("%s: latents %v are not whole %d×%d patches", addr, s, p, p)
	}
	if w := s[1] * p * p; e.InWidth != 0 && w != e.InWidth {
		return "", fmt.Errorf("%s: latents %v in %d×%d patches have %d features, the embedder reads %d", addr, s, p, p, w, e.InWidth)
	}
	pp := exec.PatchParams{Patch: p, Height: s[2], Width: s[3]}
	y, err := b.emit1(OpPatchify, addr+".patchify", []string{x}, Attrs{Patch: pp})
	if err != nil {
		return "", err
	}
	b.patch = &pp
	return y, nil
}

// conditioning emits the conditioning vector: the timestep (scaled on the
// input or inside the sinusoid), its sinusoid, the timestep MLP, plus the
// pooled MLP when there is one.
func (b *builder) conditioning() error {
	c := b.st.Conditioning
	if c == nil {
		return nil
	}
	const addr = "conditioning"
	if b.st.Run != "flow_euler" && !b.alone {
		return fmt.Errorf("%s: a %s run has no timestep to embed", addr, b.st.Run)
	}
	scale, err := b.doc.Number("timestep_scale", addr)
	if err != nil {
		return err
	}
	at, err := b.doc.String("timestep_scale_at", addr)
	if err != nil {
		return err
	}
	t, embScale := stepTimestep, scale
	if at == "input" {
		k := b.constant("timestep_scale", []float32{float32(scale)}, []int{1}, precision.F32)
		if t, err = b.emit1(OpMul, addr+".timestep_scale", []string{t, k}, Attrs{}); err != nil {
			return err
		}
		embScale = 1
	}
	flip, err := b.doc.Bool("timestep_flip_sin_to_cos", addr)
	if err != nil {
		return err
	}
	shift, err := b.doc.Number("timestep_freq_shift", addr)
	if err != nil {
		return err
	}
	period, err := b.doc.Number("timestep_max_period", addr)
	if err != nil {
		return err
	}
	f, err := b.actKind("embed_act", addr)
	if err != nil {
		return err
	}
	seg := -1
	if bd := c.Boundary; bd != nil {
		seg = b.begin(addr, bd.Module)
		b.tap(t, bd.Module, bd.Inputs["timestep"], true)
		if port, ok := bd.Inputs["pooled"]; ok {
			if pooled, err := b.inputValue("pooled"); err == nil {
				b.tap(pooled, bd.Module, port, true)
			}
		}
	}
	tp := exec.TimestepParams{Dim: c.TimestepDim, FlipSinToCos: flip, FreqShift: float32(shift), Scale: float32(embScale), MaxPeriod: float32(period)}
	h, err := b.emit1(OpTimestepEmbed, addr+".sinusoid", []string{t}, Attrs{Timestep: tp})
	if err != nil {
		return err
	}
	b.tapRole(h, c.Roles["sinusoid"])
	if f := b.shapeFormat(len(b.p.Nodes) - 1); f != b.acts {
		// The sinusoid is stored in its own format (f32 in every reference
		// seen); the MLP reads it in the activations format.
		if h, err = b.emit1(OpCast, addr+".sinusoid_cast", []string{h}, Attrs{Format: b.acts}); err != nil {
			return err
		}
	}
	if h, err = b.mlp2(h, addr, "time", c.Roles, f); err != nil {
		return err
	}
	if _, ok := c.Roles["pooled_in"]; ok {
		pooled, err := b.inputValue("pooled")
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		p, err := b.mlp2(pooled, addr, "pooled", c.Roles, f)
		if err != nil {
			return err
		}
		if h, err = b.emit1(OpAdd, addr+".sum", []string{h, p}, Attrs{}); err != nil {
			return err
		}
	}
	if bd := c.Boundary; bd != nil {
		b.tap(h, bd.Module, bd.Outputs["cond"], false)
		b.end(seg)
	}
	b.cond = h
	return nil
}

// mlp2 emits linear(<name>_in) → f → linear(<name>_out).
func (b *builder) mlp2(x, addr, name string, roles map[string]semantics.Role, f exec.ActKind) (string, error) {
	h, err := b.linear(x, addr+"."+name+"_in", roles[name+"_in"])
	if err != nil {
		return "", err
	}
	if h, err = b.act(h, addr+"."+name+"_act", f); err != nil {
		return "", err
	}
	return b.linear(h, addr+"."+name+"_out", roles[name+"_out"])
}
