//go:build linux

package cuda

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/internal/workers"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// Backend is the CUDA backend. Use New; methods are safe for concurrent
// use (they are serialised).
type Backend struct {
	exec.Fallback // Chunk, Patchify, Unpatchify, RopeTable

	mu      sync.Mutex
	d       *driver
	rtc     *nvrtc
	lt      *cublasLt
	ctx     uintptr
	dev     int32
	devName string
	arch    string // "sm_90"
	sms     int
	smemMax int

	fns    map[string]uintptr // kernel name → function
	pool   pool
	args   *argBuf
	pinner runtime.Pinner
	gemm   gemmState

	tabs     map[string]*Tensor // an epilogue's table (kernels.Epilogue.TableStep) by kernel name
	tableMin int                // the fewest elements a linear's epilogue reads a table for (ZFLOW_EPI_TABLE=0: none)
	// splitJoins: under FusionOn a join region runs as its norms into the
	// joined value then the chain (routeSplit); tests set it.
	splitJoins bool

	exactAttn  bool // every attention through the exact kernel
	flashWarps int  // warps per flash block (4 or 8)
	hopper     hopperState
	fuse       fusionState

	// poison fills every new buffer with 0xFF bytes (NaN in every
	// format) so that tests see an element an op failed to write.
	poison bool
}

var (
	_ exec.Backend = (*Backend)(nil)
	_ exec.Fuser   = (*Backend)(nil)
)

// argBuf holds a launch's kernel arguments; it is pinned for the
// backend's life, so the driver may read it during the call.
type argBuf struct {
	data [8192]byte
	ptrs [32]unsafe.Pointer
}

// New opens the first GPU: it loads the driver, NVRTC and cuBLASLt,
// creates (retains) the device's primary context and compiles the
// kernels. The error wraps exec.ErrUnsupported when a library or a GPU is
// missing.
func New() (*Backend, error) {
	hopper, err := hopperFromEnv()
	if err != nil {
		return nil, err
	}
	d, err := loadDriver()
	if err != nil {
		return nil, exec.Unsupported("cuda", "new", "%v", err)
	}
	if c := d.cuInit(0); c != 0 {
		return nil, exec.Unsupported("cuda", "new", "the driver did not initialise (no usable GPU?): %v", d.check("cuInit", c))
	}
	var count int32
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&count)); err != nil || count == 0 {
		return nil, exec.Unsupported("cuda", "new", "no CUDA device (%v)", err)
	}
	rtc, err := loadNVRTC()
	if err != nil {
		return nil, exec.Unsupported("cuda", "new", "%v", err)
	}
	lt, err := loadCublasLt()
	if err != nil {
		return nil, exec.Unsupported("cuda", "new", "%v", err)
	}
	b := &Backend{d: d, rtc: rtc, lt: lt, fns: map[string]uintptr{}, flashWarps: 4, tableMin: tableMinElems}
	b.exactAttn = os.Getenv("ZFLOW_EXACT_ATTENTION") == "1" // bit-exact runs: no flash kernel
	if w, err := strconv.Atoi(os.Getenv("ZFLOW_FLASH_WARPS")); err == nil && (w == 4 || w == 8) {
		b.flashWarps = w
	}
	b.hopper = hopper
	if os.Getenv("ZFLOW_EPI_TABLE") == "0" {
		b.tableMin = math.MaxInt // A/B: no epilogue reads a table
	}
	b.Fallback = exec.Fallback{B: b}
	b.fuse.mode = fusionFromEnv()
	b.args = new(argBuf)
	b.pinner.Pin(b.args)
	b.gemm.alpha, b.gemm.beta = new(float32), new(float32)
	*b.gemm.alpha = 1
	b.pinner.Pin(b.gemm.alpha)
	b.pinner.Pin(b.gemm.beta)
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&b.dev, 0)); err != nil {
		return nil, err
	}
	name := make([]byte, 256)
	d.cuDeviceGetName(&name[0], int32(len(name)), b.dev)
	b.devName = cString(&name[0])
	var ma, mi, sms, smem int32
	d.cuDeviceGetAttribute(&ma, attrComputeMajor, b.dev)
	d.cuDeviceGetAttribute(&mi, attrComputeMinor, b.dev)
	d.cuDeviceGetAttribute(&sms, attrMultiprocessorCount, b.dev)
	d.cuDeviceGetAttribute(&smem, attrMaxSharedPerBlockOptin, b.dev)
	b.arch, b.sms, b.smemMax = fmt.Sprintf("sm_%d%d", ma, mi), int(sms), int(smem)
	if ma < 8 {
		return nil, exec.Unsupported("cuda", "new", "%s is compute capability %d.%d; the kernels need 8.0 or newer", b.devName, ma, mi)
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&b.ctx, b.dev)); err != nil {
		return nil, err
	}
	err = b.do(func() error {
		if err := b.loadModule("zflow_pointwise", pointwiseSource()+welfordSource, []string{"--fmad=false"}, append(kernels.PointwiseKernels(), normKernels...)); err != nil {
			return err
		}
		if err := b.loadModule("zflow_attention_exact", pointwiseSource()+attentionExactSource, []string{"--fmad=false"}, []string{"zf_attn_exact"}); err != nil {
			return err
		}
		return b.initGemm()
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Name is "cuda".
func (b *Backend) Name() string { return "cuda" }

// Device describes the GPU and the libraries in use.
func (b *Backend) Device() string {
	var v int32
	b.d.cuDriverGetVersion(&v)
	return fmt.Sprintf("%s (%s, %d SMs), driver API %d.%d, NVRTC %s (%s), cuBLASLt %d (%s)", b.devName, b.arch, b.sms,
		v/1000, v%1000/10, b.rtc.version(), b.rtc.path, b.lt.cublasLtGetVersion(), b.lt.path)
}

// do runs fn with the backend locked and its context current on this OS
// thread.
func (b *Backend) do(fn func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.d.check("cuCtxSetCurrent", b.d.cuCtxSetCurrent(b.ctx)); err != nil {
		return err
	}
	return fn()
}

// softRound (ZFLOW_SOFT_ROUND=1, A/B runs) compiles every module with
// ZF_SOFT_ROUND: bf16 rounding by integer steps rather than the
// converter (the same bits; TestRoundBF16Exhaustive).
var softRound = os.Getenv("ZFLOW_SOFT_ROUND") == "1"

// loadModule compiles src with NVRTC for the device and looks up fns.
func (b *Backend) loadModule(name, src string, opts []string, fns []string) error {
	base := []string{"--gpu-architecture=" + b.arch, "--std=c++17", "-default-device"}
	if softRound {
		opts = append(opts, "-DZF_SOFT_ROUND")
	}
	if len(opts) > 0 && strings.HasPrefix(opts[0], "--gpu-architecture=") {
		base = base[1:] // the module names its own target (sm_90a)
	}
	opts = append(base, opts...)
	cubin, err := b.rtc.compile(name, src, opts...)
	if err != nil {
		return err
	}
	var mod uintptr
	if err := b.d.check("cuModuleLoadData "+name, b.d.cuModuleLoadData(&mod, unsafe.Pointer(&cubin[0]))); err != nil {
		return err
	}
	for _, f := range fns {
		var fn uintptr
		if err := b.d.check("cuModuleGetFunction "+f, b.d.cuModuleGetFunction(&fn, mod, f)); err != nil {
			return err
		}
		b.fns[f] = fn
	}
	return nil
}

// Sync waits for all queued work and reports an asynchronous error.
func (b *Backend) Sync() error {
	return b.do(func() error { return b.d.check("cuCtxSynchronize", b.d.cuCtxSynchronize()) })
}

// launch queues kernel fn on grid × block threads with the given
// arguments: uintptr (device pointers), int32, float32 or []byte (a
// parameter block passed by value).
func (b *Backend) launch(fn string, grid, block [3]uint32, shmem uint32, args ...any) error {
	f, ok := b.fns[fn]
	if !ok {
		return fmt.Errorf("cuda: kernel %s not loaded", fn)
	}
	off := 0
	for i, a := range args {
		var src []byte
		align := 4
		switch v := a.(type) {
		case uintptr:
			src, align = unsafe.Slice((*byte)(unsafe.Pointer(&v)), 8), 8
		case int32:
			src = unsafe.Slice((*byte)(unsafe.Pointer(&v)), 4)
		case float32:
			src = unsafe.Slice((*byte)(unsafe.Pointer(&v)), 4)
		case []byte:
			src, align = v, 8
		default:
			return fmt.Errorf("cuda: launch %s: argument %d is a %T", fn, i, a)
		}
		off = (off + align - 1) &^ (align - 1)
		if off+len(src) > len(b.args.data) || i >= len(b.args.ptrs) {
			return fmt.Errorf("cuda: launch %s: arguments too large", fn)
		}
		copy(b.args.data[off:], src)
		b.args.ptrs[i] = unsafe.Pointer(&b.args.data[off])
		off += len(src)
	}
	code := b.d.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, 0, unsafe.Pointer(&b.args.ptrs[0]), 0)
	return b.d.check("launch "+fn, code)
}

// grid1 is a 1-D grid-stride launch shape for n elements.
func (b *Backend) grid1(n int) [3]uint32 {
	blocks := (n + 255) / 256
	blocks = max(1, min(blocks, b.sms*16))
	return [3]uint32{uint32(blocks), 1, 1}
}

var block256 = [3]uint32{256, 1, 1}

// ---- memory ----

// buffer is one device allocation, shared by a tensor and its reshapes.
type buffer struct {
	ptr  uintptr
	size int // the pool class
	refs int
}

// pool keeps freed buffers by size class for reuse.
type pool struct {
	free  map[int][]uintptr
	inUse int
	held  int
}

// class rounds a request up: powers of two below 1 MiB, whole MiB above.
func class(n int) int {
	if n <= 256 {
		return 256
	}
	if n < 1<<20 {
		c := 256
		for c < n {
			c <<= 1
		}
		return c
	}
	return (n + 1<<20 - 1) &^ (1<<20 - 1)
}

func (b *Backend) alloc(n int) (*buffer, error) {
	c := class(n)
	if b.pool.free == nil {
		b.pool.free = map[int][]uintptr{}
	}
	var ptr uintptr
	if l := b.pool.free[c]; len(l) > 0 {
		ptr = l[len(l)-1]
		b.pool.free[c] = l[:len(l)-1]
		b.pool.held -= c
	} else {
		code := b.d.cuMemAlloc(&ptr, uint64(c))
		if code != 0 {
			b.trim() // give cached buffers back and try once more
			code = b.d.cuMemAlloc(&ptr, uint64(c))
		}
		if err := b.d.check(fmt.Sprintf("cuMemAlloc %d bytes", c), code); err != nil {
			return nil, err
		}
	}
	b.pool.inUse += c
	if b.poison {
		if err := b.d.check("cuMemsetD8", b.d.cuMemsetD8(ptr, 0xFF, uint64(c))); err != nil {
			return nil, err
		}
	}
	return &buffer{ptr: ptr, size: c, refs: 1}, nil
}

func (b *Backend) release(buf *buffer) {
	buf.refs--
	if buf.refs > 0 {
		return
	}
	b.pool.free[buf.size] = append(b.pool.free[buf.size], buf.ptr)
	b.pool.inUse -= buf.size
	b.pool.held += buf.size
	buf.ptr = 0
}

// trim frees every cached buffer (work already queued on them has been
// ordered before any later reuse, so a synchronise first is enough).
func (b *Backend) trim() {
	b.d.cuCtxSynchronize()
	for c, l := range b.pool.free {
		for _, p := range l {
			b.d.cuMemFree(p)
		}
		delete(b.pool.free, c)
	}
	b.pool.held = 0
}

// Trim returns the pool's cached buffers to the driver.
func (b *Backend) Trim() { b.do(func() error { b.trim(); return nil }) }

// MemStats reports bytes in live tensors and bytes cached in the pool.
func (b *Backend) MemStats() (inUse, cached int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pool.inUse, b.pool.held
}

// ---- tensors ----

// Tensor is a CUDA tensor: f32 (and f64-format tensors, whose values are
// f32) stored as 4-byte floats, bf16 and f16 as 16-bit patterns.
type Tensor struct {
	shape  []int
	format precision.Format
	buf    *buffer
	off    uintptr // bytes into buf: a contiguous slice shares its source's buffer
	b      *Backend
}

// Shape is the tensor's shape (do not modify).
func (t *Tensor) Shape() []int { return t.shape }

// Format is the storage format.
func (t *Tensor) Format() precision.Format { return t.format }

func (t *Tensor) String() string { return fmt.Sprintf("cuda.Tensor(%v %v)", t.format, t.shape) }

func (t *Tensor) ptr() uintptr { return t.buf.ptr + t.off }

func (t *Tensor) numel() int { return exec.Numel(t.shape) }

// esize is the bytes per element of format f on the device.
func esize(f precision.Format) int {
	if f == precision.BF16 || f == precision.F16 {
		return 2
	}
	return 4
}

func (b *Backend) newTensor(shape []int, f precision.Format) (*Tensor, error) {
	if err := exec.CheckShape(shape); err != nil {
		return nil, err
	}
	if !f.Valid() {
		return nil, fmt.Errorf("exec: cuda: invalid format %v", f)
	}
	buf, err := b.alloc(max(1, exec.Numel(shape)*esize(f)))
	if err != nil {
		return nil, err
	}
	return &Tensor{shape: append([]int(nil), shape...), format: f, buf: buf, b: b}, nil
}

// get checks that t is a live tensor of this backend.
func (b *Backend) get(op, name string, t exec.Tensor) (*Tensor, error) {
	if t == nil {
		return nil, fmt.Errorf("exec: cuda: %s: %s is nil", op, name)
	}
	ct, ok := t.(*Tensor)
	if !ok || ct.b != b {
		return nil, exec.Unsupported(b.Name(), op, "%s is a %T, not a tensor of this cuda backend", name, t)
	}
	if ct.buf == nil || ct.buf.ptr == 0 {
		return nil, fmt.Errorf("exec: cuda: %s: %s was freed", op, name)
	}
	return ct, nil
}

func (b *Backend) opt(op, name string, t exec.Tensor) (*Tensor, error) {
	if t == nil {
		return nil, nil
	}
	return b.get(op, name, t)
}

// Upload rounds data to f on the host and copies it to the device.
func (b *Backend) Upload(data []float32, shape []int, f precision.Format) (exec.Tensor, error) {
	if err := exec.CheckShape(shape); err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	if !f.Valid() {
		return nil, fmt.Errorf("exec: cuda: upload: invalid format %v", f)
	}
	if n := exec.Numel(shape); n != len(data) {
		return nil, fmt.Errorf("exec: cuda: upload: %d values for shape %v (%d elements)", len(data), shape, n)
	}
	host := encode(data, f)
	var out *Tensor
	err := b.do(func() error {
		t, err := b.newTensor(shape, f)
		if err != nil {
			return err
		}
		if len(host) > 0 {
			if err := b.d.check("cuMemcpyHtoD", b.d.cuMemcpyHtoD(t.ptr(), unsafe.Pointer(&host[0]), uint64(len(host)))); err != nil {
				b.release(t.buf)
				return err
			}
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// encode stores values in format f's device layout.
func encode(data []float32, f precision.Format) []byte {
	switch f {
	case precision.BF16, precision.F16:
		h := make([]uint16, len(data))
		conv := precision.BF16Bits
		if f == precision.F16 {
			conv = precision.F16Bits
		}
		parallelFor(len(data), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				h[i] = conv(data[i])
			}
		})
		if len(h) == 0 {
			return nil
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))
	}
	if len(data) == 0 {
		return nil
	}
	// f32 is stored as it is: the copy is synchronous (cuMemcpyHtoD returns
	// once the source is read), so the caller's slice is not kept.
	return unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), 4*len(data))
}

// parallelFor splits [0, n) over the CPUs.
func parallelFor(n int, fn func(lo, hi int)) {
	parts := min(runtime.GOMAXPROCS(0), (n+65535)/65536)
	if parts <= 1 {
		fn(0, n)
		return
	}
	var g workers.Group
	step := (n + parts - 1) / parts
	for lo := 0; lo < n; lo += step {
		hi := min(lo+step, n)
		g.Go(func() { fn(lo, hi) })
	}
	g.Wait()
}

// Download copies t to the host (synchronising) and widens it to f32.
func (b *Backend) Download(t exec.Tensor) ([]float32, error) {
	ct, err := b.get("download", "tensor", t)
	if err != nil {
		return nil, err
	}
	n := ct.numel()
	out := make([]float32, n)
	if n == 0 {
		return out, nil
	}
	if esize(ct.format) == 4 {
		err = b.do(func() error {
			return b.d.check("cuMemcpyDtoH", b.d.cuMemcpyDtoH(unsafe.Pointer(&out[0]), ct.ptr(), uint64(4*n)))
		})
		return out, err
	}
	h := make([]uint16, n)
	if err := b.do(func() error {
		return b.d.check("cuMemcpyDtoH", b.d.cuMemcpyDtoH(unsafe.Pointer(&h[0]), ct.ptr(), uint64(2*n)))
	}); err != nil {
		return nil, err
	}
	if ct.format == precision.BF16 {
		precision.BF16ToF32Slice(out, h)
	} else {
		precision.F16ToF32Slice(out, h)
	}
	return out, nil
}

// Free returns t's buffer to the pool once no reshape of it is live.
func (b *Backend) Free(t exec.Tensor) {
	ct, ok := t.(*Tensor)
	if !ok || ct == nil || ct.buf == nil || ct.b != b {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release(ct.buf)
	ct.buf = nil
}

// ---- movement ----

// Reshape shares x's buffer under a new shape.
func (b *Backend) Reshape(x exec.Tensor, shape []int) (exec.Tensor, error) {
	xt, err := b.get("reshape", "x", x)
	if err != nil {
		return nil, err
	}
	out, err := exec.ResolveShape(xt.shape, shape)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	xt.buf.refs++
	b.mu.Unlock()
	return &Tensor{shape: out, format: xt.format, buf: xt.buf, off: xt.off, b: b}, nil
}

// copyKernel queues a strided copy.
func (b *Backend) copyKernel(dst, src *Tensor, dims, sst, dstSt []int, srcBase, dstBase int) error {
	p, err := kernels.NewCopy(dims, sst, dstSt, srcBase, dstBase, esize(src.format))
	if err != nil {
		return err
	}
	if p.N == 0 {
		return nil
	}
	return b.launch("zf_copy", b.grid1(int(p.N)), block256, 0, dst.ptr(), src.ptr(), kernels.Bytes(&p))
}

// Permute: output axis i is input axis perm[i].
func (b *Backend) Permute(x exec.Tensor, perm []int) (exec.Tensor, error) {
	xt, err := b.get("permute", "x", x)
	if err != nil {
		return nil, err
	}
	outShape, axes, err := exec.PermuteShape(xt.shape, perm)
	if err != nil {
		return nil, err
	}
	r := len(outShape)
	in := exec.Strides(xt.shape)
	sst := make([]int, r)
	for i, a := range axes {
		sst[i] = in[a]
	}
	if d, _, _ := kernels.CollapseAxes(outShape, sst, exec.Strides(outShape)); len(d) > kernels.MaxRank {
		return nil, exec.Unsupported(b.Name(), "permute", "rank %d, %d once contiguous runs are merged (at most %d)", r, len(d), kernels.MaxRank)
	}
	return b.result(outShape, xt.format, func(out *Tensor) error {
		if r == 0 {
			return b.copyKernel(out, xt, []int{1}, []int{0}, []int{0}, 0, 0)
		}
		return b.copyKernel(out, xt, outShape, sst, exec.Strides(outShape), 0, 0)
	})
}

// result allocates an output and runs fill under the lock; the output is
// released if fill fails.
func (b *Backend) result(shape []int, f precision.Format, fill func(out *Tensor) error) (exec.Tensor, error) {
	var out *Tensor
	err := b.do(func() error {
		t, err := b.newTensor(shape, f)
		if err != nil {
			return err
		}
		if err := fill(t); err != nil {
			b.release(t.buf)
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// viewAlign is the byte alignment a view's offset keeps.
const viewAlign = 256

// Slice is x[..., start:end, ...] along axis: a view where the run is
// contiguous and aligned, else a copy.
func (b *Backend) Slice(x exec.Tensor, axis, start, end int) (exec.Tensor, error) {
	xt, err := b.get("slice", "x", x)
	if err != nil {
		return nil, err
	}
	ax, err := exec.Axis(axis, len(xt.shape))
	if err != nil {
		return nil, fmt.Errorf("slice: %w", err)
	}
	dim := xt.shape[ax]
	if start < 0 || end < start || end > dim {
		return nil, fmt.Errorf("exec: slice %v axis %d [%d:%d]: out of range", xt.shape, ax, start, end)
	}
	shape := append([]int(nil), xt.shape...)
	shape[ax] = end - start
	outer, inner := exec.Numel(xt.shape[:ax]), exec.Numel(xt.shape[ax+1:])
	w := end - start
	// A contiguous run (one outer row, or the whole axis) is a view of x's
	// buffer, no copy: the chunks of a modulation vector, the text and
	// image rows of an attention output. Only at offsets cuMemAlloc's
	// alignment keeps (256 bytes), which the kernels' 16-byte accesses,
	// the tensor maps and cuBLASLt's plans assume of every pointer.
	if off := start * inner * esize(xt.format); (outer == 1 || w == dim) && off%viewAlign == 0 {
		b.mu.Lock()
		xt.buf.refs++
		b.mu.Unlock()
		return &Tensor{shape: shape, format: xt.format, buf: xt.buf, off: xt.off + uintptr(off), b: b}, nil
	}
	return b.result(shape, xt.format, func(out *Tensor) error {
		return b.copyKernel(out, xt, []int{outer, w * inner}, []int{dim * inner, 1}, []int{w * inner, 1}, start*inner, 0)
	})
}

// Concat joins xs along axis (one format, which the result keeps).
func (b *Backend) Concat(xs []exec.Tensor, axis int) (exec.Tensor, error) {
	if len(xs) == 0 {
		return nil, fmt.Errorf("exec: concat: no tensors")
	}
	ts := make([]*Tensor, len(xs))
	for i, x := range xs {
		t, err := b.get("concat", fmt.Sprintf("input %d", i), x)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	shapes, formats := make([][]int, len(ts)), make([]precision.Format, len(ts))
	for i, t := range ts {
		shapes[i], formats[i] = t.shape, t.format
	}
	shape, ax, err := exec.ConcatShape(shapes, formats, axis)
	if err != nil {
		return nil, err
	}
	first := ts[0]
	outer, inner := exec.Numel(shape[:ax]), exec.Numel(shape[ax+1:])
	total := shape[ax] * inner
	return b.result(shape, first.format, func(out *Tensor) error {
		pos := 0
		for _, t := range ts {
			w := t.shape[ax] * inner
			if w > 0 && outer == 1 {
				// One contiguous run a piece: the driver's copy, about twice
				// zf_copy's bandwidth at [4608, 3072] (the joined q, k, v).
				es := esize(first.format)
				if err := b.d.check("cuMemcpyDtoD", b.d.cuMemcpyDtoD(out.ptr()+uintptr(pos*es), t.ptr(), uint64(w*es))); err != nil {
					return err
				}
			} else if w > 0 && outer > 0 {
				if err := b.copyKernel(out, t, []int{outer, w}, []int{w, 1}, []int{total, 1}, 0, pos); err != nil {
					return err
				}
			}
			pos += w
		}
		return nil
	})
}

// ---- timing ----

// Event is a point in the backend's stream, for timing.
type Event struct {
	b  *Backend
	ev uintptr
}

// NewEvent creates a timing event.
func (b *Backend) NewEvent() (*Event, error) {
	e := &Event{b: b}
	err := b.do(func() error { return b.d.check("cuEventCreate", b.d.cuEventCreate(&e.ev, 0)) })
	return e, err
}

// Record marks the point after all work queued so far.
func (e *Event) Record() error {
	return e.b.do(func() error { return e.b.d.check("cuEventRecord", e.b.d.cuEventRecord(e.ev, 0)) })
}

// Since waits for e and returns the milliseconds from start to e.
func (e *Event) Since(start *Event) (float64, error) {
	var ms float32
	err := e.b.do(func() error {
		if err := e.b.d.check("cuEventSynchronize", e.b.d.cuEventSynchronize(e.ev)); err != nil {
			return err
		}
		return e.b.d.check("cuEventElapsedTime", e.b.d.cuEventElapsedTime(&ms, start.ev, e.ev))
	})
	return float64(ms), err
}

// Destroy releases the event.
func (e *Event) Destroy() { e.b.do(func() error { e.b.d.cuEventDestroy(e.ev); return nil }) }

// Open is New as an exec.Backend (for --backend selection).
func Open() (exec.Backend, error) {
	b, err := New()
	if err != nil {
		return nil, err
	}
	return b, nil
}

// refuse returns ErrUnsupported when s asks for a rounding point or math
// variant this backend has no kernel for, rather than ignoring it.
func (b *Backend) refuse(op string, s exec.Spec, round exec.Round, math exec.Math) error {
	if s.Round&round != 0 || s.Math&math != 0 {
		return exec.Unsupported(b.Name(), op, "%v has no CUDA kernel yet", exec.Spec{Out: s.Out, Round: s.Round & round, Math: s.Math & math})
	}
	return nil
}
