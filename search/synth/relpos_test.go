package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// relPosAttention is the reference the planted cases are made by, written
// as loops: q, k, v [B, S, H·D] on a grid gh×gw, scores (q·k)/√D plus,
// per axis, q · the axis table's row at (query place − key place + g − 1).
func relPosAttention(q, k, v []float32, b, gh, gw, h, d int, th, tw []float32) []float32 {
	s, w := gh*gw, h*d
	out := make([]float32, b*s*w)
	scores := make([]float64, s)
	for bb := range b {
		for hh := range h {
			for i := range s {
				qi := q[(bb*s+i)*w+hh*d:][:d]
				dot := func(x []float32) float64 {
					var a float64
					for c := range d {
						a += float64(qi[c]) * float64(x[c])
					}
					return a
				}
				mx := math.Inf(-1)
				for j := range s {
					kj := k[(bb*s+j)*w+hh*d:][:d]
					sc := dot(kj) / math.Sqrt(float64(d))
					sc += dot(th[(i/gw-j/gw+gh-1)*d:][:d])
					sc += dot(tw[(i%gw-j%gw+gw-1)*d:][:d])
					scores[j] = sc
					mx = max(mx, sc)
				}
				var sum float64
				for j := range s {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				for c := range d {
					var acc float64
					for j := range s {
						acc += scores[j] / sum * float64(v[(bb*s+j)*w+hh*d+c])
					}
					out[(bb*s+i)*w+hh*d+c] = float32(acc)
				}
			}
		}
	}
	return out
}

// TestPlantedQueryPositionBias: attention whose scores add, per axis of a
// 3×4 grid, the queries times a parameter table gathered at the relative
// offset of query and key (decomposed relative positions), the module
// taking and returning its tokens on the grid ([B, 3, 4, W]) with q, k
// and v one fused projection [B, 3, 4, 3W]. gridAttention must read the
// grid as rows and explain the target with that bias; plain attention
// (no bias) must not come near, nor the tables swapped between the axes.
// A second case gives the rows flat ([B, 12, W]): the grid is read off
// the tables' lengths.
func TestPlantedQueryPositionBias(t *testing.T) {
	const b, gh, gw, h, d = 2, 3, 4, 2, 8
	s, w := gh*gw, h*d
	f := precision.F32
	rng := rand.New(rand.NewPCG(5, 21))
	rnd := func(n int, scale float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(scale * rng.NormFloat64())
		}
		return out
	}
	qkv := rnd(b*s*3*w, 1)
	part := func(p int) []float32 {
		out := make([]float32, 0, b*s*w)
		for r := range b * s {
			out = append(out, qkv[r*3*w+p*w:][:w]...)
		}
		return out
	}
	th, tw := rnd((2*gh-1)*d, 0.7), rnd((2*gw-1)*d, 0.7)
	want := relPosAttention(part(0), part(1), part(2), b, gh, gw, h, d, th, tw)
	plain := relPosAttention(part(0), part(1), part(2), b, gh, gw, h, d, make([]float32, len(th)), make([]float32, len(tw)))
	if e := relRMS(f, plain, want); e < 0.05 {
		t.Fatalf("the bias moves the result by %.3g only: the case does not test what it says", e)
	}
	for _, tc := range []struct {
		name          string
		target, fused []int
		explain       func(*synth, *val, *scope) *val
	}{
		{"grid", []int{b, gh, gw, w}, []int{b, gh, gw, 3 * w}, (*synth).gridAttention},
		{"rows", []int{b, s, w}, []int{b, s, 3 * w}, (*synth).attention},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fused := &val{shape: tc.fused, data: qkv, format: f, origin: "qkv/out", fit: &leafFit{kind: "linear"}}
			relH := &val{shape: []int{2*gh - 1, d}, data: th, format: f, origin: "rel_h", param: true}
			relW := &val{shape: []int{2*gw - 1, d}, data: tw, format: f, origin: "rel_w", param: true}
			sx, sc, target := planted(t, f, tc.target, want)
			sc.add(relH, false)
			sc.add(relW, false)
			sc.add(fused, true)
			got := tc.explain(sx, target, sc)
			if got == nil {
				t.Fatal("not explained")
			}
			if e := relRMS(f, got.data, target.data); e > tolerance(f) {
				t.Errorf("rel-RMS %.3g, want within %.3g", e, tolerance(f))
			}
			if !slices.Equal(got.shape, target.shape) {
				t.Errorf("shape %v, want %v", got.shape, target.shape)
			}
			if len(sx.attn) != 1 || sx.attn[0].choice.bias == nil {
				t.Fatalf("%d attentions recorded, want one with a bias", len(sx.attn))
			}
			// the bias reads both tables, each through the gathered offsets
			read := map[*val]bool{}
			var walk func(v *val)
			walk = func(v *val) {
				if v == nil || read[v] {
					return
				}
				read[v] = true
				if v.from != nil {
					for _, a := range v.from.args {
						walk(a)
					}
				}
			}
			walk(sx.attn[0].choice.bias)
			if !read[relH] || !read[relW] {
				t.Errorf("the bias reads rel_h %v, rel_w %v: want both", read[relH], read[relW])
			}
		})
	}
	// the tables swapped between the axes (each resampled to the other's
	// length) and the offsets taken key minus query do not explain it
	sx, _, _ := planted(t, f, []int{b, s, w}, want)
	q := &val{shape: []int{b, s, w}, data: part(0), format: f}
	relH := &val{shape: []int{2*gh - 1, d}, data: th, format: f}
	relW := &val{shape: []int{2*gw - 1, d}, data: tw, format: f}
	k, v := &val{shape: []int{b, s, w}, data: part(1), format: f}, &val{shape: []int{b, s, w}, data: part(2), format: f}
	run := func(bias *val) []float32 {
		out, err := sx.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: exec.AttentionParams{Heads: h, KVHeads: h}}, args: []*val{q, k, v, nil, bias, nil}, out: f})
		if err != nil {
			t.Fatal(err)
		}
		return out.data
	}
	if e := relRMS(f, run(sx.positionBias(q, d, []int{gh, gw}, []int{gh, gw}, []*val{relH, relW}, false)), want); e > 1e-6 {
		t.Errorf("the bias as built: rel-RMS %.3g", e)
	}
	if e := relRMS(f, run(sx.positionBias(q, d, []int{gh, gw}, []int{gh, gw}, []*val{relW, relH}, false)), want); e < 0.01 {
		t.Errorf("the tables swapped (each resampled to the other axis) explain the target too (rel-RMS %.3g)", e)
	}
	if e := relRMS(f, run(sx.positionBias(q, d, []int{gh, gw}, []int{gh, gw}, []*val{relH, relW}, true)), want); e < 0.01 {
		t.Errorf("key minus query explains the target too (rel-RMS %.3g): the orientation is not tested", e)
	}
}

// TestLinearResample: torch's F.interpolate(mode="linear",
// align_corners=False) of 3 samples to 5 reads the sources at 0, 0.4, 1,
// 1.6 and 2 (clamped at the ends): [0 1 2] becomes [0 0.4 1 1.6 2].
func TestLinearResample(t *testing.T) {
	m := linearResample(3, 5)
	want := []float32{0, 0.4, 1, 1.6, 2}
	for i := range 5 {
		var y float32
		for j := range 3 {
			y += m[i*3+j] * float32(j)
		}
		if math.Abs(float64(y-want[i])) > 1e-6 {
			t.Errorf("row %d gives %g, want %g", i, y, want[i])
		}
	}
}

// TestOffsetPattern: the table rows of an axis's (query place, key place)
// pairs, hand-computed from SAM's get_rel_pos (q·max(kg/g, 1) − k·max(g/kg,
// 1) + (kg − 1)·max(g/kg, 1)): queries pooled to half the keys' places,
// keys pooled to half the queries', one grid.
func TestOffsetPattern(t *testing.T) {
	for _, c := range []struct {
		g, kg    int
		keyFirst bool
		want     []float32
	}{
		{2, 4, false, []float32{3, 2, 1, 0, 5, 4, 3, 2}},
		{4, 2, false, []float32{2, 0, 3, 1, 4, 2, 5, 3}},
		{3, 3, false, []float32{2, 1, 0, 3, 2, 1, 4, 3, 2}},
		{3, 3, true, []float32{2, 3, 4, 1, 2, 3, 0, 1, 2}},
	} {
		if got := offsetPattern(c.g, c.kg, c.keyFirst); !slices.Equal(got, c.want) {
			t.Errorf("offsetPattern(%d, %d, %v) = %v, want %v", c.g, c.kg, c.keyFirst, got, c.want)
		}
	}
}

// TestPooledKeyPositions: queries on a 2×2 grid, keys pooled on a 4×4 one
// (MViTv2's stage entry: queries pooled, keys not), tables of 2·4 − 1
// rows: queryPositionBiases makes the bias a loop computes, q times each
// axis's table row at the stretched offset; with keys on the queries' grid
// there is no pair of grids and no bias.
func TestPooledKeyPositions(t *testing.T) {
	const b, h, d, gq, gk = 1, 2, 4, 2, 4
	sq, sk, w := gq*gq, gk*gk, h*d
	r := rand.New(rand.NewPCG(5, 6))
	fill := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(r.NormFloat64())
		}
		return out
	}
	th, tw := fill((2*gk-1)*d), fill((2*gk-1)*d)
	qd := fill(b * sq * w)
	want := make([]float32, b*h*sq*sk)
	pat := offsetPattern(gq, gk, false)
	for hh := range h {
		for p := range sq {
			for k := range sk {
				var a float64
				rh, rw := int(pat[(p/gq)*gk+k/gk]), int(pat[(p%gq)*gk+k%gk])
				for c := range d {
					x := float64(qd[p*w+hh*d+c])
					a += x*float64(th[rh*d+c]) + x*float64(tw[rw*d+c])
				}
				want[(hh*sq+p)*sk+k] = float32(a)
			}
		}
	}
	f := precision.F32
	relH := &val{shape: []int{2*gk - 1, d}, data: th, format: f}
	relW := &val{shape: []int{2*gk - 1, d}, data: tw, format: f}
	sx, sc, _ := planted(t, f, []int{b, sq, w}, qd, relH, relW)
	q := &val{shape: []int{b, sq, w}, data: qd, format: f}
	k := &val{shape: []int{b, sk, w}, data: fill(b * sk * w), format: f}
	biases := sx.queryPositionBiases(sc, attnChoice{q: q, k: k, v: k, headDim: d})
	if len(biases) == 0 {
		t.Fatal("no bias for keys on a grid of their own")
	}
	if e := relRMS(f, biases[0].data, want); e > 1e-6 {
		t.Errorf("the first bias: rel-RMS %.3g from the loop's", e)
	}
	k3 := &val{shape: []int{b, 9, w}, data: fill(b * 9 * w), format: f}
	if got := sx.queryPositionBiases(sc, attnChoice{q: q, k: k3, v: k3, headDim: d}); len(got) != 0 {
		t.Errorf("keys on no grid of the tables (9 places beside 2×2 queries): %d biases", len(got))
	}
}

// TestQueryBiasOf plants BoTNet's PosEmbedRel standing alone: queries q
// [2, 12, 8] on a 3×4 grid (the batch and the heads folded together),
// tables R_h [5, 8] and R_w [7, 8]; the logits are q·R_h at y' − y + 2
// plus q·R_w at x' − x + 3, [2, 12, 12]. They are explained from q and
// the tables; a target of noise the same shape is not.
func TestQueryBiasOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 11))
	const n, gh, gw, d = 2, 3, 4, 8
	s := gh * gw
	q, rh, rw := randVal(rng, n, s, d), randVal(rng, 2*gh-1, d), randVal(rng, 2*gw-1, d)
	dot := func(i int, r *val, row int) float32 {
		var sum float32
		for c := range d {
			sum += q.data[i*d+c] * r.data[row*d+c]
		}
		return sum
	}
	want := make([]float32, n*s*s)
	for b := range n {
		for p := range s {
			y, x := p/gw, p%gw
			for k := range s {
				yk, xk := k/gw, k%gw
				i := b*s + p
				want[(b*s+p)*s+k] = dot(i, rh, yk-y+gh-1) + dot(i, rw, xk-x+gw-1)
			}
		}
	}
	for _, c := range []struct {
		name string
		data []float32
		ok   bool
	}{{"relative logits", want, true}, {"noise", randVal(rng, n, s, s).data, false}} {
		sx, sc, target := planted(t, precision.F32, []int{n, s, s}, c.data)
		sc.add(q, true)
		rh.param, rw.param = true, true
		sc.add(rh, false)
		sc.add(rw, false)
		got := sx.queryBiasOf(target, sc)
		if !c.ok {
			if got != nil {
				t.Errorf("%s explained as relative logits", c.name)
			}
			continue
		}
		explainedWithin(t, got, target)
	}
}
