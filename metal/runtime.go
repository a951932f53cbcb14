//go:build darwin

package metal

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
)

// MTLSize is Metal's grid and threadgroup size (passed by value).
type mtlSize struct{ W, H, D uint64 }

var (
	selOnce sync.Once
	sel     struct {
		new, release, retain, stringWithUTF8, utf8String, localizedDescription,
		newCommandQueue, newLibrary, newFunction, newPipeline, newBuffer, contents,
		commandBuffer, computeEncoder, setPipeline, setBuffer, setBytes, dispatch, dispatchGroups,
		endEncoding, commit, waitUntilCompleted, setFastMath, maxThreads, name, errorSel objc.SEL
	}
)

func initSelectors() {
	r := objc.RegisterName
	s := &sel
	s.new, s.release, s.retain = r("new"), r("release"), r("retain")
	s.stringWithUTF8, s.utf8String = r("stringWithUTF8String:"), r("UTF8String")
	s.localizedDescription = r("localizedDescription")
	s.newCommandQueue = r("newCommandQueue")
	s.newLibrary = r("newLibraryWithSource:options:error:")
	s.newFunction = r("newFunctionWithName:")
	s.newPipeline = r("newComputePipelineStateWithFunction:error:")
	s.newBuffer = r("newBufferWithLength:options:")
	s.contents = r("contents")
	s.commandBuffer = r("commandBuffer")
	s.computeEncoder = r("computeCommandEncoder")
	s.setPipeline = r("setComputePipelineState:")
	s.setBuffer = r("setBuffer:offset:atIndex:")
	s.setBytes = r("setBytes:length:atIndex:")
	s.dispatch = r("dispatchThreads:threadsPerThreadgroup:")
	s.dispatchGroups = r("dispatchThreadgroups:threadsPerThreadgroup:")
	s.endEncoding, s.commit, s.waitUntilCompleted = r("endEncoding"), r("commit"), r("waitUntilCompleted")
	s.setFastMath = r("setFastMathEnabled:")
	s.maxThreads = r("maxTotalThreadsPerThreadgroup")
	s.name = r("name")
	s.errorSel = r("error")
}

// nsString makes an autoreleased NSString.
func nsString(s string) objc.ID {
	return objc.ID(objc.GetClass("NSString")).Send(sel.stringWithUTF8, s)
}

// goString reads an NSString.
func goString(id objc.ID) string {
	if id == 0 {
		return ""
	}
	p := objc.Send[*byte](id, sel.utf8String)
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return strings.Clone(unsafe.String(p, n))
}

func nsError(err objc.ID) string {
	if err == 0 {
		return "unknown error"
	}
	return goString(err.Send(sel.localizedDescription))
}

// autorelease runs fn inside an autorelease pool (the command buffers and
// encoders Metal hands out are autoreleased).
func autorelease(fn func() error) error {
	pool := objc.ID(objc.GetClass("NSAutoreleasePool")).Send(sel.new)
	defer pool.Send(objc.RegisterName("drain"))
	return fn()
}

// device is the Metal runtime state of a Backend.
type device struct {
	dev, queue objc.ID
	name       string
	pipes      map[string]objc.ID
	maxThreads map[string]uint64
	last       objc.ID // the last committed command buffer (retained)
}

func openDevice() (*device, error) {
	lib, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, exec.Unsupported("metal", "new", "Metal.framework: %v", err)
	}
	var create func() objc.ID
	purego.RegisterLibFunc(&create, lib, "MTLCreateSystemDefaultDevice")
	selOnce.Do(initSelectors)
	d := &device{pipes: map[string]objc.ID{}, maxThreads: map[string]uint64{}}
	if d.dev = create(); d.dev == 0 {
		return nil, exec.Unsupported("metal", "new", "no Metal device")
	}
	d.name = goString(d.dev.Send(sel.name))
	if d.queue = d.dev.Send(sel.newCommandQueue); d.queue == 0 {
		return nil, fmt.Errorf("metal: newCommandQueue failed on %s", d.name)
	}
	src, err := kernels.Render(kernels.MSL)
	if err != nil {
		return nil, err
	}
	err = autorelease(func() error {
		opts := objc.ID(objc.GetClass("MTLCompileOptions")).Send(sel.new)
		defer opts.Send(sel.release)
		opts.Send(sel.setFastMath, false) // IEEE division and no contraction of the source's order
		var errID objc.ID
		library := d.dev.Send(sel.newLibrary, nsString(src), opts, unsafe.Pointer(&errID))
		if library == 0 {
			return fmt.Errorf("metal: compiling the MSL rendering: %s", nsError(errID))
		}
		for _, k := range kernels.Kernels() {
			fn := library.Send(sel.newFunction, nsString(k))
			if fn == 0 {
				return fmt.Errorf("metal: no function %s in the library", k)
			}
			var perr objc.ID
			pso := d.dev.Send(sel.newPipeline, fn, unsafe.Pointer(&perr))
			fn.Send(sel.release)
			if pso == 0 {
				return fmt.Errorf("metal: pipeline %s: %s", k, nsError(perr))
			}
			d.pipes[k] = pso
			d.maxThreads[k] = objc.Send[uint64](pso, sel.maxThreads)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// buffer is a shared-storage MTLBuffer, shared by a tensor and its reshapes.
type buffer struct {
	id   objc.ID
	size int
	refs int
}

func (d *device) alloc(n int) (*buffer, error) {
	id := d.dev.Send(sel.newBuffer, uint64(max(n, 16)), uint64(0)) // MTLResourceStorageModeShared
	if id == 0 {
		return nil, fmt.Errorf("metal: newBufferWithLength %d failed", n)
	}
	return &buffer{id: id, size: n, refs: 1}, nil
}

func (b *buffer) bytes() []byte {
	p := objc.Send[unsafe.Pointer](b.id, sel.contents)
	return unsafe.Slice((*byte)(p), b.size)
}

// arg is one kernel argument: a buffer or a parameter block.
type arg struct {
	buf    *buffer
	params []byte
}

// dispatch encodes kernel k over n threads (grid-stride kernels) in its own
// command buffer and commits it; work runs in order on the one queue.
func (d *device) dispatch(k string, n int, args ...arg) error {
	if n <= 0 {
		return nil
	}
	return d.encode(k, func(enc objc.ID) {
		tg := min(d.maxThreads[k], 256)
		enc.Send(sel.dispatch, mtlSize{uint64(n), 1, 1}, mtlSize{tg, 1, 1})
	}, args)
}

// dispatchGroups encodes cooperative kernel k (tiles.zf) as groups
// threadgroups of threads threads each: the kernel's barriers and tiles
// assume exactly that many, so a pipeline that cannot run them (its
// maxTotalThreadsPerThreadgroup, lowered by register use) is an error,
// not a smaller group.
func (d *device) dispatchGroups(k string, groups, threads int, args ...arg) error {
	if groups <= 0 {
		return nil
	}
	if mt, ok := d.maxThreads[k]; ok && mt < uint64(threads) {
		return exec.Unsupported("metal", k, "the pipeline runs at most %d threads a threadgroup on %s; the kernel needs %d", mt, d.name, threads)
	}
	return d.encode(k, func(enc objc.ID) {
		enc.Send(sel.dispatchGroups, mtlSize{uint64(groups), 1, 1}, mtlSize{uint64(threads), 1, 1})
	}, args)
}

// encode binds args to kernel k's pipeline, lets grid encode the dispatch,
// and commits the command buffer.
func (d *device) encode(k string, grid func(enc objc.ID), args []arg) error {
	pso, ok := d.pipes[k]
	if !ok {
		return fmt.Errorf("metal: kernel %s not built", k)
	}
	return autorelease(func() error {
		cb := d.queue.Send(sel.commandBuffer)
		enc := cb.Send(sel.computeEncoder)
		enc.Send(sel.setPipeline, pso)
		for i, a := range args {
			if a.buf != nil {
				enc.Send(sel.setBuffer, a.buf.id, uint64(0), uint64(i))
			} else {
				enc.Send(sel.setBytes, unsafe.Pointer(&a.params[0]), uint64(len(a.params)), uint64(i))
			}
		}
		grid(enc)
		enc.Send(sel.endEncoding)
		cb.Send(sel.commit)
		if d.last != 0 {
			d.last.Send(sel.release)
		}
		d.last = cb.Send(sel.retain)
		return nil
	})
}

// wait blocks until the last committed command buffer has completed.
func (d *device) wait() error {
	if d.last == 0 {
		return nil
	}
	d.last.Send(sel.waitUntilCompleted)
	if e := d.last.Send(sel.errorSel); e != 0 {
		return fmt.Errorf("metal: command buffer failed: %s", nsError(e))
	}
	return nil
}
