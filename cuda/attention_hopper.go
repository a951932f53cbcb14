//go:build linux

package cuda

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/zflow/zflow/kernels"
)

// hopperGeom is the Hopper kernel's geometry: consumer warpgroups a
// block (64 query rows each), keys a tile, shared-memory stages of K and
// of V; ws picks the warp-specialised kernel (a TMA producer warpgroup
// and mbarriers) over the cp.async one, pp its consumers' turns at the
// tensor cores (ping-pong, two warpgroups), persist a grid of one block
// an SM that walks the tiles (warp-specialised only).
type hopperGeom struct {
	wg, bc, st      int
	ws, pp, persist bool
}

// hopperCP is the cp.async kernel's geometry ($ZFLOW_HOPPER_ATTN=cp), and
// the one used where the tensors cannot take tensor maps.
var hopperCP = hopperGeom{wg: 2, bc: 128, st: 2}

// hopperWS is the warp-specialised kernel's ($ZFLOW_HOPPER_ATTN=ws), and
// hopperWSP its persistent grid's ($ZFLOW_HOPPER_ATTN=wsp).
var (
	hopperWS  = hopperGeom{wg: 2, bc: 128, st: 2, ws: true, pp: true}
	hopperWSP = hopperGeom{wg: 2, bc: 128, st: 2, ws: true, pp: true, persist: true}
)

// hopperDefault is the geometry used unless a test or $ZFLOW_HOPPER_ATTN
// sets another: the persistent warp-specialised kernel, the fastest at
// both timed shapes on the H200 (2026-12-02, tenth session: 0.454 and
// 0.298 ms against the cp.async kernel's 0.768 and 0.538 and SDPA's 0.401
// and 0.264; BENCHMARKS.md).
var hopperDefault = hopperWSP

// hopperState is the Hopper attention route's switch and what it learned.
type hopperState struct {
	off  bool       // SetHopperAttention(false) or $ZFLOW_HOPPER_ATTN=0
	geom hopperGeom // zero: hopperDefault (tests time others)
	err  error      // why the route is unavailable (a compile failure), once known
}

// hopperFromEnv reads $ZFLOW_HOPPER_ATTN: "0" turns the route off, "cp",
// "ws" and "wsp" pick the cp.async kernel, the warp-specialised one or
// that on a persistent grid (A/B runs); unset or empty, the default. Any
// other value is refused: an A/B run must not measure the default while
// it believes it measures another kernel.
func hopperFromEnv() (hopperState, error) {
	switch v := os.Getenv("ZFLOW_HOPPER_ATTN"); v {
	case "":
		return hopperState{}, nil
	case "0":
		return hopperState{off: true}, nil
	case "cp":
		return hopperState{geom: hopperCP}, nil
	case "ws":
		return hopperState{geom: hopperWS}, nil
	case "wsp":
		return hopperState{geom: hopperWSP}, nil
	default:
		return hopperState{}, fmt.Errorf("cuda: ZFLOW_HOPPER_ATTN=%q: want 0, cp, ws or wsp (or unset)", v)
	}
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
// stages, 1 KiB to align the tiles for the 128-byte swizzle and, in the
// warp-specialised kernel, its mbarriers.
func hopperSmem(d int, g hopperGeom) int {
	n := 64*g.wg*d*2 + 2*g.st*g.bc*d*2 + 1024
	if g.ws {
		n += 8 * (2 + 4*g.st)
	}
	return n
}

// hopperOptions are the NVRTC options of one Hopper kernel variant.
func hopperOptions(d int, g hopperGeom, ff flashFlags) []string {
	return []string{"--gpu-architecture=sm_90a", fmt.Sprintf("-DZF_D=%d", d), fmt.Sprintf("-DZF_HALF_IN=%d", bit(ff.f16)),
		fmt.Sprintf("-DZF_MASK=%d", int(ff.mask)), fmt.Sprintf("-DZF_ROUND=%d", bit(ff.round)),
		fmt.Sprintf("-DZF_CAP=%d", bit(ff.cap)), fmt.Sprintf("-DZF_ALIBI=%d", bit(ff.alibi)), fmt.Sprintf("-DZF_BIAS=%d", bit(ff.bias)),
		fmt.Sprintf("-DZF_WG=%d", g.wg), fmt.Sprintf("-DZF_HBC=%d", g.bc), fmt.Sprintf("-DZF_ST=%d", g.st),
		fmt.Sprintf("-DZF_WS=%d", bit(g.ws)), fmt.Sprintf("-DZF_PP=%d", bit(g.pp)), fmt.Sprintf("-DZF_PERSIST=%d", bit(g.persist))}
}

// hopperModuleSource is the whole source of a Hopper kernel module: the
// pointwise source for its load, store and rounding functions, with its
// kernels made plain device functions that nothing calls (so that the
// module compiles only the attention kernel), then the kernel: the
// warp-specialised one (zf_flash_ws) when ws, else the cp.async one
// (zf_flash_wg).
func hopperModuleSource(ws bool) string {
	src, err := kernels.RenderPointwise(kernels.CUDA)
	if err != nil {
		panic(err) // CUDA is always rendered
	}
	src = strings.Replace(src, `#define ZF_KERNEL(name) extern "C" __global__ void name`,
		`#define ZF_KERNEL(name) static __device__ void name`, 1)
	kernel := hopperCPKernel
	if ws {
		kernel = hopperWSKernel
	}
	return src + flashHelpers + hopperSource + wgmmaSource() + hopperHelpers + kernel
}

// hopperEntry is the kernel's name in its module.
func hopperEntry(g hopperGeom) string {
	if g.ws {
		return "zf_flash_ws"
	}
	return "zf_flash_wg"
}

// hopperKernel compiles (once) and returns the Hopper kernel for head dim
// d and the options ff; a compile failure turns the route off for the
// backend's life, with the reason kept for HopperAttention.
func (b *Backend) hopperKernel(d int, g hopperGeom, ff flashFlags) (string, error) {
	name := fmt.Sprintf("%s_d%d_w%d_n%d_s%d_p%d_t%d_f%d_m%d_r%d_c%d_a%d_b%d", hopperEntry(g), d, g.wg, g.bc, g.st, bit(g.pp),
		bit(g.persist), bit(ff.f16), int(ff.mask), bit(ff.round), bit(ff.cap), bit(ff.alibi), bit(ff.bias))
	if _, ok := b.fns[name]; ok {
		return name, nil
	}
	if err := b.loadModule(name, hopperModuleSource(g.ws), hopperOptions(d, g, ff), []string{hopperEntry(g)}); err != nil {
		b.hopper.err = fmt.Errorf("cuda: the Hopper attention kernel did not build: %w", err)
		return "", b.hopper.err
	}
	fn := b.fns[hopperEntry(g)]
	if err := b.d.check("cuFuncSetAttribute", b.d.cuFuncSetAttribute(fn, funcAttrMaxDynamicShared, int32(hopperSmem(d, g)))); err != nil {
		b.hopper.err = err
		return "", err
	}
	b.fns[name] = fn
	return name, nil
}

// launchHopper queues the Hopper kernel; false when the route turned out
// unavailable (the caller runs the mma.sync kernel instead).
func (b *Backend) launchHopper(d int, ff flashFlags, fp *flashP, out, q, k, v, mask, bias, slopes uintptr) (bool, error) {
	if !(fp.Scale > 0) && !(ff.round || ff.cap || ff.alibi || ff.bias) {
		// The plain score chain folds the scale into the exponent's fma
		// and takes the maximum before it: a positive scale only.
		return false, nil
	}
	g := b.hopperGeom()
	var maps [3][]byte
	if g.ws {
		var err error
		if maps, err = b.hopperMaps(ff.f16, g, fp, q, k, v); err != nil {
			// Tensors a tensor map cannot describe (misaligned views) or a
			// driver without tensor maps: the cp.async kernel takes them.
			g = hopperCP
		}
	}
	if ff.round || ff.cap || ff.alibi || ff.bias {
		// The score chain's extras and the tile loop together spill
		// (ptxas, sm_90a): one tile a block there.
		g.persist = false
	}
	name, err := b.hopperKernel(d, g, ff)
	if err != nil {
		return false, nil // b.hopper.err says why
	}
	rows := 64 * g.wg
	grid := [3]uint32{uint32((int(fp.Sq) + rows - 1) / rows), uint32(fp.B * fp.H), 1}
	pb := unsafe.Slice((*byte)(unsafe.Pointer(fp)), unsafe.Sizeof(*fp))
	if g.persist {
		grid = [3]uint32{uint32(min(int(grid[0]*grid[1]), b.sms)), 1, 1}
	}
	if g.ws {
		return true, b.launch(name, grid, [3]uint32{uint32(128 * (g.wg + 1)), 1, 1}, uint32(hopperSmem(d, g)), out, mask, bias, slopes, pb,
			maps[0], maps[1], maps[2])
	}
	return true, b.launch(name, grid, [3]uint32{uint32(128 * g.wg), 1, 1}, uint32(hopperSmem(d, g)), out, q, k, v, mask, bias, slopes, pb)
}

// hopperMaps encodes the tensor maps of Q, K and V for the
// warp-specialised kernel: each a [batch, rows, heads·d] tensor of 2-byte
// elements, read in boxes of 64 columns (128 bytes, the 128-byte swizzle)
// by the tile's rows; rows past the end read as zeros, as the cp.async
// kernel fills them.
func (b *Backend) hopperMaps(f16 bool, g hopperGeom, fp *flashP, q, k, v uintptr) ([3][]byte, error) {
	var maps [3][]byte
	if b.d.tmap == nil {
		return maps, fmt.Errorf("cuda: the driver has no cuTensorMapEncodeTiled")
	}
	for i, t := range []struct {
		ptr             uintptr
		cols, rows, box int
	}{
		{q, int(fp.QRs), int(fp.Sq), 64 * g.wg}, {k, int(fp.KRs), int(fp.Sk), g.bc}, {v, int(fp.KRs), int(fp.Sk), g.bc},
	} {
		m, err := b.tensorMap(t.ptr, f16, t.cols, t.rows, int(fp.B), t.box)
		if err != nil {
			return maps, err
		}
		maps[i] = m
	}
	return maps, nil
}

// tensorMap encodes one CUtensorMap (128 bytes) for a [batch, rows, cols]
// tensor of bf16 or f16 at ptr, boxes of 64 columns by box rows, with the
// 128-byte swizzle and zeros out of bounds.
func (b *Backend) tensorMap(ptr uintptr, f16 bool, cols, rows, batch, box int) ([]byte, error) {
	if ptr%16 != 0 || cols%8 != 0 {
		return nil, fmt.Errorf("cuda: tensor map: address %#x or row of %d elements not 16-byte aligned", ptr, cols)
	}
	// CUtensorMap is 64-byte aligned: encode into an aligned window.
	buf := make([]byte, 128+64)
	off := int((64 - uintptr(unsafe.Pointer(&buf[0]))%64) % 64)
	dims := [3]uint64{uint64(cols), uint64(rows), uint64(batch)}
	strides := [2]uint64{uint64(cols) * 2, uint64(rows) * uint64(cols) * 2}
	boxDim := [3]uint32{64, uint32(box), 1}
	elem := [3]uint32{1, 1, 1}
	dtype := uint32(9) // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
	if f16 {
		dtype = 6 // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
	}
	// interleave none, swizzle 128B (3), L2 promotion 256B (3), OOB fill zeros (0).
	code := b.d.tmap.cuTensorMapEncodeTiled(unsafe.Pointer(&buf[off]), dtype, 3, ptr, unsafe.Pointer(&dims[0]),
		unsafe.Pointer(&strides[0]), unsafe.Pointer(&boxDim[0]), unsafe.Pointer(&elem[0]), 0, 3, 3, 0)
	if err := b.d.check("cuTensorMapEncodeTiled", code); err != nil {
		return nil, err
	}
	return buf[off : off+128], nil
}
