package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// relShiftReference is Transformer-XL's relative attention written the
// way the reference computes it, in float64: per head, ac = (q + u)·kᵀ,
// bd = (q + w)·Pᵀ over P's 2n − 1 rows (taken last first where
// reversed), bd padded with a zero column in front, viewed as 2n rows of
// n, its first row dropped, viewed back as n rows of 2n − 1 and cut to
// the first n columns; softmax((ac + bd)·scale)·v. q, k, v [b, n, h·d],
// table [tb, 2n − 1, h·d] (tb 1 or b); u, w [h·d] or nil; plain drops
// u and bd altogether (the negative control's plain attention).
func relShiftReference(q, k, v, table, u, w []float32, b, tb, n, h, d int, reversed, plain bool) []float32 {
	width, l := h*d, 2*n-1
	if plain {
		u = nil
	}
	out := make([]float32, b*n*width)
	plus := func(x, p []float32, at int) float64 {
		if p == nil {
			return float64(x[at])
		}
		return float64(x[at]) + float64(p[at%width])
	}
	for bb := range b {
		pb := bb
		if tb == 1 {
			pb = 0
		}
		for hh := range h {
			// bd [n, l] per head, then the pad-and-view shift
			bd := make([]float64, n*l)
			for i := range n {
				for m := range l {
					row := m
					if reversed {
						row = l - 1 - m
					}
					for c := range d {
						bd[i*l+m] += plus(q, w, (bb*n+i)*width+hh*d+c) * float64(table[(pb*l+row)*width+hh*d+c])
					}
				}
			}
			padded := make([]float64, 0, n*(l+1))
			for i := range n {
				padded = append(padded, 0)
				padded = append(padded, bd[i*l:(i+1)*l]...)
			}
			viewed := padded[n:] // (l + 1) rows of n, the first dropped
			for i := range n {
				sc := make([]float64, n)
				for j := range n {
					for c := range d {
						sc[j] += plus(q, u, (bb*n+i)*width+hh*d+c) * float64(k[(bb*n+j)*width+hh*d+c])
					}
					if !plain {
						sc[j] += viewed[i*l+j]
					}
					sc[j] /= math.Sqrt(float64(d))
				}
				p := softmax64(sc)
				for c := range d {
					var acc float64
					for j := range n {
						acc += p[j] * float64(v[(bb*n+j)*width+hh*d+c])
					}
					out[(bb*n+i)*width+hh*d+c] = float32(acc)
				}
			}
		}
	}
	return out
}

// TestRelShiftAttention plants Transformer-XL's relative position
// attention (Wav2Vec2-Conformer's and FastConformer's): q, k, v and a
// projected table of 2n − 1 offsets the scope's children made, per-head
// biases u and w its own parameters ([H, D]), the position term shifted
// as the reference's pad-and-view does it. relShiftAttention explains
// it and reads which terms carry a bias and which way the shift runs; a
// plain attention beside the same table and parameters is not taken for
// it (and glue explains that one as plain attention, no shift recorded).
func TestRelShiftAttention(t *testing.T) {
	const h, d = 2, 4
	cases := []struct {
		name       string
		b, tb, n   int
		params     int // 0: no biases; 2: u and w
		reversed   bool
		plain      bool // the target has no position term
		wantShift  string
		wantBiases string
	}{
		{name: "u and w, offsets running down", b: 1, tb: 1, n: 6, params: 2, wantShift: "key_minus_query", wantBiases: "content_and_position"},
		{name: "two samples, one table", b: 2, tb: 1, n: 5, params: 2, wantShift: "key_minus_query", wantBiases: "content_and_position"},
		{name: "two samples, a table each", b: 2, tb: 2, n: 5, params: 2, wantShift: "key_minus_query", wantBiases: "content_and_position"},
		{name: "no biases, offsets running up", b: 1, tb: 1, n: 7, params: 0, reversed: true, wantShift: "query_minus_key", wantBiases: "none"},
		{name: "plain attention (negative control)", b: 1, tb: 1, n: 6, params: 2, plain: true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(30+i), 7))
			width := h * d
			q, k, v := randVal(rng, c.b, c.n, width), randVal(rng, c.b, c.n, width), randVal(rng, c.b, c.n, width)
			table := randVal(rng, c.tb, 2*c.n-1, width)
			for _, x := range []struct {
				v    *val
				name string
			}{{q, "q/out"}, {k, "k/out"}, {v, "v/out"}, {table, "pos/out"}} {
				x.v.origin, x.v.fit = x.name, &leafFit{kind: "linear"}
			}
			var params []*val
			var u, w []float32
			if c.params == 2 {
				pu, pw := randVal(rng, h, d), randVal(rng, h, d)
				pu.origin, pu.param, pw.origin, pw.param = "bias_u", true, "bias_w", true
				params, u, w = []*val{pu, pw}, pu.data, pw.data
			}
			want := relShiftReference(q.data, k.data, v.data, table.data, u, w, c.b, c.tb, c.n, h, d, c.reversed, c.plain)
			s, sc, target := planted(t, precision.F32, []int{c.b, c.n, width}, want)
			for _, p := range params {
				sc.add(p, false)
			}
			for _, x := range []*val{q, k, v, table} {
				sc.add(x, true)
			}
			got := s.relShiftAttention(target, sc)
			if c.plain {
				if got != nil {
					t.Fatalf("a plain attention taken for a relative one (rel-RMS %.3g)", relRMS(precision.F32, got.data, target.data))
				}
				// the whole search: plain attention, no shift recorded
				explainedWithin(t, s.glue(target, sc), target)
				if len(s.relShifts) != 0 {
					t.Errorf("glue recorded a relative shift for a plain attention: %+v", s.relShifts[0])
				}
				return
			}
			explainedWithin(t, got, target)
			if len(s.relShifts) != 1 {
				t.Fatalf("%d relative shifts recorded, want 1", len(s.relShifts))
			}
			r := s.relShifts[0]
			if r.direction != c.wantShift || r.terms != c.wantBiases {
				t.Errorf("found shift %s, biases %s; want %s, %s", r.direction, r.terms, c.wantShift, c.wantBiases)
			}
			// the other direction was scored and lost
			if len(r.shifts) < 2 {
				t.Errorf("the shift's evidence holds %d candidates, want both directions", len(r.shifts))
			}
			if ch := s.attn[len(s.attn)-1].choice; ch.k != k || ch.v != v || ch.headDim != d {
				t.Errorf("operands k=%s v=%s d=%d, want k/out v/out %d", ch.k.origin, ch.v.origin, ch.headDim, d)
			}
		})
	}
}

// TestShapePositionSinusoid: a call handed hidden states (their shape
// alone read) returns a sinusoid table of positions made from the
// request's shape: 0…n−1 plus an offset, or running down from n − 1 to
// −(n − 1) (a relative-offset table, sin and cos interleaved, as
// Transformer-XL's encoders make it). Both are explained, the offset
// read; a table of positions in no order is not.
func TestShapePositionSinusoid(t *testing.T) {
	const dim = 16
	table := func(pos []float64, interleaved bool) []float32 {
		out := make([]float32, len(pos)*dim)
		for r, p := range pos {
			for j := range dim / 2 {
				f := math.Pow(10000, -float64(j)/float64(dim/2))
				s, c := math.Sin(p*f), math.Cos(p*f)
				if interleaved {
					out[r*dim+2*j], out[r*dim+2*j+1] = float32(s), float32(c)
				} else {
					out[r*dim+j], out[r*dim+dim/2+j] = float32(s), float32(c)
				}
			}
		}
		return out
	}
	cases := []struct {
		name        string
		pos         []float64
		interleaved bool
		offset      int
		ok          bool
	}{
		{name: "offsets 4 down to −4, interleaved", pos: []float64{4, 3, 2, 1, 0, -1, -2, -3, -4}, interleaved: true, offset: 4, ok: true},
		{name: "positions 2…8, halves", pos: []float64{2, 3, 4, 5, 6, 7, 8}, offset: 2, ok: true},
		{name: "positions in no order", pos: []float64{3, 0, 5, 1, 4, 2, 6}, interleaved: true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.pos)
			s, _, target := planted(t, precision.F32, []int{1, n, dim}, table(c.pos, c.interleaved))
			x := randVal(rand.New(rand.NewPCG(uint64(i), 3)), 1, 5, 8) // hidden states: their shape alone
			got := s.shapePositionSinusoid(x, target)
			if !c.ok {
				if got != nil {
					t.Fatalf("explained a table of positions in no order (rel-RMS %.3g)", relRMS(precision.F32, got.data, target.data))
				}
				return
			}
			explainedWithin(t, got, target)
			if got.fit == nil || got.fit.kind != "position_sinusoid" || got.fit.offset != c.offset {
				t.Fatalf("fit %+v, want a position sinusoid of offset %d", got.fit, c.offset)
			}
			if !slices.Equal(got.shape, target.shape) {
				t.Errorf("shape %v, want %v", got.shape, target.shape)
			}
		})
	}
}
