package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec/program"
)

// maxFilter2DTaps bounds the side of a square kernel fixedFilter2D solves
// for (k² taps a system).
const maxFilter2DTaps = 7

// fixedFilter2D is fixedFilter1D over maps: t [B, C, H', W'] as x [B, C,
// H, W] filtered channel by channel by a k×k kernel no parameter holds
// (a buffer: a resampler's binomial blur before it strides, LTX-2's
// latent upsampler's), zero padded by p on each side and strided by s on
// both axes. For every geometry whose sizes give H' and W', the k² taps
// are solved by least squares at up to 4096 entries and snapped (to the
// simplest common denominator, or in a narrow format to the binary
// fractions that round as the forward did), else used as solved; the
// depthwise convolution must then reproduce t.
func (s *synth) fixedFilter2D(x, t *val) *val {
	if len(x.shape) != 4 || len(t.shape) != 4 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] || x.integral() || x.numel() > blurMaxEntries {
		return nil
	}
	c, h, w, ho, wo := x.shape[1], x.shape[2], x.shape[3], t.shape[2], t.shape[3]
	if ho == h && wo == w && relRMS(t.format, x.data, t.data) == 0 {
		return nil // the identity: no filter to read
	}
	var best filterFit
	for k := 2; k <= maxFilter2DTaps; k++ {
		for st := 1; st <= 2; st++ {
			for p := 0; p < k; p++ {
				if h+2*p < k || w+2*p < k || (h+2*p-k)/st+1 != ho || (w+2*p-k)/st+1 != wo {
					continue
				}
				for _, kern := range filter2DTaps(x, t, k, st, p).kernels(t.format) {
					kc := &val{shape: []int{c, 1, k, k}, data: make([]float32, c*k*k), format: x.format, origin: fmt.Sprintf("filter%dx%d", k, k)}
					for ch := range c {
						for i, v := range kern {
							kc.data[ch*k*k+i] = x.format.Round(v)
						}
					}
					e := &expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Pad: p, Stride: st, Groups: c}}, args: []*val{x, kc, nil}, out: t.format,
						label: fmt.Sprintf("a fixed %dx%d filter per channel, zero padded %d, stride %d", k, k, p, st)}
					v, _ := s.best(t, []*expr{e})
					if best.offer(v, t, kc, fmt.Sprintf("a fixed %dx%d filter applied to each channel (a buffer of the module: no parameter holds it), zero padded %d, stride %d, its taps %v read off the values", k, k, p, st, kern)) || best.v != nil && best.err <= looseFloor(t.format)/10 {
						// exact, or as near as the forward's own sums
						// allow: a larger kernel padded with zero taps
						// fits as well and is not the buffer
						return best.take(s)
					}
				}
			}
		}
	}
	return best.take(s)
}

// filter2DTaps is the system t[b, c, i, j] ≈ Σ_{u,v} K_{u,v}·x[b, c,
// st·i + u − p, st·j + v − p] of the k² taps K, zeros outside x.
func filter2DTaps(x, t *val, k, st, p int) *tapSystem {
	h, w, ho, wo := x.shape[2], x.shape[3], t.shape[2], t.shape[3]
	return newTapSystem(t, k*k, func(e, j int) float64 {
		bc, r := e/(ho*wo), e%(ho*wo)
		i, jj := r/wo, r%wo
		y, z := st*i+j/k-p, st*jj+j%k-p
		if y < 0 || y >= h || z < 0 || z >= w {
			return 0
		}
		return float64(x.data[(bc*h+y)*w+z])
	})
}
