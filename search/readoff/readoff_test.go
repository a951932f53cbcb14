package readoff

import (
	"fmt"
	"testing"

	"github.com/zflow/zflow/semantics"
)

// builder makes a small program by hand: values by name with shapes,
// nodes in order.
type builder struct{ pg semantics.Program }

func (b *builder) value(name, kind string, shape ...int) string {
	b.pg.Values = append(b.pg.Values, semantics.ProgramValue{Name: name, Kind: kind, Shape: shape})
	return name
}

func (b *builder) constant(name string, x float32) string {
	b.pg.Values = append(b.pg.Values, semantics.ProgramValue{Name: name, Kind: "const", Shape: []int{1}, Data: []float32{x}})
	return name
}

func (b *builder) tap(name, module, port string) {
	for i := range b.pg.Values {
		if b.pg.Values[i].Name == name {
			b.pg.Values[i].Taps = append(b.pg.Values[i].Taps, semantics.ProgramTap{Module: module, Port: port, In: true})
		}
	}
}

// node adds an op writing out (a temp of the given shape) for module.
func (b *builder) node(op, module, out string, attrs semantics.NodeAttrs, shape []int, in ...string) string {
	b.value(out, "temp", shape...)
	b.pg.Nodes = append(b.pg.Nodes, semantics.ProgramNode{Op: op, In: in, Out: []string{out}, Role: fmt.Sprintf("%s.%s%d", module, op, len(b.pg.Nodes)), Attrs: attrs})
	return out
}

func (b *builder) slice(module, out, in string, start, end int) string {
	return b.node("slice", module, out, semantics.NodeAttrs{Axis: 1, Start: start, End: end}, []int{1, 8}, in)
}

// dit is one block of a modulated DiT: σ·1000 made by the driver, a
// sinusoid, a SiLU MLP, six chunks read in the order shift, scale, gate
// (twice), q normalised and rotated, a GELU MLP added back.
func dit() *semantics.Program {
	b := &builder{}
	b.value("step:timestep", "step_input", 1)
	k := b.constant("const:1000", 1000)
	t := b.node("mul", "model", "t", semantics.NodeAttrs{}, []int{1}, "step:timestep", k)
	b.tap(t, "model", "kw.timestep")
	half := b.constant("const:0.5", 0.5)
	th := b.node("mul", "model.time", "th", semantics.NodeAttrs{}, []int{1}, t, half)
	emb := b.node("timestep_embed", "model.time.proj", "emb", semantics.NodeAttrs{Timestep: &semantics.TimestepAttrs{Dim: 16, FlipSinToCos: true, Scale: 1, MaxPeriod: 10000}}, []int{1, 16}, th)
	l1 := b.node("linear", "model.time.l1", "l1", semantics.NodeAttrs{}, []int{1, 8}, emb, "param:w1", "")
	a1 := b.node("act", "model.time.act", "a1", semantics.NodeAttrs{Act: "silu"}, []int{1, 8}, l1)
	temb := b.node("linear", "model.time.l2", "temb", semantics.NodeAttrs{}, []int{1, 8}, a1, "param:w2", "")
	silu := b.node("act", "model.block.mod", "silu", semantics.NodeAttrs{Act: "silu"}, []int{1, 8}, temb)
	mod := b.node("linear", "model.block.mod", "mod", semantics.NodeAttrs{}, []int{1, 48}, silu, "param:wm", "")
	var ch [6]string
	for i := range ch {
		ch[i] = b.slice("model.block.mod", fmt.Sprintf("c%d", i), mod, 8*i, 8*i+8)
	}
	x := b.value("input:x", "input", 1, 8, 8)
	n1 := b.node("norm", "model.block.norm1", "n1", semantics.NodeAttrs{Norm: &semantics.NormAttrs{Kind: "layer", Eps: 1e-6}}, []int{1, 8, 8}, x, "", "")
	m1 := b.node("modulate", "model.block.norm1", "m1", semantics.NodeAttrs{PlusOne: true}, []int{1, 8, 8}, n1, ch[0], ch[1])
	q := b.node("linear", "model.block.attn.q", "q", semantics.NodeAttrs{}, []int{1, 8, 8}, m1, "param:wq", "")
	qn := b.node("norm", "model.block.attn.qn", "qn", semantics.NodeAttrs{Norm: &semantics.NormAttrs{Kind: "rms", Eps: 1e-6}}, []int{1, 8, 8}, q, "param:g", "")
	qr := b.node("rope", "model.block.attn", "qr", semantics.NodeAttrs{Rope: &semantics.RopeAttrs{Heads: 2, Layout: "interleaved"}}, []int{1, 8, 8}, qn, "cos", "sin")
	at := b.node("attention", "model.block.attn", "at", semantics.NodeAttrs{Attention: &semantics.AttentionAttrs{Heads: 2, Scale: 0.5}}, []int{1, 8, 8}, qr, qr, q, "", "", "")
	o := b.node("linear", "model.block.attn.o", "o", semantics.NodeAttrs{}, []int{1, 8, 8}, at, "param:wo", "")
	r1 := b.node("gated_residual", "model.block", "r1", semantics.NodeAttrs{Act: "identity"}, []int{1, 8, 8}, x, o, ch[2])
	m2 := b.node("modulate", "model.block.norm2", "m2", semantics.NodeAttrs{PlusOne: true}, []int{1, 8, 8}, r1, ch[3], ch[4])
	up := b.node("linear", "model.block.ff.up", "up", semantics.NodeAttrs{}, []int{1, 8, 32}, m2, "param:wu", "")
	g := b.node("act", "model.block.ff.act", "g", semantics.NodeAttrs{Act: "gelu_tanh"}, []int{1, 8, 32}, up)
	down := b.node("linear", "model.block.ff.down", "down", semantics.NodeAttrs{}, []int{1, 8, 8}, g, "param:wd", "")
	b.node("gated_residual", "model.block", "r2", semantics.NodeAttrs{Act: "identity"}, []int{1, 8, 8}, r1, down, ch[5])
	return &b.pg
}

func TestMissing(t *testing.T) {
	want := map[string]any{
		"timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0,
		"timestep_scale": 0.5, "timestep_scale_at": "input", // ×1000 is the driver's, ×0.5 the model's
		"embed_act": "silu", "modulation_act": "silu", "modulation_plus_one": true,
		"modulation_order": "shift,scale,gate", "gate_fn": "identity",
		"mlp_act": "gelu_tanh", "mlp_glu": false,
		"attention_causal": false, "attention_scale": 0.0, // 0.5 = 1/√4 over heads of 4: the default
		"rope_layout": "interleaved", "qk_norm": "rms",
	}
	got := map[string]semantics.Factor{}
	for _, f := range Missing(dit(), nil) {
		if _, dup := got[f.Name]; !dup {
			got[f.Name] = f
		}
		if f.Decisive || f.Evidence.Metric != "declared" {
			t.Errorf("%s is not declared and non-decisive: %+v", f.Name, f)
		}
	}
	for name, v := range want {
		f, ok := got[name]
		switch {
		case !ok:
			t.Errorf("no %s", name)
		case fmt.Sprint(f.Value) != fmt.Sprint(v):
			t.Errorf("%s = %v, want %v", name, f.Value, v)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected %s = %v", name, got[name].Value)
		}
	}
}

func TestMissingKeepsWhatIsThere(t *testing.T) {
	have := []semantics.Factor{{Name: "gate_fn", Scope: "elsewhere", Value: "tanh"}}
	for _, f := range Missing(dit(), have) {
		if f.Name == "gate_fn" {
			t.Errorf("gate_fn read again where the document has one: %+v", f)
		}
	}
	if got := Missing(nil, nil); got != nil {
		t.Errorf("a document without a program reads %v", got)
	}
}

// TestGatedResidualForms: x + y·g(chunk) spelled as an add of a product,
// or as a modulate of y by the chunk with x as its shift, is a gate (and
// completes the source's chunk order), not a modulation.
func TestGatedResidualForms(t *testing.T) {
	for _, form := range []string{"add", "modulate", "add_tanh"} {
		t.Run(form, func(t *testing.T) {
			b := &builder{}
			mod := b.value("mod", "input", 1, 24)
			var ch [3]string
			for i := range ch {
				ch[i] = b.slice("m.mod", fmt.Sprintf("c%d", i), mod, 8*i, 8*i+8)
			}
			x := b.value("x", "input", 1, 8, 8)
			n := b.node("norm", "m.norm", "n", semantics.NodeAttrs{Norm: &semantics.NormAttrs{Kind: "layer"}}, []int{1, 8, 8}, x, "", "")
			m := b.node("modulate", "m.norm", "m", semantics.NodeAttrs{PlusOne: true}, []int{1, 8, 8}, n, ch[0], ch[1])
			y := b.node("linear", "m.attn", "y", semantics.NodeAttrs{}, []int{1, 8, 8}, m, "param:w", "")
			want := "identity"
			switch form {
			case "add":
				p := b.node("mul", "m", "p", semantics.NodeAttrs{}, []int{1, 8, 8}, y, ch[2])
				b.node("add", "m", "r", semantics.NodeAttrs{}, []int{1, 8, 8}, x, p)
			case "add_tanh":
				g := b.node("act", "m", "g", semantics.NodeAttrs{Act: "tanh"}, []int{1, 8}, ch[2])
				p := b.node("mul", "m", "p", semantics.NodeAttrs{}, []int{1, 8, 8}, g, y)
				b.node("add", "m", "r", semantics.NodeAttrs{}, []int{1, 8, 8}, p, x)
				want = "tanh"
			case "modulate":
				b.node("modulate", "m", "r", semantics.NodeAttrs{}, []int{1, 8, 8}, y, x, ch[2])
			}
			got := map[string][]any{}
			for _, f := range Missing(&b.pg, nil) {
				got[f.Name] = append(got[f.Name], f.Value)
			}
			if fmt.Sprint(got["gate_fn"]) != fmt.Sprint([]any{want}) || fmt.Sprint(got["modulation_order"]) != "[shift,scale,gate]" ||
				fmt.Sprint(got["modulation_plus_one"]) != "[true]" {
				t.Errorf("read %v", got)
			}
		})
	}
}

// TestFinalNormOrder: a modulation without a gate is the final norm's
// only where it is the program's last; one inside the model (a
// cross-attention's shift and scale) has no catalogue name.
func TestFinalNormOrder(t *testing.T) {
	b := &builder{}
	x := b.value("x", "input", 1, 8, 8)
	for i, src := range []string{"inner", "final"} {
		mod := b.value(src, "input", 1, 16)
		// the inner source is cut scale, shift; the final one shift, scale
		first := b.slice("m."+src, src+"0", mod, 0, 8)
		second := b.slice("m."+src, src+"1", mod, 8, 16)
		shift, scale := second, first
		if i == 1 {
			shift, scale = first, second
		}
		n := b.node("norm", "m."+src, src+"n", semantics.NodeAttrs{Norm: &semantics.NormAttrs{Kind: "layer"}}, []int{1, 8, 8}, x, "", "")
		x = b.node("modulate", "m."+src, src+"m", semantics.NodeAttrs{PlusOne: true}, []int{1, 8, 8}, n, shift, scale)
	}
	var orders []string
	for _, f := range Missing(&b.pg, nil) {
		if f.Name == "final_norm_order" || f.Name == "modulation_order" {
			orders = append(orders, fmt.Sprintf("%s %s %v", f.Name, f.Scope, f.Value))
		}
	}
	if fmt.Sprint(orders) != "[final_norm_order m.final shift,scale]" {
		t.Errorf("orders %v", orders)
	}
}

// TestJointOrder: the order of rows joined from the latents' tokens and
// another stream is read where the joined value is captured (the model's
// own sequence), never from a join the trace does not hold (the
// program's attention may join rows in any order).
func TestJointOrder(t *testing.T) {
	for _, c := range []struct {
		name     string
		captured bool
		textLast bool
		want     string
	}{
		{"text first", true, false, "[text_first]"},
		{"image first", true, true, "[image_first]"},
		{"not captured", false, false, "[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &builder{}
			b.value("step:latents", "step_input", 1, 4, 8)
			b.pg.Values[0].Source = "latents"
			img := b.node("linear", "m.embed", "img", semantics.NodeAttrs{}, []int{1, 4, 8}, "step:latents", "param:w", "")
			txt := b.value("input:text", "input", 1, 3, 8)
			pieces := []string{txt, img}
			if c.textLast {
				pieces = []string{img, txt}
			}
			j := b.node("concat", "m", "joined", semantics.NodeAttrs{Axis: 1}, []int{1, 7, 8}, pieces...)
			if c.captured {
				b.tap(j, "m.blocks.0", "arg0")
			}
			var got []any
			for _, f := range Missing(&b.pg, nil) {
				if f.Name == "joint_order" {
					got = append(got, f.Value)
				}
			}
			if fmt.Sprint(got) != c.want {
				t.Errorf("joint_order %v, want %s", got, c.want)
			}
		})
	}
}
