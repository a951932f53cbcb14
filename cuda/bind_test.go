//go:build linux

package cuda

import (
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

// TestBind checks the symbol binding on the C library (no GPU needed).
func TestBind(t *testing.T) {
	lib, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	var fns struct {
		abs    func(v int32) int32
		strlen func(s string) uint64
		path   string
	}
	if err := bind(lib, "libc", &fns, nil); err != nil {
		t.Fatal(err)
	}
	if got := fns.abs(-7); got != 7 {
		t.Errorf("abs(-7) = %d", got)
	}
	if got := fns.strlen("zflow"); got != 5 {
		t.Errorf("strlen = %d", got)
	}
	if err := bind(lib, "libc", &struct{ noSuchSymbolHere func() }{}, nil); err == nil {
		t.Error("bind found a symbol that does not exist")
	}
}

// TestFlashDefinesAreFree checks that the flash kernel's compile-time
// switches are not names the pointwise source already defines (a clash
// once made bf16 kernels run f16 MMAs).
func TestFlashDefinesAreFree(t *testing.T) {
	src := pointwiseSource()
	for _, d := range []string{"ZF_D", "ZF_NW", "ZF_HALF_IN", "ZF_MASK", "ZF_ROUND"} {
		if strings.Contains(src, "#define "+d+" ") {
			t.Errorf("the pointwise source defines %s, a flash kernel switch", d)
		}
		if !strings.Contains(flashSource, "#ifndef "+d+"\n") {
			t.Errorf("the flash source has no default for %s", d)
		}
	}
	for _, d := range []string{"ZF_D", "ZF_HALF_IN", "ZF_MASK", "ZF_ROUND", "ZF_CAP", "ZF_ALIBI", "ZF_BIAS", "ZF_WG", "ZF_HBC", "ZF_ST", "ZF_WT"} {
		if strings.Contains(src+flashHelpers, "#define "+d+" ") {
			t.Errorf("the pointwise source or the flash helpers define %s, a Hopper kernel switch", d)
		}
		if d != "ZF_WT" && !strings.Contains(hopperSource, "#ifndef "+d+"\n") {
			t.Errorf("the Hopper source has no default for %s", d)
		}
	}
}
