package kernels

import (
	_ "embed"
	"fmt"
	"regexp"
	"sort"
)

//go:embed pointwise.zf
var pointwise string

//go:embed rows.zf
var rows string

//go:embed tiles.zf
var tiles string

// Source is the target-neutral kernel source: pointwise.zf, then rows.zf
// (the row kernels, which use pointwise.zf's functions), then tiles.zf
// (the cooperative kernels, which use both).
func Source() string { return pointwise + "\n" + rows + "\n" + tiles }

// Target is a language the source is rendered in.
type Target uint8

const (
	CUDA Target = iota + 1 // CUDA C for NVRTC
	MSL                    // Metal Shading Language
	Host                   // C++ for the host (tests)
)

func (t Target) String() string {
	switch t {
	case CUDA:
		return "cuda"
	case MSL:
		return "msl"
	case Host:
		return "host"
	}
	return fmt.Sprintf("Target(%d)", uint8(t))
}

// Render returns the whole source for target t: its prelude, then
// pointwise.zf, rows.zf and tiles.zf unchanged (#line directives keep
// compiler messages on each file's lines).
func Render(t Target) (string, error) {
	src, err := RenderPointwise(t)
	if err != nil {
		return "", err
	}
	return src + "\n#line 1 \"rows.zf\"\n" + rows + "\n#line 1 \"tiles.zf\"\n" + tiles, nil
}

// RenderPointwise is Render without rows.zf and tiles.zf: what a
// backend with norm, linear and attention kernels of its own compiles
// (CUDA), sparing the compile of row kernels it never launches.
func RenderPointwise(t Target) (string, error) {
	p, ok := preludes[t]
	if !ok {
		return "", fmt.Errorf("kernels: no prelude for target %v", t)
	}
	return p + "\n#line 1 \"pointwise.zf\"\n" + pointwise, nil
}

// Prelude is target t's definitions of the target words ("" if unknown).
func Prelude(t Target) string { return preludes[t] }

var kernelRE = regexp.MustCompile(`(?m)^ZF_KERNEL\((\w+)\)`)

// Kernels lists the kernel entry points the whole source defines, sorted.
func Kernels() []string { return kernelNames(Source()) }

// PointwiseKernels lists those of pointwise.zf alone (RenderPointwise's).
func PointwiseKernels() []string { return kernelNames(pointwise) }

func kernelNames(src string) []string {
	var names []string
	for _, m := range kernelRE.FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	sort.Strings(names)
	return names
}

// The preludes. Each defines exactly the words listed in pointwise.zf's
// header comment; render_test.go checks that every target defines the same
// set and that the source uses nothing else.
var preludes = map[Target]string{
	CUDA: `/* target: CUDA C (NVRTC) */
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long long ulong;
typedef ulong zf_u64;
struct alignas(16) zf_v4 { uint x, y, z, w; };
#define ZF_FN static __device__ __forceinline__
#define ZF_KERNEL(name) extern "C" __global__ void name
#define ZF_IN(p, i) const uchar* __restrict__ p
#define ZF_OUT(p, i) uchar* __restrict__ p
#define ZF_PARAMS(T, p, i) const T p
#define ZF_TID
#define ZF_FOR_EACH(i, n) for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < (n); i += (int)(blockDim.x * gridDim.x))
#define ZF_PREF(T) const T&
#define ZF_DEV
#define ZF_THREAD
#define ZF_GROUP_TID
#define ZF_LID ((int)threadIdx.x)
#define ZF_GROUP_ID ((int)blockIdx.x)
#define ZF_SHARED __shared__
#define ZF_SHM
#define ZF_BARRIER() __syncthreads()
#define ZF_UNROLL _Pragma("unroll")
#define zf_bits(x) __float_as_uint(x)
#define zf_float(u) __uint_as_float(u)
#define zf_udiv(n, d, m, s) ((__umulhi((n), (m)) + (n)) >> (uint)(s))
/* bf16 rounding by the converter (cvt.rn: to nearest, ties to even, the
 * bits zf_f32_to_bf16 computes for every number, subnormals included); a
 * NaN becomes the converter's canonical 0x7FFF, whatever its sign and
 * payload, so that every route that stores one stores the same bits (the
 * tensor cores' NaNs and an activation that passes a NaN through differ in
 * sign; precision/doc.go: NaN payloads are not compared). ZF_SOFT_ROUND
 * (A/B runs) or a device before sm_80 takes the integer steps instead. */
static __device__ __forceinline__ float zf_cuda_rn_bf16(float x) {
#if defined(ZF_SOFT_ROUND) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
  uint u = __float_as_uint(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    return __uint_as_float(0x7FFF0000u);
  }
  return __uint_as_float((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
#else
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return __uint_as_float(((uint)h) << 16);
#endif
}
/* Two values rounded to bf16, lo in the low half. */
static __device__ __forceinline__ uint zf_cuda_pack_bf16(float lo, float hi) {
#if defined(ZF_SOFT_ROUND) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
  return (__float_as_uint(zf_cuda_rn_bf16(lo)) >> 16) | (__float_as_uint(zf_cuda_rn_bf16(hi)) & 0xFFFF0000u);
#else
  uint d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#endif
}
#define zf_rn_bf16(x) zf_cuda_rn_bf16(x)
#define zf_pack_bf16(lo, hi) zf_cuda_pack_bf16((lo), (hi))
#define zf_exp_cr(x) ((float)exp((double)(x)))
#define zf_exp2_cr(x) ((float)exp2((double)(x)))
#define zf_tanh_cr(x) ((float)tanh((double)(x)))
#define zf_erf_cr(x) ((float)erf((double)(x)))
#define zf_sin_cr(x) ((float)sin((double)(x)))
#define zf_cos_cr(x) ((float)cos((double)(x)))
#define zf_atan_cr(x) ((float)atan((double)(x)))
#define zf_log_cr(x) ((float)log((double)(x)))
#define zf_sqrt_cr(x) __fsqrt_rn(x)
#define zf_expm1_cr(x) ((float)expm1((double)(x)))
#define ZF_FAST_ACT 1
#define zf_exp_f(x) expf(x)
#define zf_tanh_f(x) tanhf(x)
#define zf_erf_f(x) erff(x)
`,
	MSL: `/* target: Metal Shading Language (compile with fast math off) */
#include <metal_stdlib>
using namespace metal;
typedef uint4 zf_v4;
typedef ulong zf_u64;
#define ZF_FN static inline
#define ZF_KERNEL(name) kernel void name
#define ZF_IN(p, i) device const uchar* p [[buffer(i)]]
#define ZF_OUT(p, i) device uchar* p [[buffer(i)]]
#define ZF_PARAMS(T, p, i) constant T& p [[buffer(i)]]
#define ZF_TID , uint zf_gid [[thread_position_in_grid]], uint zf_gsz [[threads_per_grid]]
#define ZF_FOR_EACH(i, n) for (int i = (int)zf_gid; i < (n); i += (int)zf_gsz)
#define ZF_PREF(T) constant T&
#define ZF_DEV device
#define ZF_THREAD thread
#define ZF_GROUP_TID , uint zf_lid [[thread_index_in_threadgroup]], uint zf_grp [[threadgroup_position_in_grid]]
#define ZF_LID ((int)zf_lid)
#define ZF_GROUP_ID ((int)zf_grp)
#define ZF_SHARED threadgroup
#define ZF_SHM threadgroup
#define ZF_BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup)
#define ZF_UNROLL _Pragma("unroll")
#define zf_bits(x) as_type<uint>(x)
#define zf_float(u) as_type<float>(u)
#define zf_udiv(n, d, m, s) ((n) / (d))
#define zf_rn_bf16(x) zf_bf16_to_f32(zf_f32_to_bf16(x))
#define zf_pack_bf16(lo, hi) (zf_f32_to_bf16(lo) | (zf_f32_to_bf16(hi) << 16))
#define zf_exp_cr(x) precise::exp(x)
#define zf_exp2_cr(x) precise::exp2(x)
#define zf_tanh_cr(x) precise::tanh(x)
#define zf_erf_cr(x) zf_msl_erf(x)
#define zf_sin_cr(x) precise::sin(x)
#define zf_cos_cr(x) precise::cos(x)
#define zf_atan_cr(x) precise::atan(x)
#define zf_log_cr(x) precise::log(x)
#define zf_sqrt_cr(x) precise::sqrt(x) /* Metal's most accurate root; not checked against the CPU here (no Mac) */
#define zf_expm1_cr(x) zf_msl_expm1(x)
/* No f64 here: the "correctly rounded" functions are f32 already, so no fast path. */
#define ZF_FAST_ACT 0
#define zf_exp_f(x) precise::exp(x)
#define zf_tanh_f(x) precise::tanh(x)
#define zf_erf_f(x) zf_msl_erf(x)
/* Metal has no erf: erfc by its continued-fraction fit (relative error
 * below 1.2e-7), so erf is within a few f32 ulps, not correctly rounded. */
static inline float zf_msl_erf(float x) {
  float z = fabs(x);
  float t = 1.0f / (1.0f + 0.5f * z);
  float r = t * precise::exp(-z * z - 1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f +
            t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f +
            t * (-0.82215223f + t * 0.17087277f)))))))));
  float e = 1.0f - r;
  return x >= 0.0f ? e : -e;
}
/* Metal has no expm1: near 0, 2·t/(1 − t) with t = tanh(x/2) (no
 * cancellation), exp(x) − 1 elsewhere; within a few f32 ulps, not
 * correctly rounded. */
static inline float zf_msl_expm1(float x) {
  if (fabs(x) < 0.5f) {
    float t = precise::tanh(0.5f * x);
    return 2.0f * t / (1.0f - t);
  }
  return precise::exp(x) - 1.0f;
}
`,
	Host: `/* target: host C++20 (tests only; compile with -ffp-contract=off, SSE math) */
#include <atomic>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <thread>
#include <vector>
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef uint64_t zf_u64;
struct alignas(16) zf_v4 { uint x, y, z, w; };
static inline uint zf_host_bits(float x) { uint u; std::memcpy(&u, &x, 4); return u; }
static inline float zf_host_float(uint u) { float x; std::memcpy(&x, &u, 4); return x; }
#define ZF_FN static inline
#define ZF_KERNEL(name) extern "C" void name
#define ZF_IN(p, i) const uchar* p
#define ZF_OUT(p, i) uchar* p
#define ZF_PARAMS(T, p, i) const T& p
#define ZF_TID
#define ZF_FOR_EACH(i, n) for (int i = 0; i < (n); i++)
#define ZF_PREF(T) const T&
#define ZF_DEV
#define ZF_THREAD
/* Cooperative kernels: zf_host_groups runs a launch's threads as real
 * threads (one group at a time, its threads concurrently), so a barrier
 * is a barrier and group memory (a function's statics) is shared by the
 * group's threads only. */
#define ZF_GROUP_TID
#define ZF_LID zf_host_lid
#define ZF_GROUP_ID zf_host_grp
#define ZF_SHARED static
#define ZF_SHM
#define ZF_BARRIER() zf_host_barrier()
static thread_local int zf_host_lid, zf_host_grp;
/* The barrier: the last thread to arrive opens the next generation and
 * wakes the others, which wait on the generation word itself (a futex,
 * C++20's atomic wait): no mutex for 256 woken threads to queue on, which
 * on a 2-core machine cost seconds a test. */
static int zf_host_n;
static std::atomic<int> zf_host_arrived{0}, zf_host_gen{0};
static inline void zf_host_barrier() {
  int g = zf_host_gen.load(std::memory_order_acquire);
  if (zf_host_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == zf_host_n) {
    zf_host_arrived.store(0, std::memory_order_relaxed);
    zf_host_gen.fetch_add(1, std::memory_order_acq_rel);
    zf_host_gen.notify_all();
    return;
  }
  while (zf_host_gen.load(std::memory_order_acquire) == g) {
    zf_host_gen.wait(g, std::memory_order_acquire);
  }
}
/* Runs fn as groups × threads threads: thread t of every group is one
 * host thread, with a barrier between groups (the next group's stores to
 * group memory wait for this one's reads). */
template <class F> static void zf_host_groups(int groups, int threads, F fn) {
  zf_host_n = threads;
  zf_host_arrived = 0;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([=] {
      zf_host_lid = t;
      for (int g = 0; g < groups; g++) {
        zf_host_grp = g;
        fn();
        zf_host_barrier();
      }
    });
  }
  for (auto& th : ts) {
    th.join();
  }
}
#define ZF_UNROLL
#define zf_bits(x) zf_host_bits(x)
#define zf_float(u) zf_host_float(u)
#define zf_udiv(n, d, m, s) ((n) / (d))
#define zf_rn_bf16(x) zf_bf16_to_f32(zf_f32_to_bf16(x))
#define zf_pack_bf16(lo, hi) (zf_f32_to_bf16(lo) | (zf_f32_to_bf16(hi) << 16))
#define zf_exp_cr(x) ((float)std::exp((double)(x)))
#define zf_exp2_cr(x) ((float)std::exp2((double)(x)))
#define zf_tanh_cr(x) ((float)std::tanh((double)(x)))
#define zf_erf_cr(x) ((float)std::erf((double)(x)))
#define zf_sin_cr(x) ((float)std::sin((double)(x)))
#define zf_cos_cr(x) ((float)std::cos((double)(x)))
#define zf_atan_cr(x) ((float)std::atan((double)(x)))
#define zf_log_cr(x) ((float)std::log((double)(x)))
#define zf_sqrt_cr(x) ((float)std::sqrt((double)(x)))
#define zf_expm1_cr(x) ((float)std::expm1((double)(x)))
#define ZF_FAST_ACT 1
#define zf_exp_f(x) std::exp((float)(x))
#define zf_tanh_f(x) std::tanh((float)(x))
#define zf_erf_f(x) std::erf((float)(x))
`,
}
