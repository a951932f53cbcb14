package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// maxResample bounds the factor axisResampled tries.
const maxResample = 4

// axisResampled are the shortcut terms of t made from a value x of the
// scope that differs from t on one axis by a whole factor k: every k-th
// entry of x along it (x[:, :, ::2], a temporal downsampler's identity),
// or each entry of x k times (repeat_interleave, an upsampler's): Allegro's
// VAE adds them to its temporal convolutions' outputs.
func (s *synth) axisResampled(t *val, vals []*val) []*val {
	var terms []*val
	for _, x := range vals {
		if x.opaque || x.integral() || x == t || x.format != t.format || len(x.shape) != len(t.shape) {
			continue
		}
		a := oneAxisApart(x.shape, t.shape)
		if a < 0 {
			continue
		}
		xa, ta := x.shape[a], t.shape[a]
		switch {
		case xa > ta && xa%ta == 0 && xa/ta <= maxResample:
			k := xa / ta
			split := slices.Concat(t.shape[:a], []int{ta, k}, t.shape[a+1:])
			first := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: a + 1, Start: 0, End: 1}, args: []*val{s.reshape(x, split)}, out: x.format, label: fmt.Sprintf("every %d-th entry along axis %d", k, a)})
			if v := s.reshape(first, t.shape); v != nil {
				terms = append(terms, v)
			}
		case ta > xa && ta%xa == 0 && ta/xa <= maxResample:
			k := ta / xa
			one := s.reshape(x, slices.Concat(x.shape[:a+1], []int{1}, x.shape[a+1:]))
			rep := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: k, Axis: a + 1}, args: []*val{one}, out: x.format, label: fmt.Sprintf("each entry %d times along axis %d", k, a)})
			if v := s.reshape(rep, t.shape); v != nil {
				terms = append(terms, v)
			}
		}
	}
	return terms
}

// oneAxisApart is the one axis on which shapes a and b (of one rank)
// differ, or -1.
func oneAxisApart(a, b []int) int {
	at := -1
	for i := range a {
		if a[i] != b[i] {
			if at >= 0 {
				return -1
			}
			at = i
		}
	}
	return at
}
