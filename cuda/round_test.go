//go:build linux

package cuda

import (
	"math"
	"testing"

	"github.com/zflow/zflow/kernels"
)

// roundTestSource checks, for every f32 bit pattern x (and y, x's
// pattern reversed and rotated, as the high half of a pair), the target's
// zf_rn_bf16 and zf_pack_bf16 against zf_f32_to_bf16's integer steps for
// numbers and against the canonical 0x7FFF for NaNs, counting the patterns
// where they differ and keeping the first.
const roundTestSource = `
static __device__ uint zf_test_want(float x) {
  return x != x ? 0x7FFFu : zf_f32_to_bf16(x);
}
extern "C" __global__ void zf_test_round(uint* bad) {
  for (zf_u64 i = blockIdx.x * (zf_u64)blockDim.x + threadIdx.x; i < ((zf_u64)1 << 32); i += (zf_u64)gridDim.x * blockDim.x) {
    uint ux = (uint)i;
    uint uy = __brev(ux) ^ 0x5A5A5A5Au;
    uy = (uy << 7) | (uy >> 25);
    float x = __uint_as_float(ux);
    float y = __uint_as_float(uy);
    uint want = zf_test_want(x);
    if (__float_as_uint(zf_rn_bf16(x)) != want << 16) {
      if (atomicAdd(&bad[0], 1u) == 0u) bad[1] = ux;
    }
    if (zf_pack_bf16(x, y) != (want | (zf_test_want(y) << 16))) {
      if (atomicAdd(&bad[2], 1u) == 0u) bad[3] = ux;
    }
  }
}
`

// TestRoundBF16Exhaustive: the rounding the kernels store and round bf16
// with (the converter on sm_80 and later) gives zf_f32_to_bf16's bits for
// every f32 number, subnormals and infinities included, and 0x7FFF for
// every NaN, alone and in pairs.
func TestRoundBF16Exhaustive(t *testing.T) {
	b := need(t)
	src, err := kernels.RenderEpilogues(kernels.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Upload(make([]float32, 4), []int{4}, f32)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(out)
	err = b.do(func() error {
		if err := b.loadModule("zflow_test_round", src+roundTestSource, []string{"--fmad=false"}, []string{"zf_test_round"}); err != nil {
			return err
		}
		return b.launch("zf_test_round", [3]uint32{uint32(b.sms * 16), 1, 1}, block256, 0, out.(*Tensor).ptr())
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Download(out)
	if err != nil {
		t.Fatal(err)
	}
	c := func(i int) uint32 { return math.Float32bits(got[i]) }
	if c(0) != 0 || c(2) != 0 {
		t.Fatalf("zf_rn_bf16 differs from zf_f32_to_bf16 (NaN: 0x7FFF) at %d patterns (first 0x%08X); zf_pack_bf16 at %d (first x 0x%08X)", c(0), c(1), c(2), c(3))
	}
	t.Logf("all 2^32 f32 patterns: zf_rn_bf16 and zf_pack_bf16 give zf_f32_to_bf16's bits, 0x7FFF for NaNs (soft round %v)", softRound)
}
