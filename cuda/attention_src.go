//go:build linux

package cuda

// attentionExactSource computes each (batch, head, query row) in one
// thread, in the CPU backend's order: bit-exact, for f32 inputs, odd head
// dims and Specs the flash kernel cannot honour. Scores and accumulators
// live in a scratch buffer laid out [j][thread] so that a warp's accesses
// coalesce.
const attentionExactSource = `
#line 1 "cuda/attention_src.go (exact)"
/* ---- CUDA only: exact attention (package cuda) ---- */
struct zf_attn_p {
  int b; int sq; int sk; int h; int kv; int d;
  int fmt_q; int fmt_k; int fmt_v; int fmt_m; int out_fmt; int mask;
  int m_sb; int m_si; int m_sj; int rs; int rprob; int rw; int math; int total;
  float scale; int each; int window; float cap;
  int alibi; int has_bias; int fmt_b; int b_sb; int b_sh; int b_si; int b_sj;
  int has_sinks; int fmt_s; int online; int rq;
};

/* q's element e as the score chain reads it: as stored, or (rq,
   exec.RoundQuery) times the scale in f32, rounded to the output format. */
static __device__ __forceinline__ float zf_attn_q(const uchar* q, const zf_attn_p& p, int off) {
  float x = zf_load(q, p.fmt_q, off);
  return p.rq != 0 ? zf_round(x * p.scale, p.out_fmt) : x;
}

/* exec.Exp2Approx: 2^x for x <= 0, zero below -126 (ex2.approx.ftz's
   flush), else correctly rounded (the instruction is within two ulps). */
static __device__ __forceinline__ float zf_ex2_ftz(float x) {
  return x < -126.0f ? 0.0f : zf_exp2_cr(x);
}

/* The GPU's own ex2.approx.ftz.f32: rounded to bf16 or f16 it is
   exec.RoundExp2Approx, whose table was measured from this instruction. */
static __device__ __forceinline__ float zf_ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Go's max: NaN if either is NaN; -0 < +0. */
static __device__ __forceinline__ float zf_gomax(float a, float b) {
  if (a != a || b != b) return a + b;
  if (a == 0.0f && b == 0.0f) return signbit(a) ? b : a;
  return b > a ? b : a;
}

extern "C" __global__ void zf_attn_exact(uchar* __restrict__ y, const uchar* __restrict__ q,
                                         const uchar* __restrict__ k, const uchar* __restrict__ v,
                                         const uchar* __restrict__ m, const uchar* __restrict__ bias,
                                         const float* __restrict__ slopes, float* __restrict__ scratch,
                                         const uchar* __restrict__ sinks, const zf_attn_p p) {
  const float ninf = __int_as_float(0xff800000);
  int qw = p.h * p.d, kw = p.kv * p.d, rep = p.h / p.kv;
  bool mma = (p.math & ZF_MATH_TENSOR_CORE) != 0; /* set only for narrow operands (exec.TensorCoreSums) */
  size_t tot = (size_t)p.total;
  for (int idx = (int)(blockIdx.x * blockDim.x + threadIdx.x); idx < p.total; idx += (int)(blockDim.x * gridDim.x)) {
    int i = idx % p.sq;
    int h = (idx / p.sq) % p.h;
    int bb = idx / (p.sq * p.h);
    int kh = h / rep;
    float* sc = scratch + idx;
    float* acc = scratch + tot * (size_t)p.sk + idx;
    int qoff = (bb * p.sq + i) * qw + h * p.d;
    float mx = ninf;
    for (int j = 0; j < p.sk; j++) {
      bool visible = true;
      if (p.mask == 1) {
        visible = j <= i && (p.window == 0 || j > i - p.window);
      } else if (p.mask == 2) {
        visible = zf_load(m, p.fmt_m, bb * p.m_sb + i * p.m_si + j * p.m_sj) != 0.0f;
      }
      if (!visible) {
        sc[(size_t)j * tot] = ninf;
        continue;
      }
      int koff = (bb * p.sk + j) * kw + kh * p.d;
      float dot = 0.0f;
      if (mma) { /* exec.DotMMA: blocks of 16 products, as tensor cores sum them */
        float pr[16];
        for (int e0 = 0; e0 < p.d; e0 += 16) {
          int nb = min(16, p.d - e0);
          for (int e = 0; e < nb; e++) pr[e] = zf_attn_q(q, p, qoff + e0 + e) * zf_load(k, p.fmt_k, koff + e0 + e);
          dot = zf_mma_block(dot, pr, nb);
        }
      } else {
        for (int e = 0; e < p.d; e++) {
          dot += zf_attn_q(q, p, qoff + e) * zf_load(k, p.fmt_k, koff + e);
        }
      }
      if (p.online == 1) { /* a plain chain's scale goes into the log2 units */
        sc[(size_t)j * tot] = dot;
        continue;
      }
      /* The score chain of exec.Backend's Attention, in its order; written
         as primitives, q·kᵀ is a matmul stored before the scale, or after
         it where q was scaled first. */
      float sv = p.rq != 0 ? zf_at(p.each, p.out_fmt, dot) : zf_at(p.each, p.out_fmt, zf_at(p.each, p.out_fmt, dot) * p.scale);
      if (p.cap > 0.0f) {
        sv = zf_at(p.each, p.out_fmt, sv / p.cap);
        sv = zf_at(p.each, p.out_fmt, zf_tanh(sv, p.math));
        sv = zf_at(p.each, p.out_fmt, p.cap * sv);
      }
      if (p.alibi != 0) {
        sv = zf_at(p.each, p.out_fmt, sv + zf_round(slopes[h] * (float)j, p.fmt_q));
      }
      if (p.has_bias != 0) {
        sv = zf_at(p.each, p.out_fmt, sv + zf_load(bias, p.fmt_b, bb * p.b_sb + h * p.b_sh + i * p.b_si + j * p.b_sj));
      }
      sv = zf_at(p.rs, p.out_fmt, sv);
      sc[(size_t)j * tot] = sv;
      mx = zf_gomax(mx, sv);
    }
    if (p.online != 0) {
      /* exec/cpu's onlineRow: key tiles of 128 (exec.FlashKeyTile), scores
         in log2 units, a running maximum, the sum and output rescaled. */
      const float log2e = 1.44269502f;
      float sl2 = p.scale * log2e;
      for (int j = 0; j < p.sk; j++) {
        float x = sc[(size_t)j * tot];
        if (x != ninf) sc[(size_t)j * tot] = p.online == 1 ? x * sl2 : x * log2e;
      }
      for (int e = 0; e < p.d; e++) acc[(size_t)e * tot] = 0.0f;
      float m = ninf, l = 0.0f;
      for (int t0 = 0; t0 < p.sk; t0 += 128) {
        int t1 = min(p.sk, t0 + 128);
        float mt = m;
        for (int j = t0; j < t1; j++) mt = zf_gomax(mt, sc[(size_t)j * tot]);
        if (mt == ninf) continue;
        float alpha = zf_ex2_ftz(m - mt);
        float ls = 0.0f;
        for (int j = t0; j < t1; j++) {
          float x = sc[(size_t)j * tot] - mt;
          float w = zf_ex2_ftz(x);
          ls += w;
          if (p.rw != 0) w = w == 0.0f ? 0.0f : zf_round(zf_ex2_approx(x), p.out_fmt);
          sc[(size_t)j * tot] = w;
        }
        l = l * alpha + ls;
        for (int e = 0; e < p.d; e++) {
          float a = acc[(size_t)e * tot] * alpha;
          if (mma) { /* exec.DotMMAFrom: the rescaled output is the MMA's C */
            float pr[16];
            for (int j0 = t0; j0 < t1; j0 += 16) {
              int nb = min(16, t1 - j0);
              for (int jj = 0; jj < nb; jj++) {
                pr[jj] = sc[(size_t)(j0 + jj) * tot] * zf_load(v, p.fmt_v, (bb * p.sk + j0 + jj) * kw + kh * p.d + e);
              }
              a = zf_mma_block(a, pr, nb);
            }
          } else {
            for (int j = t0; j < t1; j++) {
              a += sc[(size_t)j * tot] * zf_load(v, p.fmt_v, (bb * p.sk + j) * kw + kh * p.d + e);
            }
          }
          acc[(size_t)e * tot] = a;
        }
        m = mt;
      }
      for (int e = 0; e < p.d; e++) zf_store(y, p.out_fmt, qoff + e, acc[(size_t)e * tot] / l);
      continue;
    }
    /* An attention sink joins the max and the sum, then weighs no value;
       with it, RoundEach rounds the logits minus their max (eager
       attention subtracts the max as its own op). */
    float sink = 0.0f;
    if (p.has_sinks != 0) {
      sink = zf_load(sinks, p.fmt_s, h);
      mx = zf_gomax(mx, sink);
    }
    float sum = 0.0f;
    for (int j = 0; j < p.sk; j++) {
      float e = zf_exp(zf_at(p.each != 0 && p.has_sinks != 0, p.out_fmt, sc[(size_t)j * tot] - mx), p.math);
      sc[(size_t)j * tot] = e;
      sum += e;
    }
    if (p.has_sinks != 0) sum += zf_exp(zf_at(p.each, p.out_fmt, sink - mx), p.math);
    for (int e = 0; e < p.d; e++) acc[(size_t)e * tot] = 0.0f;
    for (int j = 0; j < p.sk; j++) {
      float w = sc[(size_t)j * tot];
      if (p.rw != 0) {
        w = zf_round(w, p.out_fmt);
      } else if (p.rprob != 0) {
        w = zf_round(w / sum, p.out_fmt);
      } else {
        w = w / sum;
      }
      if (mma) { /* the weights, summed below output by output */
        sc[(size_t)j * tot] = w;
        continue;
      }
      int voff = (bb * p.sk + j) * kw + kh * p.d;
      for (int e = 0; e < p.d; e++) {
        acc[(size_t)e * tot] += w * zf_load(v, p.fmt_v, voff + e);
      }
    }
    for (int e = 0; mma && e < p.d; e++) {
      float a = 0.0f, pr[16];
      for (int j0 = 0; j0 < p.sk; j0 += 16) {
        int nb = min(16, p.sk - j0);
        for (int jj = 0; jj < nb; jj++) {
          pr[jj] = sc[(size_t)(j0 + jj) * tot] * zf_load(v, p.fmt_v, (bb * p.sk + j0 + jj) * kw + kh * p.d + e);
        }
        a = zf_mma_block(a, pr, nb);
      }
      acc[(size_t)e * tot] = a;
    }
    for (int e = 0; e < p.d; e++) {
      float a = acc[(size_t)e * tot];
      if (p.rw != 0) a = a / sum;
      zf_store(y, p.out_fmt, qoff + e, a);
    }
  }
}
`

// flashSource is the tensor-core attention kernel (FlashAttention-2
// style): a block of ZF_NW warps takes 16·ZF_NW query rows of one (batch,
// head); each warp holds its 16 rows of Q in registers as mma A fragments,
// and the block walks the keys in tiles of 64, copied to shared memory by
// cp.async two stages deep (tile t+1 in flight while tile t is computed;
// rows padded by 16 bytes against bank conflicts). S = Q·Kᵀ and O += P·V are
// mma.sync m16n8k16 with f32 accumulators (K fragments by ldmatrix, V by
// ldmatrix.trans); the softmax is online in f32 (exp2 with the scale folded
// in), P is rounded to the input format (bf16 or f16) for the P·V product
// and the row sums are kept in f32 and divided at the end. The head dim
// (ZF_D: 64 or 128), the warps (ZF_NW), the input format (ZF_HALF_IN), the
// mask kind (ZF_MASK) and score rounding (ZF_ROUND) are fixed at compile
// time, one small module for each combination used, so that each kernel
// carries only its own path (fewer instruction-cache misses).
const flashSource = `
#line 1 "cuda/attention_src.go (flash)"
/* ---- CUDA only: flash attention (package cuda) ---- */
#ifndef ZF_D
#define ZF_D 128
#endif
#ifndef ZF_NW
#define ZF_NW 4
#endif
#ifndef ZF_HALF_IN
#define ZF_HALF_IN 0 /* 1: f16 inputs, 0: bf16 */
#endif
#ifndef ZF_MASK
#define ZF_MASK 0  /* 0 none, 1 causal, 2 explicit */
#endif
#ifndef ZF_ROUND
#define ZF_ROUND 0 /* 1: scores rounded to the output format (RoundScores) */
#endif
#ifndef ZF_CAP
#define ZF_CAP 0 /* 1: scores soft-capped: cap·tanh(s/cap) */
#endif
#ifndef ZF_ALIBI
#define ZF_ALIBI 0 /* 1: + the ALiBi bias, slope·j rounded to the input format */
#endif
#ifndef ZF_BIAS
#define ZF_BIAS 0 /* 1: + an additive bias tensor */
#endif
#define ZF_BR (16 * ZF_NW)
#define ZF_BC 64
#define ZF_LDS (ZF_D + 8)
#define ZF_TILE (ZF_BC * ZF_LDS)

template <bool F16>
static __device__ __forceinline__ void zf_flash_body(uchar* __restrict__ y, const ushort* __restrict__ q,
                                                     const ushort* __restrict__ k, const ushort* __restrict__ v,
                                                     const uchar* __restrict__ mask, const uchar* __restrict__ bias,
                                                     const float* __restrict__ slopes, const zf_flash_p& p) {
  extern __shared__ zf_u4 zf_sh[];
  ushort* sh = (ushort*)zf_sh; /* K0, V0, K1, V1: two stages of K and V tiles */
  const float ninf = __int_as_float(0xff800000);
  const float log2e = 1.4426950408889634f;
  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int head = (int)blockIdx.y % p.h, bb = (int)blockIdx.y / p.h;
  const int kvh = head / (p.h / p.kv);
  const int qbase = (int)blockIdx.x * ZF_BR;
  const int r0 = qbase + warp * 16 + (lane >> 2), r1 = r0 + 8;
  const int c2 = (lane & 3) * 2;
  const ushort* qp = q + (size_t)bb * p.sq * p.q_rs + (size_t)head * ZF_D;
  const ushort* kp = k + (size_t)bb * p.sk * p.k_rs + (size_t)kvh * ZF_D;
  const ushort* vp = v + (size_t)bb * p.sk * p.k_rs + (size_t)kvh * ZF_D;

  unsigned int qf[ZF_D / 16][4];
#pragma unroll
  for (int kk = 0; kk < ZF_D / 16; kk++) {
    int c = kk * 16 + c2;
    qf[kk][0] = r0 < p.sq ? *(const unsigned int*)(qp + (size_t)r0 * p.q_rs + c) : 0u;
    qf[kk][1] = r1 < p.sq ? *(const unsigned int*)(qp + (size_t)r1 * p.q_rs + c) : 0u;
    qf[kk][2] = r0 < p.sq ? *(const unsigned int*)(qp + (size_t)r0 * p.q_rs + c + 8) : 0u;
    qf[kk][3] = r1 < p.sq ? *(const unsigned int*)(qp + (size_t)r1 * p.q_rs + c + 8) : 0u;
  }
  float o[ZF_D / 8][4];
#pragma unroll
  for (int d = 0; d < ZF_D / 8; d++) { o[d][0] = 0.0f; o[d][1] = 0.0f; o[d][2] = 0.0f; o[d][3] = 0.0f; }
  /* Running maxima in log2 units (scores·log2 e), sums of the weights. */
  float m0 = ninf, m1 = ninf, l0 = 0.0f, l1 = 0.0f;

  int kend = p.sk;
  if (ZF_MASK == 1) kend = min(p.sk, qbase + ZF_BR);
  const int ntiles = (kend + ZF_BC - 1) / ZF_BC;
  /* A sliding window: the block's first row sees no key before qbase − window + 1. */
  const int t0 = (ZF_MASK == 1 && p.window > 0) ? max(0, qbase - p.window + 1) / ZF_BC : 0;
  const float slope = ZF_ALIBI ? slopes[head] : 0.0f;
  auto load_tile = [&](int t) {
    ushort* kb = sh + (t & 1) * 2 * ZF_TILE;
    ushort* vb = kb + ZF_TILE;
    int k0 = t * ZF_BC;
    for (int idx = tid; idx < ZF_BC * ZF_D / 8; idx += 32 * ZF_NW) {
      int row = idx / (ZF_D / 8), col = (idx % (ZF_D / 8)) * 8;
      bool ok = k0 + row < p.sk;
      size_t g = (size_t)(ok ? k0 + row : 0) * p.k_rs + col;
      zf_cp16(kb + row * ZF_LDS + col, kp + g, ok ? 16 : 0);
      zf_cp16(vb + row * ZF_LDS + col, vp + g, ok ? 16 : 0);
    }
  };
  if (t0 < ntiles) load_tile(t0);
  zf_cp_commit();
  for (int t = t0; t < ntiles; t++) {
    const int k0 = t * ZF_BC;
    if (t + 1 < ntiles) load_tile(t + 1); /* in flight while tile t is computed */
    zf_cp_commit();
    zf_cp_wait1();
    __syncthreads();
    const ushort* Ks = sh + (t & 1) * 2 * ZF_TILE;
    const ushort* Vs = Ks + ZF_TILE;

    float s[ZF_BC / 8][4];
#pragma unroll
    for (int n = 0; n < ZF_BC / 8; n++) { s[n][0] = 0.0f; s[n][1] = 0.0f; s[n][2] = 0.0f; s[n][3] = 0.0f; }
    const int mi = lane >> 3;
#pragma unroll
    for (int kk = 0; kk < ZF_D / 16; kk++) {
#pragma unroll
      for (int n2 = 0; n2 < ZF_BC / 16; n2++) {
        unsigned int bfr[4];
        zf_ldsm4(bfr, zf_smem(Ks + (n2 * 16 + (mi >> 1) * 8 + (lane & 7)) * ZF_LDS + kk * 16 + (mi & 1) * 8));
        zf_mma<F16>(s[2 * n2], qf[kk], bfr[0], bfr[1]);
        zf_mma<F16>(s[2 * n2 + 1], qf[kk], bfr[2], bfr[3]);
      }
    }

    float mx0 = ninf, mx1 = ninf;
#pragma unroll
    for (int n = 0; n < ZF_BC / 8; n++) {
#pragma unroll
      for (int e = 0; e < 2; e++) {
        int j = k0 + n * 8 + c2 + e;
        float x0 = s[n][e] * p.scale, x1 = s[n][2 + e] * p.scale;
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
        bool ok0 = j < p.sk, ok1 = j < p.sk;
        if (ZF_MASK == 1) {
          ok0 = ok0 && j <= r0 && (p.window == 0 || j > r0 - p.window);
          ok1 = ok1 && j <= r1 && (p.window == 0 || j > r1 - p.window);
        } else if (ZF_MASK == 2) {
          ok0 = ok0 && r0 < p.sq && zf_load(mask, p.fmt_m, bb * p.m_sb + r0 * p.m_si + j * p.m_sj) != 0.0f;
          ok1 = ok1 && r1 < p.sq && zf_load(mask, p.fmt_m, bb * p.m_sb + r1 * p.m_si + j * p.m_sj) != 0.0f;
        }
        x0 = ok0 ? x0 * log2e : ninf;
        x1 = ok1 ? x1 * log2e : ninf;
        s[n][e] = x0;
        s[n][2 + e] = x1;
        mx0 = fmaxf(mx0, x0);
        mx1 = fmaxf(mx1, x1);
      }
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    float base0 = mn0 == ninf ? 0.0f : mn0, base1 = mn1 == ninf ? 0.0f : mn1;
    float corr0 = zf_ex2(m0 - base0), corr1 = zf_ex2(m1 - base1);
    m0 = mn0;
    m1 = mn1;
    l0 *= corr0;
    l1 *= corr1;
#pragma unroll
    for (int d = 0; d < ZF_D / 8; d++) { o[d][0] *= corr0; o[d][1] *= corr0; o[d][2] *= corr1; o[d][3] *= corr1; }
#pragma unroll
    for (int n = 0; n < ZF_BC / 8; n++) {
      s[n][0] = zf_ex2(s[n][0] - base0);
      s[n][1] = zf_ex2(s[n][1] - base0);
      s[n][2] = zf_ex2(s[n][2] - base1);
      s[n][3] = zf_ex2(s[n][3] - base1);
      l0 += s[n][0] + s[n][1];
      l1 += s[n][2] + s[n][3];
    }
#pragma unroll
    for (int j2 = 0; j2 < ZF_BC / 16; j2++) {
      unsigned int a[4];
      a[0] = zf_pack2<F16>(s[2 * j2][0], s[2 * j2][1]);
      a[1] = zf_pack2<F16>(s[2 * j2][2], s[2 * j2][3]);
      a[2] = zf_pack2<F16>(s[2 * j2 + 1][0], s[2 * j2 + 1][1]);
      a[3] = zf_pack2<F16>(s[2 * j2 + 1][2], s[2 * j2 + 1][3]);
#pragma unroll
      for (int d2 = 0; d2 < ZF_D / 16; d2++) {
        unsigned int bfr[4];
        zf_ldsm4t(bfr, zf_smem(Vs + (j2 * 16 + (mi & 1) * 8 + (lane & 7)) * ZF_LDS + d2 * 16 + (mi >> 1) * 8));
        zf_mma<F16>(o[2 * d2], a, bfr[0], bfr[1]);
        zf_mma<F16>(o[2 * d2 + 1], a, bfr[2], bfr[3]);
      }
    }
    __syncthreads(); /* the next iteration's copy overwrites this stage */
  }
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const int ow = p.q_rs;
#pragma unroll
  for (int d = 0; d < ZF_D / 8; d++) {
    int col = head * ZF_D + d * 8 + c2;
    if (r0 < p.sq) {
      int off = (bb * p.sq + r0) * ow + col;
      zf_store(y, p.out_fmt, off, o[d][0] / l0);
      zf_store(y, p.out_fmt, off + 1, o[d][1] / l0);
    }
    if (r1 < p.sq) {
      int off = (bb * p.sq + r1) * ow + col;
      zf_store(y, p.out_fmt, off, o[d][2] / l1);
      zf_store(y, p.out_fmt, off + 1, o[d][3] / l1);
    }
  }
}

extern "C" __global__ void __launch_bounds__(32 * ZF_NW) zf_flash(uchar* __restrict__ y, const ushort* __restrict__ q,
    const ushort* __restrict__ k, const ushort* __restrict__ v, const uchar* __restrict__ mask,
    const uchar* __restrict__ bias, const float* __restrict__ slopes, const zf_flash_p p) {
  zf_flash_body<ZF_HALF_IN != 0>(y, q, k, v, mask, bias, slopes, p);
}
`

// flashHelpers are the flash kernels' shared pieces: the parameter block
// (zf_flash_p, the Go flashP), shared-memory addresses, cp.async, the
// mma.sync and ldmatrix wrappers, bf16/f16 packing and exp2. Both the
// mma.sync kernel (flashSource) and the Hopper kernel (hopperSource) are
// compiled after them.
const flashHelpers = `
#line 1 "cuda/attention_src.go (flash helpers)"
/* ---- CUDA only: flash attention helpers (package cuda) ---- */
struct zf_flash_p {
  int b; int sq; int sk; int h; int kv;
  int q_rs; int k_rs;
  int mask; int m_sb; int m_si; int m_sj; int fmt_m;
  int out_fmt; int round_scores;
  float scale; int window; float cap;
  int fmt_b; int b_sb; int b_sh; int b_si; int b_sj;
};

struct alignas(16) zf_u4 { unsigned int x, y, z, w; };

static __device__ __forceinline__ unsigned int zf_smem(const void* p) {
  unsigned int r;
  asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

static __device__ __forceinline__ void zf_ldsm4(unsigned int* r, unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

static __device__ __forceinline__ void zf_ldsm4t(unsigned int* r, unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

/* 16-byte global→shared copy that bypasses registers; bytes = 0 fills zeros. */
static __device__ __forceinline__ void zf_cp16(const void* smem, const void* gmem, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(zf_smem(smem)), "l"(gmem), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void zf_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
static __device__ __forceinline__ void zf_cp_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

template <bool F16>
static __device__ __forceinline__ void zf_mma(float* c, const unsigned int* a, unsigned int b0, unsigned int b1) {
  if (F16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/* Two f32 to a bf16x2 / f16x2 register, lo in the low half (RNE). */
template <bool F16>
static __device__ __forceinline__ unsigned int zf_pack2(float lo, float hi) {
  unsigned int r;
  if (F16) {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

static __device__ __forceinline__ float zf_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
`
