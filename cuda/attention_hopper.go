//go:build linux

package cuda

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/zflow/zflow/kernels"
)

// hopperGeom is the Hopper kernel's geometry: warpgroups a block (64
// query rows each), keys a tile, shared-memory stages of K and of V.
type hopperGeom struct{ wg, bc, st int }

// hopperDefault is the geometry used unless a test sets another.
var hopperDefault = hopperGeom{wg: 2, bc: 128, st: 2}

// hopperState is the Hopper attention route's switch and what it learned.
type hopperState struct {
	off  bool       // SetHopperAttention(false) or $ZFLOW_HOPPER_ATTN=0
	geom hopperGeom // zero: hopperDefault (tests time others)
	err  error      // why the route is unavailable (a compile failure), once known
}

// hopperFromEnv reads $ZFLOW_HOPPER_ATTN: "0" turns the route off.
func hopperFromEnv() hopperState {
	return hopperState{off: os.Getenv("ZFLOW_HOPPER_ATTN") == "0"}
}

// SetHopperAttention turns the Hopper (wgmma) flash kernel on or off. On
// (the default, unless $ZFLOW_HOPPER_ATTN=0), it takes the attentions the
// mma.sync flash kernel would take on an sm_90 device (bf16/f16, head dim
// 64 or 128, no mask, causal or explicit masks, grouped KV heads, score
// rounding, sliding windows, soft-caps, ALiBi and bias tensors; checked
// against the CPU beside the mma.sync kernel by TestAttention and
// TestAttentionExtras on an H200, 2026-12-02); off, everything goes to the
// mma.sync kernel (A/B runs). The exact kernel is unaffected.
func (b *Backend) SetHopperAttention(on bool) {
	b.mu.Lock()
	b.hopper.off = !on
	b.mu.Unlock()
}

// HopperAttention reports whether the Hopper kernel takes the flash path
// on this device and, when it does not, why.
func (b *Backend) HopperAttention() (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.arch != "sm_90":
		return false, fmt.Sprintf("the device is %s; the kernel is built for sm_90a", b.arch)
	case b.hopper.err != nil:
		return false, b.hopper.err.Error()
	case b.hopper.off:
		return false, "switched off (SetHopperAttention(false) or ZFLOW_HOPPER_ATTN=0)"
	}
	return true, ""
}

// useHopper says whether a flash attention of head dim d goes to the
// Hopper kernel (called with the backend locked).
func (b *Backend) useHopper(d int) bool {
	return b.arch == "sm_90" && !b.hopper.off && b.hopper.err == nil && (d == 64 || d == 128)
}

func (b *Backend) hopperGeom() hopperGeom {
	if b.hopper.geom.wg == 0 {
		return hopperDefault
	}
	return b.hopper.geom
}

// hopperSmem is the Hopper kernel's dynamic shared memory: Q, the K and V
// stages, and 1 KiB to align the tiles for the 128-byte swizzle.
func hopperSmem(d int, g hopperGeom) int {
	return 64*g.wg*d*2 + 2*g.st*g.bc*d*2 + 1024
}

// hopperOptions are the NVRTC options of one Hopper kernel variant.
func hopperOptions(d int, g hopperGeom, ff flashFlags) []string {
	return []string{"--gpu-architecture=sm_90a", fmt.Sprintf("-DZF_D=%d", d), fmt.Sprintf("-DZF_HALF_IN=%d", bit(ff.f16)),
		fmt.Sprintf("-DZF_MASK=%d", int(ff.mask)), fmt.Sprintf("-DZF_ROUND=%d", bit(ff.round)),
		fmt.Sprintf("-DZF_CAP=%d", bit(ff.cap)), fmt.Sprintf("-DZF_ALIBI=%d", bit(ff.alibi)), fmt.Sprintf("-DZF_BIAS=%d", bit(ff.bias)),
		fmt.Sprintf("-DZF_WG=%d", g.wg), fmt.Sprintf("-DZF_HBC=%d", g.bc), fmt.Sprintf("-DZF_ST=%d", g.st)}
}

// hopperModuleSource is the whole source of a Hopper kernel module: the
// pointwise source for its load, store and rounding functions, with its
// kernels made plain device functions that nothing calls (so that the
// module compiles only the attention kernel), then the kernel.
func hopperModuleSource() string {
	src, err := kernels.RenderPointwise(kernels.CUDA)
	if err != nil {
		panic(err) // CUDA is always rendered
	}
	src = strings.Replace(src, `#define ZF_KERNEL(name) extern "C" __global__ void name`,
		`#define ZF_KERNEL(name) static __device__ void name`, 1)
	return src + flashHelpers + hopperSource + wgmmaSource() + hopperKernelSource
}

// hopperKernel compiles (once) and returns the Hopper kernel for head dim
// d and the options ff; a compile failure turns the route off for the
// backend's life, with the reason kept for HopperAttention.
func (b *Backend) hopperKernel(d int, ff flashFlags) (string, hopperGeom, error) {
	g := b.hopperGeom()
	name := fmt.Sprintf("zf_flash_wg_d%d_w%d_n%d_s%d_f%d_m%d_r%d_c%d_a%d_b%d", d, g.wg, g.bc, g.st, bit(ff.f16), int(ff.mask),
		bit(ff.round), bit(ff.cap), bit(ff.alibi), bit(ff.bias))
	if _, ok := b.fns[name]; ok {
		return name, g, nil
	}
	if err := b.loadModule(name, hopperModuleSource(), hopperOptions(d, g, ff), []string{"zf_flash_wg"}); err != nil {
		b.hopper.err = fmt.Errorf("cuda: the Hopper attention kernel did not build: %w", err)
		return "", g, b.hopper.err
	}
	fn := b.fns["zf_flash_wg"]
	if err := b.d.check("cuFuncSetAttribute", b.d.cuFuncSetAttribute(fn, funcAttrMaxDynamicShared, int32(hopperSmem(d, g)))); err != nil {
		b.hopper.err = err
		return "", g, err
	}
	b.fns[name] = fn
	return name, g, nil
}

// launchHopper queues the Hopper kernel; false when the route turned out
// unavailable (the caller runs the mma.sync kernel instead).
func (b *Backend) launchHopper(d int, ff flashFlags, fp *flashP, out, q, k, v, mask, bias, slopes uintptr) (bool, error) {
	name, g, err := b.hopperKernel(d, ff)
	if err != nil {
		return false, nil // b.hopper.err says why
	}
	rows := 64 * g.wg
	grid := [3]uint32{uint32((int(fp.Sq) + rows - 1) / rows), uint32(fp.B * fp.H), 1}
	pb := unsafe.Slice((*byte)(unsafe.Pointer(fp)), unsafe.Sizeof(*fp))
	return true, b.launch(name, grid, [3]uint32{uint32(128 * g.wg), 1, 1}, uint32(hopperSmem(d, g)), out, q, k, v, mask, bias, slopes, pb)
}
