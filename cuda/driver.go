//go:build linux

package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// driver is the part of the CUDA driver API the backend uses.
type driver struct {
	cuInit                   func(flags uint32) int32
	cuDriverGetVersion       func(v *int32) int32
	cuDeviceGetCount         func(n *int32) int32
	cuDeviceGet              func(dev *int32, ordinal int32) int32
	cuDeviceGetName          func(name *byte, n int32, dev int32) int32
	cuDeviceGetAttribute     func(v *int32, attr int32, dev int32) int32
	cuDevicePrimaryCtxRetain func(ctx *uintptr, dev int32) int32
	cuCtxSetCurrent          func(ctx uintptr) int32
	cuCtxSynchronize         func() int32
	cuMemAlloc               func(p *uintptr, size uint64) int32
	cuMemFree                func(p uintptr) int32
	cuMemGetInfo             func(free, total *uint64) int32
	cuMemcpyHtoD             func(dst uintptr, src unsafe.Pointer, n uint64) int32
	cuMemcpyDtoH             func(dst unsafe.Pointer, src uintptr, n uint64) int32
	cuMemcpyDtoD             func(dst, src uintptr, n uint64) int32
	cuMemsetD8               func(dst uintptr, v uint8, n uint64) int32
	cuModuleLoadData         func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleGetFunction      func(fn *uintptr, mod uintptr, name string) int32
	cuFuncSetAttribute       func(fn uintptr, attr int32, v int32) int32
	cuLaunchKernel           func(fn uintptr, gx, gy, gz, bx, by, bz, shmem uint32, stream uintptr, params unsafe.Pointer, extra uintptr) int32
	cuEventCreate            func(ev *uintptr, flags uint32) int32
	cuEventRecord            func(ev, stream uintptr) int32
	cuEventSynchronize       func(ev uintptr) int32
	cuEventElapsedTime       func(ms *float32, start, end uintptr) int32
	cuEventDestroy           func(ev uintptr) int32
	cuGetErrorName           func(code int32, s **byte) int32

	tmap *tensorMapAPI // nil where the driver has no tensor maps (before CUDA 12)
}

// tensorMapAPI is the driver's tensor-map encoder (CUDA 12 and later),
// bound apart so that an older driver still loads.
type tensorMapAPI struct {
	cuTensorMapEncodeTiled func(tm unsafe.Pointer, dtype, rank uint32, addr uintptr, dims, strides unsafe.Pointer,
		box, elemStrides unsafe.Pointer, interleave, swizzle, l2, oob uint32) int32
}

// Device attributes (CUdevice_attribute).
const (
	attrMaxSharedPerBlockOptin = 97
	attrMultiprocessorCount    = 16
	attrComputeMajor           = 75
	attrComputeMinor           = 76
	funcAttrMaxDynamicShared   = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
)

// libDirs are searched, after the loader's own path, for the CUDA
// libraries: $ZFLOW_CUDA_LIBS (colon-separated), the toolkit's usual
// places, and the NVIDIA wheels a PyTorch install carries.
func libDirs() []string {
	var dirs []string
	if env := os.Getenv("ZFLOW_CUDA_LIBS"); env != "" {
		dirs = append(dirs, strings.Split(env, ":")...)
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64", "/usr/lib64")
	for _, pat := range []string{
		"/usr/local/cuda-*/lib64",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib",
		"/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
		"/usr/lib/python3*/site-packages/nvidia/*/lib",
	} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	return dirs
}

// openLib dlopens the first of names found, first by name (the loader's
// search), then in libDirs; it returns the handle and the path tried.
func openLib(what string, names ...string) (uintptr, string, error) {
	var tried []string
	for _, n := range names {
		if h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return h, n, nil
		}
		tried = append(tried, n)
	}
	for _, d := range libDirs() {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
				return h, p, nil
			}
			tried = append(tried, p)
		}
	}
	return 0, "", fmt.Errorf("%s not found (tried %s; set ZFLOW_CUDA_LIBS to its folder)", what, strings.Join(names, ", "))
}

// bind registers each function field of fns (a pointer to a struct of
// func fields) from lib; a field's symbol is its name, or the name with
// the suffix given in versioned.
func bind(lib uintptr, libName string, fns any, versioned map[string]string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %v", libName, r)
		}
	}()
	v := reflect.ValueOf(fns).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() != reflect.Func {
			continue
		}
		name := v.Type().Field(i).Name
		sym := name + versioned[name]
		addr, err := purego.Dlsym(lib, sym)
		if err != nil {
			return fmt.Errorf("%s: symbol %s: %w", libName, sym, err)
		}
		f := v.Field(i)
		if f.Kind() != reflect.Func {
			continue
		}
		// The fields are unexported: reach them through their address.
		purego.RegisterFunc(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Interface(), addr)
	}
	return nil
}

// cString copies a NUL-terminated C string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for n < 1<<16 && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return strings.Clone(unsafe.String(p, n))
}

func loadDriver() (*driver, error) {
	lib, name, err := openLib("the CUDA driver library (libcuda.so.1)", "libcuda.so.1", "libcuda.so")
	if err != nil {
		return nil, err
	}
	d := &driver{}
	v2 := map[string]string{"cuMemAlloc": "_v2", "cuMemFree": "_v2", "cuMemGetInfo": "_v2", "cuMemcpyHtoD": "_v2",
		"cuMemcpyDtoH": "_v2", "cuMemcpyDtoD": "_v2", "cuMemsetD8": "_v2", "cuEventDestroy": "_v2"}
	if err := bind(lib, name, d, v2); err != nil {
		return nil, err
	}
	if tm := new(tensorMapAPI); bind(lib, name, tm, nil) == nil {
		d.tmap = tm
	}
	return d, nil
}

// check turns a CUresult into an error naming the call.
func (d *driver) check(what string, code int32) error {
	if code == 0 {
		return nil
	}
	var s *byte
	d.cuGetErrorName(code, &s)
	return fmt.Errorf("cuda: %s: %s (CUresult %d)", what, cString(s), code)
}
