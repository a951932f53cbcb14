//go:build linux

package cuda

import (
	"unsafe"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// welfordSource is the layer norm of exec.MathWelford: the statistics as
// PyTorch's vectorised CUDA layer-norm kernel reduces them
// (layer_norm_kernel.cu, compute_stats), which exec.WelfordMoments
// restates on the CPU. A block of 4 warps takes one group: thread t adds
// the elements of the 4-element vectors t, t + 128, ... by Welford's
// update with a fused multiply-add, each warp combines its lanes by a
// shuffle-down tree, the four warps' results combine pairwise, and the
// variance is s/N. Every operation is written as its intrinsic, so the
// order and the roundings are the ones named, not the compiler's. The
// finish is exec/cpu's: rstd = 1/√(var + eps) in f64 rounded once, and
// with γ and β (and no RoundProduct) γ·x̂ + β as one fma.
const welfordSource = `
#line 1 "cuda/norm_welford.go"
/* ---- CUDA only: the Welford layer norm (package cuda) ---- */
struct zf_welford_p {
  int groups; int g; int flags; int fmt_x; int fmt_g; int fmt_b; int out_fmt;
  int has_g; int has_b; float eps; float offset; int pad;
};
struct zf_wf { float mean; float s2; float count; };

/* One element added: d = x − m, m' = fma(d, 1/n, m), s' = fma(d, x − m', s). */
static __device__ __forceinline__ zf_wf zf_wf_add(zf_wf w, float v) {
  float d = __fsub_rn(v, w.mean);
  float n = __fadd_rn(w.count, 1.0f);
  float m = __fmaf_rn(d, __fdiv_rn(1.0f, n), w.mean);
  zf_wf r;
  r.mean = m;
  r.s2 = __fmaf_rn(d, __fsub_rn(v, m), w.s2);
  r.count = n;
  return r;
}

/* PyTorch's WelfordOps::combine(b, a) for the layer-norm kernel (a the
 * value shuffled in): counts added, means weighted by count/total. */
static __device__ __forceinline__ zf_wf zf_wf_combine(zf_wf b, zf_wf a) {
  zf_wf r;
  float count = __fadd_rn(a.count, b.count);
  if (!(count > 0.0f)) {
    r.mean = 0.0f;
    r.s2 = 0.0f;
    r.count = 0.0f;
    return r;
  }
  float delta = __fsub_rn(b.mean, a.mean);
  float coef = __fdiv_rn(1.0f, count);
  float na = __fmul_rn(a.count, coef), nb = __fmul_rn(b.count, coef);
  r.mean = __fmaf_rn(na, a.mean, __fmul_rn(nb, b.mean));
  float t = __fmul_rn(__fmul_rn(delta, delta), a.count);
  r.s2 = __fmaf_rn(t, nb, __fadd_rn(a.s2, b.s2));
  r.count = count;
  return r;
}

extern "C" __global__ void __launch_bounds__(128) zf_norm_welford(uchar* __restrict__ y, const uchar* __restrict__ x,
                                                                  const uchar* __restrict__ gm,
                                                                  const uchar* __restrict__ bt,
                                                                  const zf_welford_p p) {
  __shared__ zf_wf lead[4];
  __shared__ float stats[2];
  int t = (int)threadIdx.x;
  int nvec = p.g / 4; /* elements after the last whole vector are not read */
  for (int q = (int)blockIdx.x; q < p.groups; q += (int)gridDim.x) {
    int base = q * p.g;
    zf_wf w;
    w.mean = 0.0f;
    w.s2 = 0.0f;
    w.count = 0.0f;
    for (int i = t; i < nvec; i += 128) {
      _Pragma("unroll") for (int e = 0; e < 4; e++) w = zf_wf_add(w, zf_load(x, p.fmt_x, base + i * 4 + e));
    }
    /* A shuffle from past the warp returns the lane's own value. */
    for (int off = 16; off > 0; off >>= 1) {
      zf_wf o;
      o.mean = __shfl_down_sync(0xffffffffu, w.mean, off);
      o.s2 = __shfl_down_sync(0xffffffffu, w.s2, off);
      o.count = __shfl_down_sync(0xffffffffu, w.count, off);
      w = zf_wf_combine(w, o);
    }
    if ((t & 31) == 0) lead[t >> 5] = w;
    __syncthreads();
    if (t == 0) {
      zf_wf a = zf_wf_combine(lead[0], lead[2]);
      zf_wf b = zf_wf_combine(lead[1], lead[3]);
      a = zf_wf_combine(a, b);
      float var = __fdiv_rn(a.s2, (float)p.g);
      stats[0] = a.mean;
      stats[1] = (float)(1.0 / sqrt((double)__fadd_rn(var, p.eps)));
    }
    __syncthreads();
    float mean = stats[0], rstd = stats[1];
    bool fused = p.has_g != 0 && p.has_b != 0 && (p.flags & ZF_R_PRODUCT) == 0;
    for (int j = t; j < p.g; j += 128) {
      float v = zf_load(x, p.fmt_x, base + j);
      float gv = p.has_g != 0 ? zf_load(gm, p.fmt_g, j) : 0.0f;
      float bv = p.has_b != 0 ? zf_load(bt, p.fmt_b, j) : 0.0f;
      float r;
      if (fused) {
        float n = zf_at(p.flags & ZF_R_NORMALIZED, p.out_fmt, __fmul_rn(__fsub_rn(v, mean), rstd));
        float sc = p.offset != 0.0f ? zf_at(p.flags & ZF_R_SCALE, p.out_fmt, __fadd_rn(gv, p.offset)) : gv;
        r = __fmaf_rn(sc, n, bv);
      } else {
        r = zf_norm_finish(v, mean, rstd, gv, bv, p.has_g, p.has_b, p.offset, p.flags, p.out_fmt);
      }
      zf_store(y, p.out_fmt, base + j, r);
    }
    __syncthreads(); /* lead and stats are written again for the next group */
  }
}
`

// welfordP is zf_welford_p.
type welfordP struct {
	Groups, G, Flags, FmtX, FmtG, FmtB, OutFmt, HasG, HasB int32
	Eps, Offset                                            float32
	Pad                                                    int32
}

var block128 = [3]uint32{128, 1, 1}

// normWelford runs a checked MathWelford layer norm: one block of 128
// threads a group, at most 16 blocks a multiprocessor's worth at once.
func (b *Backend) normWelford(l *normArgs, out precision.Format) (exec.Tensor, error) {
	np := l.np
	wp := welfordP{Groups: np.Groups, G: np.G, Flags: np.Flags, FmtX: np.FmtX, FmtG: np.FmtG, FmtB: np.FmtB,
		OutFmt: np.OutFmt, HasG: np.HasG, HasB: np.HasB, Eps: np.Eps, Offset: np.Offset}
	grid := [3]uint32{uint32(max(1, min(int(np.Groups), b.sms*16))), 1, 1}
	params := unsafe.Slice((*byte)(unsafe.Pointer(&wp)), unsafe.Sizeof(wp))
	return b.result(l.x.shape, out, func(y *Tensor) error {
		if np.Groups == 0 {
			return nil
		}
		return b.launch("zf_norm_welford", grid, block128, 0, y.ptr(), l.x.ptr(), l.g.ptr(), l.b.ptr(), params)
	})
}
