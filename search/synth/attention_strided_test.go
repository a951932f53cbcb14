package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// stridedPlant is Hiera's mask-unit attention over a fused projection
// qkv [1, T·W, 3·H·D] ([Q|K|V] blocks, rows (t, w), the window fastest):
// each window's rows attend over the window's keys, the queries pooled
// over stride rows T' = T/stride apart first; the output [1, T'·W, H·D].
func stridedPlant(qkv *val, w, heads, d, stride int) []float32 {
	m, c := qkv.shape[1], heads*d
	tw := m / w // rows per window
	tq := tw / stride
	at := func(row, piece, ch int) float64 { return float64(qkv.data[row*3*c+piece*c+ch]) }
	out := make([]float32, tq*w*c)
	for win := range w {
		for h := range heads {
			q := func(r, e int) float64 {
				best := at((0*tq+r)*w+win, 0, h*d+e)
				for s := 1; s < stride; s++ {
					best = max(best, at((s*tq+r)*w+win, 0, h*d+e))
				}
				return best
			}
			k := func(r, e int) float64 { return at(r*w+win, 1, h*d+e) }
			v := func(r, e int) float64 { return at(r*w+win, 2, h*d+e) }
			plantedAttentionQK(tq, tw, d, q, k, v, func(r, e int, y float64) { out[(r*w+win)*c+h*d+e] = float32(y) })
		}
	}
	return out
}

// TestStridedWindowsAttention plants Hiera's mask-unit attention in two
// windows (rows interleaved), plain and with the queries pooled over two
// rows; each is explained as attention within strided windows. Noise of
// the same shape is not.
func TestStridedWindowsAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 3))
	const w, heads, d = 2, 2, 4
	for _, stride := range []int{1, 2} {
		qkv := randVal(rng, 1, 8*w, 3*heads*d)
		want := stridedPlant(qkv, w, heads, d, stride)
		s, sc, target := planted(t, precision.F32, []int{1, len(want) / (heads * d), heads * d}, want)
		sc.add(qkv, true)
		explainedWithin(t, s.stridedWindowsAttention(target, sc), target)

		noise := randVal(rng, target.shape...)
		s, sc, target = planted(t, precision.F32, noise.shape, noise.data)
		sc.add(qkv, true)
		if got := s.stridedWindowsAttention(target, sc); got != nil {
			t.Errorf("stride %d: noise read as windowed attention: %s", stride, got.from.label)
		}
	}
}

// TestMaxOverAxisPlus: Hiera's stage-entry residual, a projection [1, 4·n,
// c] max-pooled over the stride (view(B, 4, −1, C).amax(1)) plus the
// attention's output, in bf16: explained bit for bit; the pooled value
// plus another value is not.
func TestMaxOverAxisPlus(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 4))
	const n, c = 6, 8
	proj, attn, other := randVal(rng, 1, 4*n, c), randVal(rng, 1, n, c), randVal(rng, 1, n, c)
	for _, v := range []*val{proj, attn, other} {
		v.format = precision.BF16
		for i := range v.data {
			v.data[i] = precision.BF16.Round(v.data[i])
		}
	}
	want := make([]float32, n*c)
	for i := range want {
		m := proj.data[i]
		for s := 1; s < 4; s++ {
			m = max(m, proj.data[s*n*c+i])
		}
		want[i] = precision.BF16.Round(m + attn.data[i])
	}
	s, sc, target := planted(t, precision.BF16, attn.shape, want)
	sc.add(proj, true)
	sc.add(attn, true)
	got := s.maxOverAxisPlus(target, sc, sc.vals)
	if got == nil || relRMS(precision.BF16, got.data, want) != 0 {
		t.Fatalf("not explained bit for bit (%v)", got)
	}
	s, sc, target = planted(t, precision.BF16, attn.shape, want)
	sc.add(proj, true)
	sc.add(other, true)
	if got := s.maxOverAxisPlus(target, sc, sc.vals); got != nil {
		t.Errorf("explained with another addend: %s", got.from.label)
	}
}

// TestWindowsHeldShapes: a value of another batch or width, or one not
// held whole, is no hull (and no panic: timm's relative-position ViT
// handed the screen a value of another batch).
func TestWindowsHeldShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 7))
	tv := randVal(rng, 1, 4, 8)
	for _, v := range []*val{randVal(rng, 2, 4, 8), randVal(rng, 1, 4, 6), {shape: []int{1, 4, 8}, format: precision.F32}} {
		if windowsHeld(tv, v, 1) {
			t.Errorf("%v held %v", v.shape, tv.shape)
		}
	}
}
