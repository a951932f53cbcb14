package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// maskOf is the 0/1 mask [p, lq, lk] of keep(b, i, j).
func maskOf(p, lq, lk int, keep func(b, i, j int) bool) *val {
	v := &val{shape: []int{1, p, lq, lk}, data: make([]float32, p*lq*lk), format: precision.F32}
	for b := range p {
		for i := range lq {
			for j := range lk {
				if keep(b, i, j) {
					v.data[(b*lq+i)*lk+j] = 1
				}
			}
		}
	}
	return v
}

// lowest is float32's finfo.min, the masked value of an additive mask.
const lowest = -math.MaxFloat32

// additive is an additive mask of shape: the first kept entries 0, the
// rest the masked values in turn.
func additive(shape []int, kept int, masked ...float32) *val {
	v := &val{shape: shape, data: make([]float32, exec.Numel(shape)), format: precision.F32}
	for i := kept; i < len(v.data); i++ {
		v.data[i] = masked[i%len(masked)]
	}
	return v
}

// TestBandMaskNote: masks a forward builds from the sequence's length —
// causal, a sliding window, LongT5's local blocks over a padded 3-block
// window — are read as one band and a key range per leading index;
// patterns no such rule makes (a padding mask per query, a random one,
// no zero) are not. Additive masks (0 and one value at most −10⁴) are
// read by their zeros; a row per leading index has no band.
func TestBandMaskNote(t *testing.T) {
	const l, s = 4, 10 // LongT5: blocks of 4 over 10 positions (3 blocks, the last padded)
	local := func(b, i, j int) bool {
		p := b*l + j - l // the key's position in the sequence
		return p >= 0 && p < s && j-l-i < l && i+l-j < l
	}
	rng := rand.New(rand.NewPCG(5, 0))
	for _, c := range []struct {
		name string
		m    *val
		want string // a part of the note; "" for none
	}{
		{"causal", maskOf(1, 6, 6, func(_, i, j int) bool { return j <= i }), "-5 ≤ j − i ≤ 0"},
		{"sliding window of 3", maskOf(1, 8, 8, func(_, i, j int) bool { return j <= i && i-j < 3 }), "-2 ≤ j − i ≤ 0"},
		{"local blocks", maskOf(3, l, 3*l, local), "1 ≤ j − i ≤ 7"},
		{"keys padded per query", maskOf(1, 4, 4, func(_, i, j int) bool { return (i+j)%3 != 0 }), ""},
		{"random", maskOf(1, 5, 7, func(_, _, _ int) bool { return rng.IntN(2) == 0 }), ""},
		{"all ones", maskOf(1, 3, 3, func(_, _, _ int) bool { return true }), ""},
		{"additive padding to a block's length", additive([]int{1, 12}, 8, lowest), "additive mask made from the request's shape: the keys of each leading index's range kept (keys [0, 8) of queries [0, 1))"},
		{"additive, two masked values", additive([]int{1, 12}, 8, lowest, -1e4), ""},
		{"additive, a masked value too small to mask", additive([]int{1, 12}, 8, -3), ""},
	} {
		got := bandMaskNote(c.m)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: note %q, want one holding %q", c.name, got, c.want)
		}
	}
}

// TestMaskBiasBroadcast: an additive bias [1, H, Lq, Lk] of 0 and −1e10
// made from a 0/1 mask of one per key and query, the same for every head
// ([1, 1, Lq, Lk]), is the mask repeated over the heads then made
// additive.
func TestMaskBiasBroadcast(t *testing.T) {
	m := maskOf(1, 3, 5, func(_, i, j int) bool { return j >= i })
	const heads = 2
	data := make([]float32, 0, heads*15)
	for range heads {
		for _, x := range m.data {
			data = append(data, (1-x)*-1e10)
		}
	}
	s, _, target := planted(t, precision.F32, []int{1, heads, 3, 5}, data)
	v := s.maskBias(target, []*val{m})
	if v == nil {
		t.Fatal("not explained")
	}
	if relRMS(precision.F32, v.data, target.data) != 0 {
		t.Errorf("explained to rel-RMS %g, want 0", relRMS(precision.F32, v.data, target.data))
	}
}
