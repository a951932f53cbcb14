package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// blockCells calls fn for every cell j of every block β of an unpatched
// map of sp·f cells (images: sp and f of 2 axes; videos: 3, causal: the
// first frame repeated f₀ times in front), with the cell's flat index and
// whether the map holds it (false for a repeated frame: index of frame 0).
// Written with plain loops, apart from blockGeom.
func blockCells(sp, f []int, causal bool, fn func(beta, j, idx int, held bool)) {
	if len(sp) == 2 {
		sp, f = append([]int{1}, sp...), append([]int{1}, f...)
	}
	h, w := sp[1]*f[1], sp[2]*f[2]
	for t := range sp[0] {
		for y := range sp[1] {
			for x := range sp[2] {
				for a := range f[0] {
					for b := range f[1] {
						for c := range f[2] {
							frame, held := t*f[0]+a, true
							if causal {
								frame -= f[0] - 1
							}
							if frame < 0 {
								frame, held = 0, false
							}
							fn((t*sp[1]+y)*sp[2]+x, (a*f[1]+b)*f[2]+c, (frame*h+y*f[1]+b)*w+x*f[2]+c, held)
						}
					}
				}
			}
		}
	}
}

// TestFixedBlock: a fixed linear map M on non-overlapping blocks of each
// channel (a wavelet patcher) and its inverse direction, both channel
// orders (c·m + k, k·C + c), images in 2×2 blocks and videos in causal
// 4×2×2 blocks, M of ±1/8 (snapped: the note says so) or random (used as
// solved), f32 and bf16: each is read off the values and reproduces the
// target; tanh of twice the map is not read as one.
func TestFixedBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 9))
	for _, tc := range []struct {
		name   string
		f      precision.Format
		c      int
		sp, bl []int // patched sizes, block sizes
		causal bool
		simple bool // M of ±1/8, else random
	}{
		{"image eighths f32", precision.F32, 3, []int{4, 4}, []int{2, 2}, false, true},
		{"image random f32", precision.F32, 3, []int{4, 4}, []int{2, 2}, false, false},
		{"video causal eighths f32", precision.F32, 2, []int{3, 4, 4}, []int{4, 2, 2}, true, true},
		{"video causal random f32", precision.F32, 2, []int{3, 4, 4}, []int{4, 2, 2}, true, false},
		{"video causal eighths bf16", precision.BF16, 2, []int{3, 4, 4}, []int{4, 2, 2}, true, true},
	} {
		m, nb, b := 1, 1, 2
		for i := range tc.sp {
			m, nb = m*tc.bl[i], nb*tc.sp[i]
		}
		full := make([]int, len(tc.sp))
		for i := range full {
			full[i] = tc.sp[i] * tc.bl[i]
		}
		if tc.causal {
			full[0] -= tc.bl[0] - 1
			b = 1
		}
		ns := 1
		for _, s := range full {
			ns *= s
		}
		mat := make([]float64, m*m)
		for i := range mat {
			if mat[i] = rng.NormFloat64() / 4; tc.simple {
				mat[i] = float64(1-2*rng.IntN(2)) / 8
			}
		}
		unShape := append([]int{b, tc.c}, full...)
		paShape := append([]int{b, tc.c * m}, tc.sp...)
		for _, chMajor := range []bool{true, false} {
			ch := func(c, k int) int {
				if chMajor {
					return c*m + k
				}
				return k*tc.c + c
			}
			name := fmt.Sprintf("%s chMajor=%v", tc.name, chMajor)
			t.Run(name+" map", func(t *testing.T) {
				x := roundedVal(randVal(rng, unShape...), tc.f)
				u := make([]float64, b*tc.c*nb*m) // each block's cells
				for bc := range b * tc.c {
					blockCells(tc.sp, tc.bl, tc.causal, func(beta, j, idx int, _ bool) {
						u[(bc*nb+beta)*m+j] = float64(x.data[bc*ns+idx])
					})
				}
				want := make([]float32, b*tc.c*m*nb)
				for bc := range b * tc.c {
					for beta := range nb {
						for k := range m {
							var sum float64
							for j := range m {
								sum += mat[k*m+j] * u[(bc*nb+beta)*m+j]
							}
							want[((bc/tc.c)*tc.c*m+ch(bc%tc.c, k))*nb+beta] = float32(sum)
						}
					}
				}
				s, _, target := planted(t, tc.f, paShape, want, x)
				blockExplained(t, s, s.fixedBlockMap(x, target), target, tc.simple)
				tanh := make([]float32, len(want))
				for i, v := range want {
					tanh[i] = float32(math.Tanh(2 * float64(v)))
				}
				s, _, target = planted(t, tc.f, paShape, tanh, x)
				if v := s.fixedBlockMap(x, target); v != nil {
					t.Errorf("tanh of a block map read as one, to rel-RMS %.3g", errOf(v, target))
				}
			})
			t.Run(name+" unmap", func(t *testing.T) {
				x := roundedVal(randVal(rng, paShape...), tc.f)
				want := make([]float32, b*tc.c*ns)
				for bc := range b * tc.c {
					bi, c := bc/tc.c, bc%tc.c
					blockCells(tc.sp, tc.bl, tc.causal, func(beta, j, idx int, held bool) {
						if !held {
							return // a frame the decoder drops
						}
						var sum float64
						for k := range m {
							sum += mat[j*m+k] * float64(x.data[(bi*tc.c*m+ch(c, k))*nb+beta])
						}
						want[bc*ns+idx] = float32(sum)
					})
				}
				s, _, target := planted(t, tc.f, unShape, want, x)
				blockExplained(t, s, s.fixedBlockUnmap(x, target), target, tc.simple)
			})
		}
	}
}

// blockExplained fails t unless got reproduces target within its
// format's tolerance and, where the map's entries are eighths, the
// document's note says it was snapped to them.
func blockExplained(t *testing.T, s *synth, got, target *val, simple bool) {
	t.Helper()
	if got == nil {
		t.Fatal("not explained")
	}
	if e := errOf(got, target); e > tolerance(target.format) {
		t.Fatalf("rel-RMS %.3g", e)
	}
	for _, n := range s.em.notes {
		if strings.Contains(n, "fixed linear map") && strings.Contains(n, "multiples of 1/8") == simple {
			return
		}
	}
	t.Errorf("no note of the map (snapped: %v) in %v", simple, s.em.notes)
}

// TestFixedBlockInverse: a decoder's channels made by a convolution from
// a few (here 3 of 16 directions, plus a little noise, in bf16): the map
// solved from its own values is off by far more than a step, so only the
// inverse of the encoder's map read before (H/8 of a 16×16 Hadamard H,
// its inverse Hᵀ/2) gives the unmap's simple entries. Without that map,
// the unmap is not read so.
func TestFixedBlockInverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 16))
	const c, f = 2, 4
	bf := precision.BF16
	n := f * f
	had := make([]float64, n*n)
	for i := range n {
		for j := range n {
			had[i*n+j] = 1.0 / 8
			if bits := i & j; (bits^bits>>1^bits>>2^bits>>3)&1 == 1 {
				had[i*n+j] = -1.0 / 8
			}
		}
	}
	// the encoder: x [1, 2, 16, 16] in 4×4 blocks → [1, 32, 4, 4], channel-major
	sp, bl := []int{4, 4}, []int{f, f}
	x := roundedVal(randVal(rng, 1, c, 16, 16), bf)
	enc := make([]float32, c*n*16)
	for ch := range c {
		blockCells(sp, bl, false, func(beta, j, idx int, _ bool) {
			for k := range n {
				enc[(ch*n+k)*16+beta] += float32(had[k*n+j]) * x.data[ch*256+idx]
			}
		})
	}
	s, _, target := planted(t, bf, []int{1, c * n, 4, 4}, enc, x)
	blockExplained(t, s, s.fixedBlockMap(x, target), target, true)
	// the decoder: its input's 16 channels at each position span 3 directions
	z := &val{shape: []int{1, c * n, 4, 4}, data: make([]float32, c*n*16), format: bf}
	basis := randVal(rng, 3, n)
	for ch := range c {
		for beta := range 16 {
			w := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			for k := range n {
				v := 1e-2 * rng.NormFloat64()
				for r := range 3 {
					v += w[r] * float64(basis.data[r*n+k])
				}
				z.data[(ch*n+k)*16+beta] = bf.Round(float32(v))
			}
		}
	}
	dec := &val{shape: []int{1, c, 16, 16}, data: make([]float32, c*256), format: bf, origin: "decoded"}
	for ch := range c {
		blockCells(sp, bl, false, func(beta, j, idx int, _ bool) {
			var sum float64
			for k := range n {
				sum += 4 * had[k*n+j] * float64(z.data[(ch*n+k)*16+beta]) // (H/8)⁻¹ = Hᵀ/2
			}
			dec.data[ch*256+idx] = bf.Round(float32(sum))
		})
	}
	got := s.fixedBlockUnmap(z, dec)
	if got == nil || errOf(got, dec) > tolerance(bf) {
		t.Fatalf("unmap not explained (rel-RMS %.3g)", errOf(got, dec))
	}
	inverse := false
	for _, note := range s.em.notes {
		inverse = inverse || strings.Contains(note, "the inverse of a block map read before, its entries multiples of 1/2")
	}
	if !inverse {
		t.Errorf("the unmap is not read as the encoder's inverse: %v", s.em.notes)
	}
	fresh, _, _ := planted(t, bf, []int{1, c * n, 4, 4}, enc, x)
	fresh.fixedBlockUnmap(z, dec)
	for _, note := range fresh.em.notes {
		if strings.Contains(note, "multiples of 1/2") {
			t.Errorf("the unmap's own values pinned its map: the test shows nothing (%s)", note)
		}
	}
}

// TestFixedBlockNonFinite: a NaN or an infinity among x's cells, or
// zeros on both sides (a singular system: any map, so none read), leaves
// the block map unread in both directions.
func TestFixedBlockNonFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 1))
	for _, tc := range []struct {
		name string
		bad  float32
		zero bool
	}{
		{"NaN", float32(math.NaN()), false},
		{"+Inf", float32(math.Inf(1)), false},
		{"zeros", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := randVal(rng, 1, 2, 4, 4)
			want := make([]float32, 1*8*2*2)
			for i := range want {
				want[i] = float32(rng.NormFloat64())
			}
			if tc.zero {
				clear(x.data)
				clear(want)
			} else {
				x.data[5] = tc.bad
			}
			s, _, target := planted(t, precision.F32, []int{1, 8, 2, 2}, want, x)
			if v := s.fixedBlockMap(x, target); v != nil {
				t.Errorf("read as a block map, to rel-RMS %.3g", errOf(v, target))
			}
			if v := s.fixedBlockUnmap(target, x); v != nil {
				t.Errorf("read as a block unmap, to rel-RMS %.3g", errOf(v, x))
			}
		})
	}
}
