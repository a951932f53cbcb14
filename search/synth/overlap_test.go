package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestOverlapAdded: tiles blended over their overlaps and summed into
// zeros as Allegro's tiled decode does (each tiled axis in turn, the head
// overlap times j/o where a tile comes before, the tail times 1 − j/o
// where one comes after), over one axis and over two, the whole then
// with its first two map axes swapped or its batch of one flattened
// away, are read as such; tiles summed
// with other weights are not.
func TestOverlapAdded(t *testing.T) {
	const c, h, w = 2, 4, 6
	rng := rand.New(rand.NewPCG(2, 21))
	for _, tc := range []struct {
		name       string
		gh, gw     int // tiles along h and w
		sh, sw     int // their strides
		swap       bool
		flat       bool // the batch of one dropped
		otherRamps bool
	}{
		{"three along one axis", 1, 3, h, 4, false, false, false},
		{"two by two, axes moved", 2, 2, 3, 4, true, false, false},
		{"two by two, batch flattened", 2, 2, 3, 4, false, true, false},
		{"other weights", 1, 3, h, 4, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			H, W := (tc.gh-1)*tc.sh+h, (tc.gw-1)*tc.sw+w
			out := make([]float32, c*H*W)
			var tiles []*val
			for i := range tc.gh {
				for j := range tc.gw {
					tile := randVal(rng, 1, c, h, w)
					tiles = append(tiles, tile)
					ramp := func(n, o, k, g, at int) float32 { // along an axis of n, overlap o, tile k of g
						r := float32(1)
						if o <= 0 {
							return r
						}
						if k > 0 && at < o {
							r = float32(at) / float32(o)
						}
						if k < g-1 && at >= n-o {
							r = 1 - float32(at-(n-o))/float32(o)
						}
						if tc.otherRamps {
							r = r * r
						}
						return r
					}
					for ch := range c {
						for y := range h {
							for x := range w {
								v := tile.data[(ch*h+y)*w+x]
								v *= ramp(h, h-tc.sh, i, tc.gh, y)
								v *= ramp(w, w-tc.sw, j, tc.gw, x)
								out[(ch*H+i*tc.sh+y)*W+j*tc.sw+x] += v
							}
						}
					}
				}
			}
			shape := []int{1, c, H, W}
			if tc.swap {
				moved := make([]float32, 0, len(out))
				for y := range H {
					for ch := range c {
						moved = append(moved, out[(ch*H+y)*W:(ch*H+y+1)*W]...)
					}
				}
				out, shape = moved, []int{1, H, c, W}
			}
			if tc.flat {
				shape = shape[1:]
			}
			s, sc, target := planted(t, precision.F32, shape, out)
			for _, tile := range tiles {
				sc.add(tile, true)
			}
			got := s.overlapAdded(target, sc, sc.vals)
			if tc.otherRamps {
				if got != nil {
					t.Error("tiles weighted otherwise read as linear ramps")
				}
				return
			}
			explainedWithin(t, got, target)
		})
	}
}
