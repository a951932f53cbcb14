//go:build linux

package cuda

import (
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"strconv"
	"unsafe"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
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
#endif
#ifndef ZF_NORM_STORE8
#define ZF_NORM_EXTRA
#define ZF_NORM_STORE8(y, f, i, r) zf_store8(y, f, i, r)
#define ZF_NORM_STORE(y, f, i, v) zf_store(y, f, i, v)
#endif
/* ZF_NORM_FIX(p) sets, in the kernel's copy of its parameter block, the
 * fields a specialised compile fixes (normFix): the same code with those
 * words constants, so their branches fold away. */
#ifndef ZF_NORM_FIX
#define ZF_NORM_FIX(p)
#endif
struct zf_norm_p {
  int groups; int g; int kind; int flags;
  int fmt_x; int fmt_g; int fmt_b; int out_fmt;
  int has_g; int has_b; float eps; float offset;
  int lanes; int pair; int wide; int pad; /* the layout (normLayout) */
};

/* The butterfly sum over the w lanes of each w-lane part of the warp (w a
 * power of two): a lane past a group's end holds 0 and x + 0 is x, so the
 * sum of a group is the same for any w that covers it. */
static __device__ __forceinline__ double zf_warp_sum(double v, int w) {
  for (int o = w >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* A group's sum: the warp's butterfly, then in the wide layout the row's
 * four warps' sums in order (every thread of the block calls it). */
static __device__ __forceinline__ double zf_group_sum(double v, int w, int wide, double* sh) {
  v = zf_warp_sum(v, w);
  if (wide != 0) {
    int wb = (int)(threadIdx.x >> 5);
    if ((threadIdx.x & 31) == 0) sh[wb] = v;
    __syncthreads();
    int f = wb & ~3;
    v = ((sh[f] + sh[f + 1]) + sh[f + 2]) + sh[f + 3];
    __syncthreads();
  }
  return v;
}

/* One 8-element chunk added to a running sum in order: Σ v (what 0),
 * Σ (v − mu)² (1) or Σ v² (2). */
static __device__ __forceinline__ double zf_chunk_sum(double s, const float* v, int what, double mu) {
  _Pragma("unroll") for (int e = 0; e < 8; e++) {
    if (what == 0) {
      s += (double)v[e];
    } else if (what == 1) {
      double d = (double)v[e] - mu;
      s += d * d;
    } else {
      double d = (double)v[e];
      s += d * d;
    }
  }
  return s;
}

/* A thread's part of a group's sum, over its chunks j0, j0 + step, ...
 * in order; in the pair layout (at most two chunks a thread, groups of
 * 128 or fewer on half the lanes) each chunk is summed from 0 and the two
 * added, which is the butterfly's first step on twice the lanes. */
static __device__ __forceinline__ double zf_part_sum(const uchar* x, int fmt, int base, int j0, int end, int step,
                                                    int pair, int what, double mu) {
  float v[8];
  if (pair != 0) {
    float u[8];
    double a = 0.0, b = 0.0;
    bool has_a = j0 < end, has_b = j0 + step < end;
    if (has_a) zf_load8(x, fmt, base + j0, 1, v);
    if (has_b) zf_load8(x, fmt, base + j0 + step, 1, u);
    if (has_a) a = zf_chunk_sum(0.0, v, what, mu);
    if (has_b) b = zf_chunk_sum(0.0, u, what, mu);
    return a + b;
  }
  double s = 0.0;
  for (int j = j0; j < end; j += step) {
    zf_load8(x, fmt, base + j, 1, v);
    s = zf_chunk_sum(s, v, what, mu);
  }
  return s;
}

/* s / g in f64. Where g is a power of two, s·2⁻ᵏ: the same real number,
 * so the same correctly rounded f64, without a division. (√ in f32,
 * __fsqrt_rn, is f32(√ in f64) exactly: a correctly rounded f64 root
 * rounded again to f32 is the correctly rounded f32 one, 53 ≥ 2·24 + 2.) */
static __device__ __forceinline__ double zf_norm_div(double s, int g) {
  if ((g & (g - 1)) == 0) {
    return s * __longlong_as_double((long long)(1023 - (31 - __clz(g))) << 52);
  }
  return s / (double)g;
}

#ifndef ZF_NORM_MINB
#define ZF_NORM_MINB 0
#endif
#if ZF_NORM_MINB > 0
#define ZF_NORM_BOUNDS __launch_bounds__(256, ZF_NORM_MINB)
#else
#define ZF_NORM_BOUNDS
#endif
extern "C" __global__ void ZF_NORM_BOUNDS ZF_NORM_NAME(uchar* __restrict__ y, const uchar* __restrict__ x,
                                   const uchar* __restrict__ gm, const uchar* __restrict__ bt,
                                   const zf_norm_p p_in ZF_NORM_EXTRA) {
  __shared__ double sh[8];
  zf_norm_p p = p_in;
  ZF_NORM_FIX(p);
  if (p.wide == 0 && p.lanes == 32) {
    /* One group a warp, the stride a constant: the layout for long rows
     * in numbers that fill the device (measured faster there than the
     * general code below with lanes = 32). */
    int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    int lane = (int)(threadIdx.x & 31);
    int nw = (int)((gridDim.x * blockDim.x) >> 5);
    bool vec = p.g % 8 == 0; /* 8 elements a lane a step, 16-byte accesses */
    for (int q = warp; q < p.groups; q += nw) {
      int base = q * p.g;
      float mean = 0.0f;
      double acc = 0.0;
      if (vec) {
        float v[8];
        if (p.kind == 1) {
          double sum = 0.0;
          for (int j = lane * 8; j < p.g; j += 256) {
            zf_load8(x, p.fmt_x, base + j, 1, v);
            _Pragma("unroll") for (int e = 0; e < 8; e++) sum += (double)v[e];
          }
          sum = zf_warp_sum(sum, 32);
          double mu = zf_norm_div(sum, p.g);
          mean = (float)mu;
          for (int j = lane * 8; j < p.g; j += 256) {
            zf_load8(x, p.fmt_x, base + j, 1, v);
            _Pragma("unroll") for (int e = 0; e < 8; e++) {
              double d = (double)v[e] - mu;
              acc += d * d;
            }
          }
        } else {
          for (int j = lane * 8; j < p.g; j += 256) {
            zf_load8(x, p.fmt_x, base + j, 1, v);
            _Pragma("unroll") for (int e = 0; e < 8; e++) {
              double d = (double)v[e];
              acc += d * d;
            }
          }
        }
      } else if (p.kind == 1) {
        double sum = 0.0;
        for (int j = lane; j < p.g; j += 32) sum += (double)zf_load(x, p.fmt_x, base + j);
        sum = zf_warp_sum(sum, 32);
        double mu = zf_norm_div(sum, p.g);
        mean = (float)mu;
        for (int j = lane; j < p.g; j += 32) {
          double d = (double)zf_load(x, p.fmt_x, base + j) - mu;
          acc += d * d;
        }
      } else {
        for (int j = lane; j < p.g; j += 32) {
          double e = (double)zf_load(x, p.fmt_x, base + j);
          acc += e * e;
        }
      }
      acc = zf_warp_sum(acc, 32);
      float var = (float)zf_norm_div(acc, p.g);
      float rstd = 1.0f / __fsqrt_rn(var + p.eps);
      if ((p.flags & ZF_R_MOMENTS) != 0) { mean = zf_round(mean, p.fmt_x); rstd = zf_round(rstd, p.fmt_x); }
      if ((p.flags & ZF_N_L2) != 0) {
        rstd = zf_l2_den(__fsqrt_rn((float)acc), p.eps, p.flags, p.out_fmt);
        mean = zf_l2_scale(__fsqrt_rn((float)p.g), p.flags, p.out_fmt);
      }
      if (vec) {
        for (int j = lane * 8; j < p.g; j += 256) {
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
      for (int j = lane; j < p.g; j += 32) {
        float v = zf_load(x, p.fmt_x, base + j);
        float gv = p.has_g != 0 ? zf_load(gm, p.fmt_g, j) : 0.0f;
        float bv = p.has_b != 0 ? zf_load(bt, p.fmt_b, j) : 0.0f;
        ZF_NORM_STORE(y, p.out_fmt, base + j,
                      zf_norm_finish(v, mean, rstd, gv, bv, p.has_g, p.has_b, p.offset, p.flags, p.out_fmt));
      }
    }
    return;
  }
  bool vec = p.g % 8 == 0; /* 8 elements a thread a step, 16-byte accesses */
  /* The layout: w threads a group, 32/w groups a warp (groups of 128 or
   * fewer, per-head q/k norms), or a group on four warps (wide rows). */
  int w = p.lanes;
  int tpg, sub, per, first, stride;
  if (p.wide != 0) {
    tpg = 128;
    per = (int)(blockDim.x / 128);
    sub = (int)(threadIdx.x / 128);
    first = (int)blockIdx.x * per;
    stride = (int)gridDim.x * per;
  } else {
    int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    tpg = w;
    per = 32 / w;
    sub = (int)(threadIdx.x & 31) / w;
    first = warp * per;
    stride = (int)((gridDim.x * blockDim.x) >> 5) * per;
  }
  int t = p.wide != 0 ? (int)(threadIdx.x % 128) : (int)(threadIdx.x & 31) % w;
  int step = tpg * 8;
  for (int q0 = first; q0 < p.groups; q0 += stride) {
    int q = q0 + sub;
    bool live = q < p.groups; /* every thread takes part in the sums */
    int base = live ? q * p.g : 0;
    int end = live ? p.g : 0;
    float mean = 0.0f;
    double acc = 0.0;
    if (vec) {
      if (p.kind == 1) {
        double sum = zf_group_sum(zf_part_sum(x, p.fmt_x, base, t * 8, end, step, p.pair, 0, 0.0), w, p.wide, sh);
        double mu = zf_norm_div(sum, p.g);
        mean = (float)mu;
        acc = zf_part_sum(x, p.fmt_x, base, t * 8, end, step, p.pair, 1, mu);
      } else {
        acc = zf_part_sum(x, p.fmt_x, base, t * 8, end, step, p.pair, 2, 0.0);
      }
    } else if (p.kind == 1) {
      double sum = 0.0;
      for (int j = t; j < end; j += 32) sum += (double)zf_load(x, p.fmt_x, base + j);
      sum = zf_warp_sum(sum, 32);
      double mu = zf_norm_div(sum, p.g);
      mean = (float)mu;
      for (int j = t; j < end; j += 32) {
        double d = (double)zf_load(x, p.fmt_x, base + j) - mu;
        acc += d * d;
      }
    } else {
      for (int j = t; j < end; j += 32) {
        double e = (double)zf_load(x, p.fmt_x, base + j);
        acc += e * e;
      }
    }
    acc = zf_group_sum(acc, w, p.wide, sh);
    float var = (float)zf_norm_div(acc, p.g);
    float rstd = 1.0f / __fsqrt_rn(var + p.eps);
    if ((p.flags & ZF_R_MOMENTS) != 0) { mean = zf_round(mean, p.fmt_x); rstd = zf_round(rstd, p.fmt_x); }
    if ((p.flags & ZF_N_L2) != 0) {
      rstd = zf_l2_den(__fsqrt_rn((float)acc), p.eps, p.flags, p.out_fmt);
      mean = zf_l2_scale(__fsqrt_rn((float)p.g), p.flags, p.out_fmt);
    }
    if (vec) {
      for (int j = t * 8; j < end; j += step) {
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
    for (int j = t; j < end; j += 32) {
      float v = zf_load(x, p.fmt_x, base + j);
      float gv = p.has_g != 0 ? zf_load(gm, p.fmt_g, j) : 0.0f;
      float bv = p.has_b != 0 ? zf_load(bt, p.fmt_b, j) : 0.0f;
      ZF_NORM_STORE(y, p.out_fmt, base + j,
                    zf_norm_finish(v, mean, rstd, gv, bv, p.has_g, p.has_b, p.offset, p.flags, p.out_fmt));
    }
  }
}
`

var normKernels = []string{"zf_norm", "zf_norm_welford"}

// normMinBlocks is the blocks of 256 threads the norm kernel (and every
// fused norm region's) is compiled to fit on one multiprocessor
// (__launch_bounds__; 0: the compiler's choice): 4 caps it at 64
// registers, so the 512 blocks of a 4096-row norm are one wave on an
// H200 where 3 (72–90 registers) made two. ZFLOW_NORM_MINB overrides it
// (A/B runs). The arithmetic does not depend on it.
var normMinBlocks = func() int {
	if v, err := strconv.Atoi(os.Getenv("ZFLOW_NORM_MINB")); err == nil && v >= 0 && v <= 8 {
		return v
	}
	return 4
}()

// normDefs is normSource's configuration, prepended where it is compiled.
func normDefs() string { return fmt.Sprintf("\n#define ZF_NORM_MINB %d\n", normMinBlocks) }

// normP is zf_norm_p.
type normP struct {
	Groups, G, Kind, Flags, FmtX, FmtG, FmtB, OutFmt, HasG, HasB int32
	Eps, Offset                                                  float32
	Lanes, Pair, Wide, Pad                                       int32
}

// Norm normalises groups of the last axis (layer or RMS), bit-exact with
// the CPU backend's statistics and rounding points.
func (b *Backend) Norm(x, gamma, beta exec.Tensor, p exec.NormParams, s exec.Spec) (exec.Tensor, error) {
	if s.Math&exec.MathWelford != 0 {
		// PyTorch's layer-norm kernel's reduction (norm_welford.go): the
		// arguments checked as for any norm, then its own kernel.
		if p.Kind != exec.NormLayer {
			return nil, exec.Unsupported(b.Name(), "norm", "%v on a %v norm (a layer-norm kernel's arithmetic)", s, p.Kind)
		}
		l, err := b.normLaunch(x, gamma, beta, p, exec.Spec{Out: s.Out, Round: s.Round, Math: s.Math &^ exec.MathWelford})
		if err != nil {
			return nil, err
		}
		return b.normWelford(l, s.Out)
	}
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
	fl, err := kernels.NormFlags(b.Name(), p, s)
	if err != nil {
		return nil, err
	}
	l := &normArgs{x: xt, g: xt, b: xt, np: normP{Groups: int32(xt.numel() / g), G: int32(g), Kind: int32(p.Kind), Flags: fl | flags(s),
		FmtX: int32(xt.format), OutFmt: int32(s.Out), Eps: p.Eps, Offset: p.Offset}}
	if gt != nil {
		l.np.HasG, l.np.FmtG, l.g = 1, int32(gt.format), gt
	}
	if bt != nil {
		l.np.HasB, l.np.FmtB, l.b = 1, int32(bt.format), bt
	}
	blocks := b.normLayout(&l.np)
	l.grid = [3]uint32{uint32(blocks), 1, 1}
	return l, nil
}

// normLayout sets how the kernel spreads groups over threads (the same
// sums in the same order but for the wide layout's four warps, see
// normSource) and returns the blocks of 256 threads to launch.
//
//   - groups of up to 128 (a multiple of 8): w lanes a group, the fewest
//     powers of two whose 8 elements each cover it, then half those lanes
//     with two chunks each (pair), 64/w groups a warp;
//   - rows of 2048 or more (a multiple of 8), fewer than 16 a multiprocessor,
//     on four warps each, two rows a block (wide): a row of one warp has
//     too little in flight when there are few rows;
//   - else one group a warp.
func (b *Backend) normLayout(np *normP) int {
	g := int(np.G)
	np.Lanes, np.Pair, np.Wide = 32, 0, 0
	if g%8 == 0 {
		for np.Lanes > 1 && int(np.Lanes/2)*8 >= g {
			np.Lanes /= 2
		}
		if np.Lanes >= 2 && np.Lanes <= 16 {
			np.Lanes /= 2
			np.Pair = 1
		}
		// Wide only where a warp a row would leave the device short of
		// warps: on the H200 it took a 512-row layer norm from 0.022 to
		// 0.012 ms but a 4096-row one from 0.032 to 0.050.
		if g >= 2048 && int(np.Groups) < b.sms*16 {
			np.Wide = 1
		}
	}
	groups := int(np.Groups)
	if np.Wide != 0 {
		return max(1, min((groups+1)/2, b.sms*16))
	}
	per := 32 / int(np.Lanes)
	warps := (groups + per - 1) / per
	return max(1, min((warps+7)/8, b.sms*16))
}

// normFix is the ZF_NORM_FIX of a norm specialised to np's words (all
// but the groups' count and eps) and the suffix naming that compile: a
// fused region's norms are compiled so (normFused, joinSplit, runJoin),
// the same source with those words constants. The plain zf_norm (the
// unfused route, Norm) reads them at run time; the fusion tests check
// the two bit for bit.
func normFix(np normP) (fix, suffix string) {
	fix = fmt.Sprintf("p.g = %d; p.kind = %d; p.flags = %d; p.fmt_x = %d; p.fmt_g = %d; p.fmt_b = %d; p.out_fmt = %d; "+
		"p.has_g = %d; p.has_b = %d; p.offset = __uint_as_float(0x%08Xu); p.lanes = %d; p.pair = %d; p.wide = %d;",
		np.G, np.Kind, np.Flags, np.FmtX, np.FmtG, np.FmtB, np.OutFmt, np.HasG, np.HasB, math.Float32bits(np.Offset), np.Lanes, np.Pair, np.Wide)
	h := fnv.New32a()
	h.Write([]byte(fix))
	return fix, fmt.Sprintf("_n%08x", h.Sum32())
}

// normFixDefs is the configuration that compiles normSource as name,
// specialised by fix.
func normFixDefs(name, fix string) string {
	return fmt.Sprintf("\n#define ZF_NORM_NAME %s\n#define ZF_NORM_FIX(p) do { %s } while (0)\n", name, fix)
}

// specNorm is the plain norm specialised to l's words (normFix), compiled
// on first use; it returns the kernel's name.
func (b *Backend) specNorm(l *normArgs) (string, error) {
	fix, suffix := normFix(l.np)
	name := "zf_norm" + suffix
	if _, ok := b.fns[name]; ok {
		return name, nil
	}
	src, err := specNormSource(name, fix)
	if err != nil {
		return "", err
	}
	if err := b.loadModule("zflow_"+name, src, []string{"--fmad=false"}, []string{name}); err != nil {
		return "", err
	}
	return name, nil
}

// specNormSource is the plain norm kernel specialised by fix, as name:
// the pointwise functions (not their kernels) and normSource.
func specNormSource(name, fix string) (string, error) {
	src, err := kernels.RenderEpilogues(kernels.CUDA)
	if err != nil {
		return "", err
	}
	return src + normFixDefs(name, fix) + normDefs() + normSource, nil
}
