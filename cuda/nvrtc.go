//go:build linux

package cuda

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// nvrtc is the part of NVRTC the backend uses.
type nvrtc struct {
	nvrtcVersion           func(major, minor *int32) int32
	nvrtcCreateProgram     func(prog *uintptr, src, name string, nHeaders int32, headers, includeNames uintptr) int32
	nvrtcCompileProgram    func(prog uintptr, nOpts int32, opts unsafe.Pointer) int32
	nvrtcGetProgramLogSize func(prog uintptr, n *uint64) int32
	nvrtcGetProgramLog     func(prog uintptr, log unsafe.Pointer) int32
	nvrtcGetCUBINSize      func(prog uintptr, n *uint64) int32
	nvrtcGetCUBIN          func(prog uintptr, cubin unsafe.Pointer) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
	nvrtcGetErrorString    func(code int32) *byte

	path string
}

func loadNVRTC() (*nvrtc, error) {
	names := []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}
	lib, path, err := openLib("NVRTC (libnvrtc.so)", names...)
	if err != nil {
		return nil, err
	}
	// NVRTC dlopens its builtins library by name; load the one beside it
	// first so that a folder outside the loader's path works too.
	if dir := filepath.Dir(path); dir != "." {
		if m, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so.*")); len(m) > 0 {
			for _, p := range m {
				if _, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
					break
				}
			}
		}
	}
	n := &nvrtc{path: path}
	if err := bind(lib, path, n, nil); err != nil {
		return nil, err
	}
	return n, nil
}

// compile builds src for the given architecture (e.g. "sm_90") and returns
// the cubin; the error carries the compiler's log.
func (n *nvrtc) compile(name, src string, opts ...string) ([]byte, error) {
	cubin, _, err := n.compileLog(name, src, opts...)
	return cubin, err
}

// compileLog is compile, and the compiler's log (warnings, and with
// --ptxas-options=-v the registers and spills) also when it succeeds.
func (n *nvrtc) compileLog(name, src string, opts ...string) ([]byte, string, error) {
	var prog uintptr
	if c := n.nvrtcCreateProgram(&prog, src, name, 0, 0, 0); c != 0 {
		return nil, "", fmt.Errorf("cuda: nvrtc: create %s: %s", name, cString(n.nvrtcGetErrorString(c)))
	}
	defer n.nvrtcDestroyProgram(&prog)
	cs := make([][]byte, len(opts))
	ptrs := make([]*byte, len(opts))
	for i, o := range opts {
		cs[i] = append([]byte(o), 0)
		ptrs[i] = &cs[i][0]
	}
	var pin runtime.Pinner
	for _, c := range cs {
		pin.Pin(&c[0])
	}
	var optp unsafe.Pointer
	if len(ptrs) > 0 {
		pin.Pin(&ptrs[0])
		optp = unsafe.Pointer(&ptrs[0])
	}
	code := n.nvrtcCompileProgram(prog, int32(len(opts)), optp)
	pin.Unpin()
	var logSize uint64
	n.nvrtcGetProgramLogSize(prog, &logSize)
	log := ""
	if logSize > 1 {
		buf := make([]byte, logSize)
		n.nvrtcGetProgramLog(prog, unsafe.Pointer(&buf[0]))
		log = strings.TrimRight(string(buf), "\x00\n")
	}
	if code != 0 {
		return nil, log, fmt.Errorf("cuda: nvrtc: compiling %s (%s): %s\n%s", name, strings.Join(opts, " "), cString(n.nvrtcGetErrorString(code)), log)
	}
	var size uint64
	if c := n.nvrtcGetCUBINSize(prog, &size); c != 0 || size == 0 {
		return nil, log, fmt.Errorf("cuda: nvrtc: %s: no cubin (%s)", name, cString(n.nvrtcGetErrorString(c)))
	}
	cubin := make([]byte, size)
	if c := n.nvrtcGetCUBIN(prog, unsafe.Pointer(&cubin[0])); c != 0 {
		return nil, log, fmt.Errorf("cuda: nvrtc: %s: get cubin: %s", name, cString(n.nvrtcGetErrorString(c)))
	}
	return cubin, log, nil
}

func (n *nvrtc) version() string {
	var ma, mi int32
	n.nvrtcVersion(&ma, &mi)
	return fmt.Sprintf("%d.%d", ma, mi)
}
