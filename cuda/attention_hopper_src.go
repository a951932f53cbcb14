//go:build linux

package cuda

import (
	"fmt"
	"strings"
)

// wgmmaSource renders the warpgroup MMA wrappers the Hopper kernel uses:
// zf_wg_ss<N> (A and B from shared memory through descriptors) and
// zf_wg_rs<N> (A from registers, B through a descriptor, transposed: an
// MN-major B), m64nNk16 with f32 accumulators, for N = 64, 128 and 176, the
// input type ZF_WT (".bf16.bf16" or ".f16.f16"); and zf_wg_keep<R>, which
// pins R accumulator registers in place around the asynchronous MMAs (the
// compiler must not move them while the tensor cores own them).
func wgmmaSource() string {
	var b strings.Builder
	for _, n := range []int{64, 128, 176} {
		r := n / 2
		regs := make([]string, r)
		outs := make([]string, r)
		for i := range r {
			regs[i] = fmt.Sprintf("%%%d", i)
			outs[i] = fmt.Sprintf(`"+f"(d[%d])`, i)
		}
		fmt.Fprintf(&b, `static __device__ __forceinline__ void zf_wg_ss%d(float* d, unsigned long long da, unsigned long long db, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %%%d, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n%dk16.f32" ZF_WT " {%s}, %%%d, %%%d, p, 1, 1, 0, 0;\n}\n"
               : %s
               : "l"(da), "l"(db), "r"(acc));
}
`, n, r+2, n, strings.Join(regs, ", "), r, r+1, strings.Join(outs, ", "))
		fmt.Fprintf(&b, `static __device__ __forceinline__ void zf_wg_rs%d(float* d, const unsigned int* a, unsigned long long db, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %%%d, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n%dk16.f32" ZF_WT " {%s}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, 1;\n}\n"
               : %s
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
`, n, r+5, n, strings.Join(regs, ", "), r, r+1, r+2, r+3, r+4, strings.Join(outs, ", "))
		fmt.Fprintf(&b, `static __device__ __forceinline__ void zf_wg_keep%d(float* d) {
#pragma unroll
  for (int i = 0; i < %d; i++) asm volatile("" : "+f"(d[i]) :: "memory");
}
`, r, r)
	}
	return b.String()
}

// hopperSource is the Hopper (sm_90a) flash-attention kernel,
// FlashAttention-3 style: a block of ZF_WG warpgroups takes 64·ZF_WG query
// rows of one (batch, head) and walks the keys in tiles of ZF_HBC rows.
// Q, K and V tiles are copied to shared memory by cp.async in the 128-byte
// swizzled layout the tensor cores read (each tile as ZF_D/64 column
// blocks of 64 elements, rows of 128 bytes, the 16-byte chunks of row r
// XORed with r mod 8), K and V each ZF_ST stages deep. Each warpgroup
// computes S = Q·Kᵀ with wgmma (Q and K through shared-memory descriptors,
// both K-major) and O += P·V with wgmma (P from registers, V through a
// descriptor as an MN-major operand, so V is never transposed in memory).
// Step s issues S for tile s and P·V for tile s−1 together and runs tile
// s's softmax while P·V is still on the tensor cores. The softmax and the
// score chain (scale, soft-cap, ALiBi, bias, score rounding, masks) are
// the mma.sync kernel's, element for element: online in f32 with exp2, P
// rounded to the input format before ·V, O multiplied by the reciprocal
// of the f32 row sum at the end. Compile-time switches as flashSource's, plus ZF_WG, ZF_HBC, ZF_ST,
// and ZF_WS, ZF_PP for the warp-specialised kernel (hopperWSKernel).
const hopperSource = `
#line 1 "cuda/attention_hopper_src.go"
/* ---- CUDA only: Hopper flash attention (package cuda) ---- */
#ifndef ZF_D
#define ZF_D 128
#endif
#ifndef ZF_HALF_IN
#define ZF_HALF_IN 0 /* 1: f16 inputs, 0: bf16 */
#endif
#ifndef ZF_MASK
#define ZF_MASK 0  /* 0 none, 1 causal, 2 explicit */
#endif
#ifndef ZF_ROUND
#define ZF_ROUND 0
#endif
#ifndef ZF_CAP
#define ZF_CAP 0
#endif
#ifndef ZF_ALIBI
#define ZF_ALIBI 0
#endif
#ifndef ZF_BIAS
#define ZF_BIAS 0
#endif
#ifndef ZF_WG
#define ZF_WG 2 /* consumer warpgroups: 64 query rows each */
#endif
#ifndef ZF_HBC
#define ZF_HBC 128 /* keys per tile: 64, 128 or 176 */
#endif
#ifndef ZF_ST
#define ZF_ST 2 /* shared-memory stages of K and of V */
#endif
#ifndef ZF_WS
#define ZF_WS 0 /* 1: a TMA producer warpgroup feeds the consumers (zf_flash_ws) */
#endif
#ifndef ZF_PP
#define ZF_PP 0 /* 1: the two consumer warpgroups take turns at the tensor cores */
#endif
#if ZF_PP && (ZF_WG != 2 || !ZF_WS)
#error "ZF_PP needs two consumer warpgroups and the producer"
#endif
#if ZF_HALF_IN
#define ZF_WT ".f16.f16"
#else
#define ZF_WT ".bf16.bf16"
#endif
#define ZF_BM (64 * ZF_WG)
#define ZF_NT (128 * ZF_WG)
#define ZF_QBYTES (ZF_BM * ZF_D * 2)
#define ZF_KBYTES (ZF_HBC * ZF_D * 2)
#define ZF_PLAIN (ZF_CAP == 0 && ZF_ALIBI == 0 && ZF_BIAS == 0 && ZF_ROUND == 0)
`

// hopperHelpers are the Hopper kernels' device helpers: wgmma
// descriptors, the swizzle, cp.async, mbarriers, the bulk tensor copy
// and named barriers.
const hopperHelpers = `#line 1 "cuda/attention_hopper_src.go (kernel)"
/* A wgmma shared-memory descriptor: start address, leading and stride
   byte offsets, 128-byte swizzle. */
static __device__ __forceinline__ unsigned long long zf_desc(unsigned int addr, unsigned int lbo, unsigned int sbo) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

/* Byte offset of 16-byte chunk ch (0..ZF_D/8−1) of row r in a tile of rows rows. */
static __device__ __forceinline__ unsigned int zf_swz(int r, int ch, int rows) {
  return (unsigned int)((ch >> 3) * rows * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
}

static __device__ __forceinline__ void zf_cps(unsigned int dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}

template <int N>
static __device__ __forceinline__ void zf_cp_waitn() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

static __device__ __forceinline__ void zf_wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
static __device__ __forceinline__ void zf_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void zf_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

/* Loads rows [r0, r0+rows) of a [.., ZF_D] slab with row stride rs into a
   swizzled tile at dst, rows past lim as zeros. */
static __device__ __forceinline__ void zf_load_tile(unsigned int dst, const ushort* src, int rs, int r0, int rows, int lim, int tid) {
  for (int idx = tid; idx < rows * (ZF_D / 8); idx += ZF_NT) {
    int r = idx / (ZF_D / 8), ch = idx % (ZF_D / 8);
    bool ok = r0 + r < lim;
    zf_cps(dst + zf_swz(r, ch, rows), src + (size_t)(ok ? r0 + r : 0) * rs + ch * 8, ok ? 16 : 0);
  }
}


/* mbarriers and the bulk tensor copy (TMA). */
static __device__ __forceinline__ void zf_mbar_init(unsigned int bar, unsigned int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
static __device__ __forceinline__ void zf_mbar_expect(unsigned int bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void zf_mbar_arrive(unsigned int bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" :: "r"(bar) : "memory");
}
/* Waits until the phase of parity ph has completed (a fresh barrier
   counts its phase of parity 1 as completed). */
static __device__ __forceinline__ void zf_mbar_wait(unsigned int bar, unsigned int ph) {
  asm volatile("{\n.reg .pred P1;\nZF_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1 bra ZF_DONE;\nbra ZF_WAIT;\nZF_DONE:\n}\n" :: "r"(bar), "r"(ph) : "memory");
}
/* The CUtensorMap the host encodes (cuTensorMapEncodeTiled). */
struct __align__(64) zf_tmap { unsigned long long v[16]; };
static __device__ __forceinline__ void zf_tma3(unsigned int dst, const zf_tmap* map, int c0, int c1, int c2, unsigned int bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
               :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}
/* Named barriers 1 and 2: the consumer warpgroups' turns (ZF_PP). */
static __device__ __forceinline__ void zf_bar_sync(int id) { asm volatile("bar.sync %0, 256;" :: "r"(id) : "memory"); }
static __device__ __forceinline__ void zf_bar_arrive(int id) { asm volatile("bar.arrive %0, 256;" :: "r"(id) : "memory"); }

`

// hopperRegs declares a consumer warpgroup's registers: O, S, P and the
// running maxima and sums.
const hopperRegs = `
  float o[ZF_D / 2];
  float sc[ZF_HBC / 2];
  unsigned int pr[ZF_HBC / 16][4];
#pragma unroll
  for (int i = 0; i < ZF_D / 2; i++) o[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < ZF_HBC / 2; i++) sc[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < ZF_HBC / 16; i++) { pr[i][0] = 0u; pr[i][1] = 0u; pr[i][2] = 0u; pr[i][3] = 0u; }
  /* Running maxima in log2 units, sums of the weights (this thread's part). */
  float m0 = ninf, m1 = ninf, l0 = 0.0f, l1 = 0.0f;

`

// hopperSteps are a consumer warpgroup's steps as lambdas, one text both
// Hopper kernels compile, so that their score chain and softmax cannot
// differ: S = Q·Kᵀ of a tile, O += P·V, the score chain, masks and online
// softmax, the rescale of O and the packing of P.
const hopperSteps = `
  auto keep_s = [&]() {
#if ZF_HBC == 176
    zf_wg_keep88(sc);
#elif ZF_HBC == 128
    zf_wg_keep64(sc);
#else
    zf_wg_keep32(sc);
#endif
  };
  auto keep_o = [&]() {
#if ZF_D == 128
    zf_wg_keep64(o);
#else
    zf_wg_keep32(o);
#endif
  };
  /* S = Q·Kᵀ for tile s (one commit group). */
  auto mma_s = [&](int s) {
    const unsigned int kb = sK + (s % ZF_ST) * ZF_KBYTES;
#pragma unroll
    for (int kk = 0; kk < ZF_D / 16; kk++) {
      unsigned long long da = zf_desc(sQ + (kk >> 2) * ZF_BM * 128 + wg * 64 * 128 + (kk & 3) * 32, 16, 1024);
      unsigned long long db = zf_desc(kb + (kk >> 2) * ZF_HBC * 128 + (kk & 3) * 32, 16, 1024);
#if ZF_HBC == 176
      zf_wg_ss176(sc, da, db, kk > 0);
#elif ZF_HBC == 128
      zf_wg_ss128(sc, da, db, kk > 0);
#else
      zf_wg_ss64(sc, da, db, kk > 0);
#endif
    }
    zf_wg_commit();
  };
  /* O += P·V for tile s−1 (one commit group). */
  auto mma_pv = [&](int s) {
    const unsigned int vb = sV + ((s - 1) % ZF_ST) * ZF_KBYTES;
#pragma unroll
    for (int kk = 0; kk < ZF_HBC / 16; kk++) {
      unsigned long long db = zf_desc(vb + kk * 16 * 128, ZF_HBC * 128, 1024);
#if ZF_D == 128
      zf_wg_rs128(o, pr[kk], db, 1);
#else
      zf_wg_rs64(o, pr[kk], db, 1);
#endif
    }
    zf_wg_commit();
  };
  float corr0 = 1.0f, corr1 = 1.0f;
  /* The score chain, masks and online softmax of tile s: sc becomes the
     unnormalised weights, corr the factor for O. The scores stay in their
     own units (raw, or after the chain) and reach log2 units only inside
     the exponent, one fma a weight: 2^(x·f − m), f = scale·log2 e where
     the chain is the scale alone (that needs scale > 0: launchHopper sends
     other scales to the mma.sync kernel), else log2 e; m is the running
     maximum of x·f. */
  const float fl2 = ZF_PLAIN ? sl2 : log2e;
  auto softmax = [&](int s) {
    const int k0 = (t0 + s) * ZF_HBC;
    bool need = k0 + ZF_HBC > p.sk;
    if (ZF_MASK == 1) need = need || k0 + ZF_HBC - 1 > rlo || (p.window > 0 && k0 <= rhi - p.window);
    if (ZF_MASK == 2) need = true;
    float mx0 = ninf, mx1 = ninf;
#pragma unroll
    for (int nn = 0; nn < ZF_HBC / 8; nn++) {
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int j = k0 + nn * 8 + c2 + e;
        float x0 = sc[4 * nn + e], x1 = sc[4 * nn + 2 + e];
        if (!ZF_PLAIN) {
          x0 *= p.scale;
          x1 *= p.scale;
          if (ZF_CAP != 0) {
            x0 = p.cap * zf_tanh(x0 / p.cap, 0);
            x1 = p.cap * zf_tanh(x1 / p.cap, 0);
          }
          if (ZF_ALIBI != 0) {
            float ab = zf_round(slope * (float)j, ZF_HALF_IN ? ZF_F16 : ZF_BF16);
            x0 += ab;
            x1 += ab;
          }
          if (ZF_BIAS != 0 && j < p.sk) {
            int bo = bb * p.b_sb + head * p.b_sh + j * p.b_sj;
            if (r0 < p.sq) x0 += zf_load(bias, p.fmt_b, bo + r0 * p.b_si);
            if (r1 < p.sq) x1 += zf_load(bias, p.fmt_b, bo + r1 * p.b_si);
          }
          if (ZF_ROUND != 0) { x0 = zf_round(x0, p.out_fmt); x1 = zf_round(x1, p.out_fmt); }
        }
        if (need) {
          bool ok0 = j < p.sk, ok1 = j < p.sk;
          if (ZF_MASK == 1) {
            ok0 = ok0 && j <= r0 && (p.window == 0 || j > r0 - p.window);
            ok1 = ok1 && j <= r1 && (p.window == 0 || j > r1 - p.window);
          } else if (ZF_MASK == 2) {
            ok0 = ok0 && r0 < p.sq && zf_load(mask, p.fmt_m, bb * p.m_sb + r0 * p.m_si + j * p.m_sj) != 0.0f;
            ok1 = ok1 && r1 < p.sq && zf_load(mask, p.fmt_m, bb * p.m_sb + r1 * p.m_si + j * p.m_sj) != 0.0f;
          }
          x0 = ok0 ? x0 : ninf;
          x1 = ok1 ? x1 : ninf;
        }
        sc[4 * nn + e] = x0;
        sc[4 * nn + 2 + e] = x1;
        mx0 = fmaxf(mx0, x0);
        mx1 = fmaxf(mx1, x1);
      }
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    /* To log2 units: the factor is positive, so the rounded product of the
       maximum is the maximum of the rounded products. */
    mx0 *= fl2;
    mx1 *= fl2;
    float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    float base0 = mn0 == ninf ? 0.0f : mn0, base1 = mn1 == ninf ? 0.0f : mn1;
    corr0 = zf_ex2(m0 - base0);
    corr1 = zf_ex2(m1 - base1);
    m0 = mn0;
    m1 = mn1;
    l0 *= corr0;
    l1 *= corr1;
#pragma unroll
    for (int nn = 0; nn < ZF_HBC / 8; nn++) {
      sc[4 * nn + 0] = zf_ex2(fmaf(sc[4 * nn + 0], fl2, -base0));
      sc[4 * nn + 1] = zf_ex2(fmaf(sc[4 * nn + 1], fl2, -base0));
      sc[4 * nn + 2] = zf_ex2(fmaf(sc[4 * nn + 2], fl2, -base1));
      sc[4 * nn + 3] = zf_ex2(fmaf(sc[4 * nn + 3], fl2, -base1));
      l0 += sc[4 * nn + 0] + sc[4 * nn + 1];
      l1 += sc[4 * nn + 2] + sc[4 * nn + 3];
    }
  };
  /* O to the last softmax's maximum: between the issue of the next Q·Kᵀ
     and that of P·V, while the tensor cores work (O is not theirs then;
     a wgmma.fence follows before P·V reads it). */
  auto rescale_o = [&]() {
#pragma unroll
    for (int d = 0; d < ZF_D / 8; d++) {
      o[4 * d + 0] *= corr0;
      o[4 * d + 1] *= corr0;
      o[4 * d + 2] *= corr1;
      o[4 * d + 3] *= corr1;
    }
  };
  /* P (the weights in the input format) to registers. */
  auto pack_p = [&]() {
#pragma unroll
    for (int j2 = 0; j2 < ZF_HBC / 16; j2++) {
      pr[j2][0] = zf_pack2<F16>(sc[8 * j2 + 0], sc[8 * j2 + 1]);
      pr[j2][1] = zf_pack2<F16>(sc[8 * j2 + 2], sc[8 * j2 + 3]);
      pr[j2][2] = zf_pack2<F16>(sc[8 * j2 + 4], sc[8 * j2 + 5]);
      pr[j2][3] = zf_pack2<F16>(sc[8 * j2 + 6], sc[8 * j2 + 7]);
    }
  };

`

// hopperStore divides O by the row sums (a multiply by the reciprocal) and
// stores it.
const hopperStore = `
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  /* One division a row, then multiplies; 2-byte outputs (rounded as
     zf_store rounds) two to a 4-byte store: col is even, and so is the
     row stride. Not with tiles of 176 keys: there the pairs cost the
     registers they lack (ptxas, NVRTC 12.4: 20 bytes of spills with an
     explicit mask), and every element is stored alone. */
  const float il0 = 1.0f / l0, il1 = 1.0f / l1;
  const int ow = p.q_rs;
  const bool two = ZF_HBC != 176 && (p.out_fmt == ZF_BF16 || p.out_fmt == ZF_F16);
#pragma unroll
  for (int d = 0; d < ZF_D / 8; d++) {
    int col = head * ZF_D + d * 8 + c2;
    const float a0 = o[4 * d + 0] * il0, a1 = o[4 * d + 1] * il0, b0 = o[4 * d + 2] * il1, b1 = o[4 * d + 3] * il1;
    if (two) {
      const bool bf = p.out_fmt == ZF_BF16;
      const unsigned int ua = bf ? zf_pack_bf16(a0, a1) : zf_f32_to_f16(a0) | (zf_f32_to_f16(a1) << 16);
      const unsigned int ub = bf ? zf_pack_bf16(b0, b1) : zf_f32_to_f16(b0) | (zf_f32_to_f16(b1) << 16);
      if (r0 < p.sq) *(unsigned int*)((ushort*)y + (size_t)(bb * p.sq + r0) * ow + col) = ua;
      if (r1 < p.sq) *(unsigned int*)((ushort*)y + (size_t)(bb * p.sq + r1) * ow + col) = ub;
      continue;
    }
    if (r0 < p.sq) {
      int off = (bb * p.sq + r0) * ow + col;
      zf_store(y, p.out_fmt, off, a0);
      zf_store(y, p.out_fmt, off + 1, a1);
    }
    if (r1 < p.sq) {
      int off = (bb * p.sq + r1) * ow + col;
      zf_store(y, p.out_fmt, off, b0);
      zf_store(y, p.out_fmt, off + 1, b1);
    }
  }
`

// hopperCPKernel is the cp.async kernel: every thread copies, a
// __syncthreads a tile.
const hopperCPKernel = `
extern "C" __global__ void __launch_bounds__(ZF_NT, 1) zf_flash_wg(uchar* __restrict__ y, const ushort* __restrict__ q,
    const ushort* __restrict__ k, const ushort* __restrict__ v, const uchar* __restrict__ mask,
    const uchar* __restrict__ bias, const float* __restrict__ slopes, const zf_flash_p p) {
  extern __shared__ zf_u4 zf_sh[];
  constexpr bool F16 = ZF_HALF_IN != 0;
  const unsigned int sbase = (zf_smem(zf_sh) + 1023u) & ~1023u;
  const unsigned int sQ = sbase, sK = sbase + ZF_QBYTES, sV = sK + ZF_ST * ZF_KBYTES;
  const float ninf = __int_as_float(0xff800000);
  const float log2e = 1.4426950408889634f;
  const int tid = (int)threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int head = (int)blockIdx.y % p.h, bb = (int)blockIdx.y / p.h;
  const int kvh = head / (p.h / p.kv);
  /* The longest blocks (the last rows, under a causal mask) start first. */
  const int qbase = ((int)gridDim.x - 1 - (int)blockIdx.x) * ZF_BM;
  const int rlo = qbase + wg * 64, rhi = rlo + 63;
  const int r0 = rlo + warp * 16 + (lane >> 2), r1 = r0 + 8;
  const int c2 = (lane & 3) * 2;
  const ushort* qp = q + (size_t)bb * p.sq * p.q_rs + (size_t)head * ZF_D;
  const ushort* kp = k + (size_t)bb * p.sk * p.k_rs + (size_t)kvh * ZF_D;
  const ushort* vp = v + (size_t)bb * p.sk * p.k_rs + (size_t)kvh * ZF_D;

  int kend = p.sk;
  if (ZF_MASK == 1) kend = min(p.sk, qbase + ZF_BM);
  const int ntiles = (kend + ZF_HBC - 1) / ZF_HBC;
  const int t0 = (ZF_MASK == 1 && p.window > 0) ? max(0, qbase - p.window + 1) / ZF_HBC : 0;
  const int n = max(0, ntiles - t0);
  const float slope = ZF_ALIBI ? slopes[head] : 0.0f;
  const float sl2 = p.scale * log2e;

  /* Group s of copies: K of tile s (s < n) and V of tile s−1 (s ≥ 1). */
  auto issue = [&](int s) {
    if (s < n) zf_load_tile(sK + (s % ZF_ST) * ZF_KBYTES, kp, p.k_rs, (t0 + s) * ZF_HBC, ZF_HBC, p.sk, tid);
    if (s >= 1 && s <= n) zf_load_tile(sV + ((s - 1) % ZF_ST) * ZF_KBYTES, vp, p.k_rs, (t0 + s - 1) * ZF_HBC, ZF_HBC, p.sk, tid);
  };
  zf_load_tile(sQ, qp, p.q_rs, qbase, ZF_BM, p.sq, tid);
#pragma unroll
  for (int s = 0; s < ZF_ST - 1; s++) {
    issue(s);
    zf_cp_commit();
  }

` + hopperRegs + `
  /* Step s: the copies of group s are in; group s+ZF_ST−1 starts. */
  auto arrive = [&](int s) {
    zf_cp_waitn<ZF_ST - 2>();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    issue(s + ZF_ST - 1);
    zf_cp_commit();
  };
` + hopperSteps + `
  if (n > 0) {
    arrive(0);
    zf_wg_fence();
    keep_s();
    mma_s(0);
    zf_wg_wait<0>();
    keep_s();
    softmax(0);
    pack_p();
    for (int s = 1; s < n; s++) {
      arrive(s);
      zf_wg_fence();
      keep_s();
      keep_o();
      mma_s(s);
      rescale_o();
      zf_wg_fence();
      keep_o();
      mma_pv(s);
      zf_wg_wait<1>();
      keep_s();
      softmax(s);
      zf_wg_wait<0>();
      keep_o();
      pack_p();
    }
    arrive(n);
    rescale_o();
    zf_wg_fence();
    keep_o();
    mma_pv(n);
    zf_wg_wait<0>();
    keep_o();
  }
` + hopperStore + `}
`

// hopperWSKernel is the warp-specialised kernel (ZF_WS): warpgroup 0
// loads Q, K and V with TMA (three tensor maps made on the host, the
// 128-byte swizzle that zf_swz spells out) into ZF_ST stages guarded by
// mbarriers (full: the copy's bytes; empty: every consumer thread
// arrives), and gives up its registers (setmaxnreg) to the ZF_WG consumer
// warpgroups, which run hopperSteps with no __syncthreads in the loop.
// With ZF_PERSIST a block walks tiles (query block, head) gridDim.x apart
// and the producer loads the next tile's K, V and Q while the consumers
// finish and store the last; the stage count runs on across tiles.
const hopperWSKernel = `
#line 1 "cuda/attention_hopper_src.go (warp-specialised kernel)"
#ifndef ZF_PERSIST
#define ZF_PERSIST 0
#endif
extern "C" __global__ void __launch_bounds__(ZF_NT + 128, 1) zf_flash_ws(uchar* __restrict__ y,
    const uchar* __restrict__ mask, const uchar* __restrict__ bias, const float* __restrict__ slopes, const zf_flash_p p,
    const __grid_constant__ zf_tmap tq, const __grid_constant__ zf_tmap tk, const __grid_constant__ zf_tmap tv) {
  extern __shared__ zf_u4 zf_sh[];
  constexpr bool F16 = ZF_HALF_IN != 0;
  const unsigned int sbase = (zf_smem(zf_sh) + 1023u) & ~1023u;
  const unsigned int sQ = sbase, sK = sbase + ZF_QBYTES, sV = sK + ZF_ST * ZF_KBYTES;
  /* mbarriers after the tiles: Q full, Q empty, then per stage K full,
     V full, K empty, V empty. */
  const unsigned int barQ = sV + ZF_ST * ZF_KBYTES, barQE = barQ + 8, barKF = barQE + 8, barVF = barKF + 8 * ZF_ST;
  const unsigned int barKE = barVF + 8 * ZF_ST, barVE = barKE + 8 * ZF_ST;
  const float ninf = __int_as_float(0xff800000);
  const float log2e = 1.4426950408889634f;
  const int tid = (int)threadIdx.x, role = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int nq = (p.sq + ZF_BM - 1) / ZF_BM;
  const int ntile = nq * p.b * p.h; /* the persistent grid's tiles */
  (void)ntile;
  int head = 0, bb = 0, kvh = 0, qbase = 0, t0 = 0, n = 0;
  /* Tile tile's head, batch and query block; t0 and n: its first key
     tile and its count. The longest blocks (the last rows, under a causal
     mask) start first. */
  auto decode = [&](int tile) {
#if ZF_PERSIST
    /* Causal: the tiles longest first, and every odd round of gridDim.x
       of them in reverse (a snake), so that the block that took the
       longest tile of one round takes the shortest of the next: with
       tile += gridDim.x alone, block 0 took the longest of every round
       (at [1, 4096, 32 heads] 152 key tiles against a mean of 136).
       Else a head's query blocks together (its K and V stay in L2). */
    int tt = tile;
    if (ZF_MASK == 1) {
      const int gd = (int)gridDim.x, rd = tile / gd;
      if (rd & 1) tt = rd * gd + min(gd, ntile - rd * gd) - 1 - tile % gd;
    }
    const int qi = ZF_MASK == 1 ? tt / (p.b * p.h) : tt % nq;
    const int yy = ZF_MASK == 1 ? tt % (p.b * p.h) : tt / nq;
#else
    const int qi = (int)blockIdx.x, yy = (int)blockIdx.y;
#endif
    head = yy % p.h;
    bb = yy / p.h;
    kvh = head / (p.h / p.kv);
    qbase = (nq - 1 - qi) * ZF_BM;
    int kend = p.sk;
    if (ZF_MASK == 1) kend = min(p.sk, qbase + ZF_BM);
    const int ntiles = (kend + ZF_HBC - 1) / ZF_HBC;
    t0 = (ZF_MASK == 1 && p.window > 0) ? max(0, qbase - p.window + 1) / ZF_HBC : 0;
    n = max(0, ntiles - t0);
  };
#if ZF_PERSIST
#define ZF_TILES for (int tile = (int)blockIdx.x, jt = 0; tile < ntile; tile += (int)gridDim.x, jt++)
#else
#define ZF_TILES for (int tile = 0, jt = 0; tile < 1; tile++, jt++)
#endif

  if (tid == 0) {
    zf_mbar_init(barQ, 1);
    zf_mbar_init(barQE, ZF_NT);
#pragma unroll
    for (int i = 0; i < ZF_ST; i++) {
      zf_mbar_init(barKF + 8 * i, 1);
      zf_mbar_init(barVF + 8 * i, 1);
      zf_mbar_init(barKE + 8 * i, ZF_NT);
      zf_mbar_init(barVE + 8 * i, ZF_NT);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();

  if (role == 0) {
    /* The producer: one thread issues every copy; the others leave. */
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;" ::: "memory");
    if (tid == 0) {
      int g = 0; /* key tiles loaded so far: the stage and its phase */
      auto load_q = [&](int jt) {
        zf_mbar_wait(barQE, (jt & 1) ^ 1);
        zf_mbar_expect(barQ, ZF_QBYTES);
#pragma unroll
        for (int cb = 0; cb < ZF_D / 64; cb++) zf_tma3(sQ + cb * ZF_BM * 128, &tq, head * ZF_D + cb * 64, qbase, bb, barQ);
      };
      ZF_TILES {
        decode(tile);
        const int kc = kvh * ZF_D;
        if (n == 0) load_q(jt);
        for (int s = 0; s < n; s++, g++) {
          const int st = g % ZF_ST, k0 = (t0 + s) * ZF_HBC;
          const unsigned int ph = ((g / ZF_ST) & 1) ^ 1;
          zf_mbar_wait(barKE + 8 * st, ph);
          zf_mbar_expect(barKF + 8 * st, ZF_KBYTES);
#pragma unroll
          for (int cb = 0; cb < ZF_D / 64; cb++) zf_tma3(sK + st * ZF_KBYTES + cb * ZF_HBC * 128, &tk, kc + cb * 64, k0, bb, barKF + 8 * st);
          /* Q after the tile's first K: that K may load while the
             consumers still finish the last tile. */
          if (s == 0) load_q(jt);
          zf_mbar_wait(barVE + 8 * st, ph);
          zf_mbar_expect(barVF + 8 * st, ZF_KBYTES);
#pragma unroll
          for (int cb = 0; cb < ZF_D / 64; cb++) zf_tma3(sV + st * ZF_KBYTES + cb * ZF_HBC * 128, &tv, kc + cb * 64, k0, bb, barVF + 8 * st);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" ::: "memory");
    const int wg = role - 1;
    const int c2 = (lane & 3) * 2;
    const float sl2 = p.scale * log2e;
    int rlo = 0, rhi = 0, r0 = 0, r1 = 0;
    float slope = 0.0f;
` + hopperRegs + hopperSteps + `
    /* Stage waits and releases by the running key-tile count. */
    auto wait_k = [&](int g) { zf_mbar_wait(barKF + 8 * (g % ZF_ST), (g / ZF_ST) & 1); };
    auto wait_v = [&](int g) { zf_mbar_wait(barVF + 8 * (g % ZF_ST), (g / ZF_ST) & 1); };
    auto free_k = [&](int g) { zf_mbar_arrive(barKE + 8 * (g % ZF_ST)); };
    auto free_v = [&](int g) { zf_mbar_arrive(barVE + 8 * (g % ZF_ST)); };
    /* Turns (ZF_PP): a warpgroup issues its MMAs after the other has
       issued its own, so one's softmax runs under the other's MMAs.
       Warpgroup 1 gives each tile's first turn; its last step gives none. */
    auto turn = [&]() { if (ZF_PP) zf_bar_sync(1 + wg); };
    auto pass = [&](bool last) { if (ZF_PP && !(last && wg == 1)) zf_bar_arrive(2 - wg); };
    int g = 0; /* key tiles consumed before this tile */
    ZF_TILES {
      decode(tile);
      rlo = qbase + wg * 64;
      rhi = rlo + 63;
      r0 = rlo + warp * 16 + (lane >> 2);
      r1 = r0 + 8;
      slope = ZF_ALIBI ? slopes[head] : 0.0f;
      if (ZF_PERSIST) {
#pragma unroll
        for (int i = 0; i < ZF_D / 2; i++) o[i] = 0.0f;
        m0 = ninf;
        m1 = ninf;
        l0 = 0.0f;
        l1 = 0.0f;
      }
      zf_mbar_wait(barQ, jt & 1);
      if (n > 0) {
        if (ZF_PP && wg == 1) zf_bar_arrive(1);
        wait_k(g);
        turn();
        zf_wg_fence();
        keep_s();
        mma_s(g);
        pass(false);
        zf_wg_wait<0>();
        keep_s();
        free_k(g);
        softmax(0);
        pack_p();
        for (int s = 1; s < n; s++) {
          wait_k(g + s);
          turn();
          zf_wg_fence();
          keep_s();
          keep_o();
          mma_s(g + s);
          rescale_o();
          wait_v(g + s - 1);
          zf_wg_fence();
          keep_o();
          mma_pv(g + s);
          pass(false);
          zf_wg_wait<1>();
          keep_s();
          free_k(g + s);
          softmax(s);
          zf_wg_wait<0>();
          keep_o();
          free_v(g + s - 1);
          pack_p();
        }
        wait_v(g + n - 1);
        rescale_o();
        turn();
        zf_wg_fence();
        keep_o();
        mma_pv(g + n);
        pass(true);
        zf_wg_wait<0>();
        keep_o();
        free_v(g + n - 1);
        g += n;
      }
      /* Q is free for the next tile's copy. */
      zf_mbar_arrive(barQE);
` + hopperStore + `    }
  }
}
#undef ZF_TILES
`
