// ex2.approx.ftz.f32 against the correctly rounded 2^x over every f32 x in
// [-128, 0]: the ulp histogram, and every x where the two round to other
// bf16 or f16 values.
#include <cstdio>
#include <cstdint>
#include <cuda_fp16.h>
__device__ float ex2a(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ unsigned bfr(float x) { unsigned u = __float_as_uint(x); return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16; }
__device__ unsigned hfr(float x) { return __half_as_ushort(__float2half_rn(x)); }
__global__ void k(unsigned long long lo, unsigned long long hi, unsigned* cnt, unsigned* lb, unsigned* lh, unsigned cap, unsigned long long* hist) {
  for (unsigned long long i = lo + blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < hi; i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned u = (unsigned)i;
    float x = __uint_as_float(u);
    float y = ex2a(x), c = (float)exp2((double)x);
    if (__float_as_uint(y) != __float_as_uint(c)) {
      long long d = (long long)__float_as_uint(y) - (long long)__float_as_uint(c);
      atomicAdd(&hist[d < -8 ? 0 : d > 8 ? 16 : d + 8], 1ull);
    }
    if (bfr(y) != bfr(c)) { unsigned p = atomicAdd(&cnt[0], 1u); if (p < cap) lb[p] = u; }
    if (hfr(y) != hfr(c)) { unsigned p = atomicAdd(&cnt[1], 1u); if (p < cap) lh[p] = u; }
  }
}
int main(int argc, char** argv) {
  const unsigned cap = 3500000;
  unsigned *cnt, *lb, *lh; unsigned long long* hist;
  cudaMallocManaged(&cnt, 8); cudaMallocManaged(&lb, 4ull * cap); cudaMallocManaged(&lh, 4ull * cap); cudaMallocManaged(&hist, 17 * 8);
  cnt[0] = cnt[1] = 0; for (int i = 0; i < 17; i++) hist[i] = 0;
  k<<<132 * 16, 256>>>(0x80000000ull, 0xC3000001ull, cnt, lb, lh, cap, hist);
  cudaDeviceSynchronize();
  printf("err %s\nbf16 differ %u, f16 differ %u\nulp hist (y-c, -8..8):", cudaGetErrorString(cudaGetLastError()), cnt[0], cnt[1]);
  for (int i = 0; i < 17; i++) printf(" %llu", hist[i]);
  printf("\n");
  FILE* f = fopen(argv[1], "wb"); fwrite(lb, 4, cnt[0] < cap ? cnt[0] : cap, f); fclose(f);
  f = fopen(argv[2], "wb"); fwrite(lh, 4, cnt[1] < cap ? cnt[1] : cap, f); fclose(f);
  return 0;
}
