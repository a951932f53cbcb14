package exec

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/precision"
)

// RopeTables computes rotary tables from positions pos [S, len(AxesDims)]
// (row-major): for axis a of width d and i < d/2,
//
//	f_i = 1 / θ^(2i/d)   in FreqFormat: F64 all in f64; F32 each step
//	                     rounded to f32; BF16/F16 computed as F32, then
//	                     rounded to that format (a whole-model cast)
//	α_i = pos[s, a] · f_i, cos α_i, sin α_i   in AngleFormat (F64 or F32)
//
// (f_i = 0 for i ≥ Rotated[a] where Rotated is set; with FreqAxes, one
// axis whose frequency i reads column FreqAxes[i]) and lays each axis out by Layout: interleaved [c0 c0 c1 c1 ...], half
// [c0 c1 ... c0 c1 ...]; the axes are concatenated (with Joined and the
// half layout, the axes' frequencies are joined first and laid out once). cos and sin are f32,
// [S, Σ d] row-major (the caller rounds them to a storage format).
func RopeTables(pos []float32, seq int, p RopeTableParams, m Math) (cos, sin []float32, err error) {
	na := len(p.AxesDims)
	cols, err := ropeColumns(len(pos), seq, p)
	if err != nil {
		return nil, nil, err
	}
	if p.Theta <= 0 || p.Layout != RopeInterleaved && p.Layout != RopeHalf {
		return nil, nil, fmt.Errorf("exec: rope table: theta %g, layout %v", p.Theta, p.Layout)
	}
	if p.AngleFormat != precision.F64 && p.AngleFormat != precision.F32 {
		return nil, nil, fmt.Errorf("exec: rope table: angle format %v is not f64 or f32", p.AngleFormat)
	}
	if p.Rotated != nil && len(p.Rotated) != na {
		return nil, nil, fmt.Errorf("exec: rope table: %d rotated counts for %d axes", len(p.Rotated), na)
	}
	width := 0
	freqs := make([][]float64, na)
	for a, d := range p.AxesDims {
		if d <= 0 || d%2 != 0 {
			return nil, nil, fmt.Errorf("exec: rope table: axis %d width %d is not even", a, d)
		}
		if freqs[a], err = ropeFreqs(d, p.Theta, p.FreqFormat); err != nil {
			return nil, nil, err
		}
		if p.Rotated != nil {
			r := p.Rotated[a]
			if r < 0 || r > d/2 {
				return nil, nil, fmt.Errorf("exec: rope table: axis %d turns %d of %d frequencies", a, r, d/2)
			}
			clear(freqs[a][r:])
		}
		width += d
	}
	cos = make([]float32, seq*width)
	sin = make([]float32, seq*width)
	joined := p.Joined && p.Layout == RopeHalf
	for s := range seq {
		off, j := s*width, 0 // j: the frequency's index over the joined axes
		for a, fs := range freqs {
			half := len(fs)
			for i, f := range fs {
				x := pos[s*cols+a]
				if p.FreqAxes != nil {
					x = pos[s*cols+p.FreqAxes[i]]
				}
				var c, sn float32
				if p.AngleFormat == precision.F64 {
					ang := float64(x) * f
					c, sn = float32(math.Cos(ang)), float32(math.Sin(ang))
				} else if ang := x * float32(f); m&MathCUDASinCos != 0 {
					c, sn = CosCUDA(ang), SinCUDA(ang)
				} else {
					c, sn = float32(math.Cos(float64(ang))), float32(math.Sin(float64(ang)))
				}
				switch {
				case joined:
					at := s*width + j
					cos[at], cos[at+width/2] = c, c
					sin[at], sin[at+width/2] = sn, sn
				case p.Layout == RopeInterleaved:
					cos[off+2*i], cos[off+2*i+1] = c, c
					sin[off+2*i], sin[off+2*i+1] = sn, sn
				default:
					cos[off+i], cos[off+half+i] = c, c
					sin[off+i], sin[off+half+i] = sn, sn
				}
				j++
			}
			off += 2 * half
		}
	}
	return cos, sin, nil
}

// ropeColumns checks n positions for seq rows against p and returns the
// columns per row: one per axis, or with FreqAxes n/seq, each frequency's
// column among them.
func ropeColumns(n, seq int, p RopeTableParams) (int, error) {
	na := len(p.AxesDims)
	if p.FreqAxes == nil {
		if na == 0 || seq < 0 || n != seq*na {
			return 0, fmt.Errorf("exec: rope table: %d positions for %d rows of %d axes", n, seq, na)
		}
		return na, nil
	}
	if na != 1 || len(p.FreqAxes) != p.AxesDims[0]/2 || seq <= 0 || n%seq != 0 {
		return 0, fmt.Errorf("exec: rope table: %d frequency axes for widths %v, %d positions for %d rows", len(p.FreqAxes), p.AxesDims, n, seq)
	}
	cols := n / seq
	for i, a := range p.FreqAxes {
		if a < 0 || a >= cols {
			return 0, fmt.Errorf("exec: rope table: frequency %d turns by column %d of %d", i, a, cols)
		}
	}
	return cols, nil
}

// ropeFreqs is 1/θ^(2i/d), i < d/2, in format f.
func ropeFreqs(d int, theta float64, f precision.Format) ([]float64, error) {
	out := make([]float64, d/2)
	for i := range out {
		switch f {
		case precision.F64:
			out[i] = 1 / math.Pow(theta, float64(2*i)/float64(d))
		case precision.F32, precision.BF16, precision.F16:
			e := float32(2*i) / float32(d)
			pw := float32(math.Pow(float64(float32(theta)), float64(e)))
			out[i] = float64(f.Round(1 / pw))
		default:
			return nil, fmt.Errorf("exec: rope table: frequency format %v", f)
		}
	}
	return out, nil
}
