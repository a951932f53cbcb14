//go:build linux

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/zflow/zflow/exec"
)

// normSource is the norm kernel: one warp per group, statistics as the CPU
// computes them (f64 sums, then f32 mean, variance and 1/√(var + eps)),
// then zf_norm_finish from the one pointwise source.
//
// A fused region (fuse.go) compiles it again with ZF_NORM_NAME,
// ZF_NORM_EXTRA and the two ZF_NORM_STORE words defined to apply an
// epilogue to each value where this kernel would store it.
const normSource = `
#line 1 "cuda/norm.go"
/* ---- CUDA only: norms (package cuda) ---- */
#ifndef ZF_NORM_NAME
#define ZF_NORM_NAME zf_norm
#define ZF_NORM_EXTRA
#define ZF_NORM_STORE8(y, f, i, r) zf_store8(y, f, i, r)
#define ZF_NORM_STORE(y, f, i, v) zf_store(y, f, i, v)
#endif
struct zf_norm_p {
  int groups; int g; int kind; int flags;
  int fmt_x; int fmt_g; int fmt_b; int out_fmt;
  int has_g; int has_b; float eps; float offset;
};

/* The butterfly sum over the w lanes of each w-lane part of the warp (w a
 * power of two): the same additions in the same order for every lane
 * count, since a lane past a group's end holds 0 and x + 0 is x. */
static __device__ __forceinline__ double zf_warp_sum(double v, int w) {
  for (int o = w >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void ZF_NORM_NAME(uchar* __restrict__ y, const uchar* __restrict__ x,
                                   const uchar* __restrict__ gm, const uchar* __restrict__ bt,
                                   const zf_norm_p p ZF_NORM_EXTRA) {
  int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
  int lane = (int)(threadIdx.x & 31);
  int nw = (int)((gridDim.x * blockDim.x) >> 5);
  bool vec = p.g % 8 == 0; /* 8 elements a lane a step, 16-byte accesses */
  /* Lanes a group: the fewest (a power of two) whose 8 elements each
   * cover it, so a warp takes 32/w groups of up to 128 at once (per-head
   * q/k norms) instead of one with lanes idle. Each lane sums the same
   * elements in the same order as with one group a warp, and the lanes
   * that held zeros there are simply not added, so the bits are the same. */
  int w = 32;
  if (vec) {
    while (w > 1 && (w >> 1) * 8 >= p.g) w >>= 1;
  }
  int per = 32 / w;
  int sub = lane / w;
  lane = lane % w;
  int step = w * 8;
  /* The loops below are unrolled so that a lane has several 16-byte
   * loads in flight (a row of 3072 is 12 steps); the sums still take
   * the values in the same order. */
  for (int q0 = warp * per; q0 < p.groups; q0 += nw * per) {
    int q = q0 + sub;
    bool live = q < p.groups; /* every lane takes part in the shuffles */
    int base = live ? q * p.g : 0;
    int end = live ? p.g : 0;
    float mean = 0.0f;
    double acc = 0.0;
    if (vec) {
      float v[8];
      if (p.kind == 1) {
        double sum = 0.0;
        _Pragma("unroll 4") for (int j = lane * 8; j < end; j += step) {
          zf_load8(x, p.fmt_x, base + j, 1, v);
          _Pragma("unroll") for (int e = 0; e < 8; e++) sum += (double)v[e];
        }
        sum = zf_warp_sum(sum, w);
        double mu = sum / (double)p.g;
        mean = (float)mu;
        _Pragma("unroll 4") for (int j = lane * 8; j < end; j += step) {
          zf_load8(x, p.fmt_x, base + j, 1, v);
          _Pragma("unroll") for (int e = 0; e < 8; e++) {
            double d = (double)v[e] - mu;
            acc += d * d;
          }
        }
      } else {
        _Pragma("unroll 4") for (int j = lane * 8; j < end; j += step) {
          zf_load8(x, p.fmt_x, base + j, 1, v);
          _Pragma("unroll") for (int e = 0; e < 8; e++) {
            double d = (double)v[e];
            acc += d * d;
          }
        }
      }
    } else if (p.kind == 1) {
      double sum = 0.0;
      for (int j = lane; j < end; j += 32) sum += (double)zf_load(x, p.fmt_x, base + j);
      sum = zf_warp_sum(sum, 32);
      double mu = sum / (double)p.g;
      mean = (float)mu;
      for (int j = lane; j < end; j += 32) {
        double d = (double)zf_load(x, p.fmt_x, base + j) - mu;
        acc += d * d;
      }
    } else {
      for (int j = lane; j < end; j += 32) {
        double e = (double)zf_load(x, p.fmt_x, base + j);
        acc += e * e;
      }
    }
    acc = zf_warp_sum(acc, w);
    float var = (float)(acc / (double)p.g);
    float rstd = 1.0f / (float)sqrt((double)(var + p.eps));
    if (vec) {
      _Pragma("unroll 4") for (int j = lane * 8; j < end; j += step) {
        float v[8], gv[8], bv[8], r[8];
        zf_load8(x, p.fmt_x, base + j, 1, v);
        if (p.has_g != 0) zf_load8(gm, p.fmt_g, j, 1, gv);
        if (p.has_b != 0) zf_load8(bt, p.fmt_b, j, 1, bv);
        _Pragma("unroll") for (int e = 0; e < 8; e++) {
          r[e] = zf_norm_finish(v[e], mean, rstd, p.has_g != 0 ? gv[e] : 0.0f, p.has_b != 0 ? bv[e] : 0.0f,
                                p.has_g, p.has_b, p.offset, p.flags, p.out_fmt);
        }
        ZF_NORM_STORE8(y, p.out_fmt, base + j, r);
      }
      continue;
    }
    for (int j = lane; j < end; j += 32) {
      float v = zf_load(x, p.fmt_x, base + j);
      float gv = p.has_g != 0 ? zf_load(gm, p.fmt_g, j) : 0.0f;
      float bv = p.has_b != 0 ? zf_load(bt, p.fmt_b, j) : 0.0f;
      ZF_NORM_STORE(y, p.out_fmt, base + j,
                    zf_norm_finish(v, mean, rstd, gv, bv, p.has_g, p.has_b, p.offset, p.flags, p.out_fmt));
    }
  }
}
`

var normKernels = []string{"zf_norm"}

// normP is zf_norm_p.
type normP struct {
	Groups, G, Kind, Flags, FmtX, FmtG, FmtB, OutFmt, HasG, HasB int32
	Eps, Offset                                                  float32
}

// Norm normalises groups of the last axis (layer or RMS), bit-exact with
// the CPU backend's statistics and rounding points.
func (b *Backend) Norm(x, gamma, beta exec.Tensor, p exec.NormParams, s exec.Spec) (exec.Tensor, error) {
	l, err := b.normLaunch(x, gamma, beta, p, s)
	if err != nil {
		return nil, err
	}
	return b.result(l.x.shape, s.Out, func(out *Tensor) error {
		if l.np.Groups == 0 {
			return nil
		}
		return b.launch("zf_norm", l.grid, block256, 0, out.ptr(), l.x.ptr(), l.g.ptr(), l.b.ptr(), l.params())
	})
}

// normArgs is a checked norm: its inputs, parameter block and grid.
type normArgs struct {
	x, g, b *Tensor // γ and β stand in for x when absent (never read)
	np      normP
	grid    [3]uint32
}

func (l *normArgs) params() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&l.np)), unsafe.Sizeof(l.np))
}

// normLaunch checks a norm's arguments and lays out its launch.
func (b *Backend) normLaunch(x, gamma, beta exec.Tensor, p exec.NormParams, s exec.Spec) (*normArgs, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("norm: %w", err)
	}
	if err := b.refuse("norm", s, exec.RoundStats, exec.MathWelford); err != nil {
		return nil, err
	}
	if p.Kind != exec.NormLayer && p.Kind != exec.NormRMS {
		return nil, exec.Unsupported(b.Name(), "norm", "kind %v", p.Kind)
	}
	xt, err := b.get("norm", "x", x)
	if err != nil {
		return nil, err
	}
	gt, err := b.opt("norm", "gamma", gamma)
	if err != nil {
		return nil, err
	}
	bt, err := b.opt("norm", "beta", beta)
	if err != nil {
		return nil, err
	}
	if len(xt.shape) == 0 {
		return nil, fmt.Errorf("exec: norm: x is a scalar")
	}
	last := xt.shape[len(xt.shape)-1]
	g := p.Group
	if g == 0 {
		g = last
	}
	if g <= 0 || last%g != 0 {
		return nil, fmt.Errorf("exec: norm: group %d does not divide the last axis %d", p.Group, last)
	}
	for _, t := range []*Tensor{gt, bt} {
		if t != nil && t.numel() != g {
			return nil, fmt.Errorf("exec: norm: parameter %v for groups of %d", t.shape, g)
		}
	}
	if gt == nil && p.Offset != 0 {
		return nil, fmt.Errorf("exec: norm: offset %g without γ", p.Offset)
	}
	l := &normArgs{x: xt, g: xt, b: xt, np: normP{Groups: int32(xt.numel() / g), G: int32(g), Kind: int32(p.Kind), Flags: flags(s),
		FmtX: int32(xt.format), OutFmt: int32(s.Out), Eps: p.Eps, Offset: p.Offset}}
	if gt != nil {
		l.np.HasG, l.np.FmtG, l.g = 1, int32(gt.format), gt
	}
	if bt != nil {
		l.np.HasB, l.np.FmtB, l.b = 1, int32(bt.format), bt
	}
	// Warps needed: the kernel puts 32/w groups in a warp (w lanes a
	// group, the fewest powers of two whose 8 elements each cover it).
	per := 1
	if g%8 == 0 {
		for w := 32; w > 1 && (w/2)*8 >= g; w /= 2 {
			per *= 2
		}
	}
	warps := (int(l.np.Groups) + per - 1) / per
	blocks := max(1, min((warps+7)/8, b.sms*16))
	l.grid = [3]uint32{uint32(blocks), 1, 1}
	return l, nil
}
