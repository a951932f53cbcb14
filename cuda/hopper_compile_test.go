//go:build linux

package cuda

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
)

// hopperVariants are the Hopper kernel variants the tests build: every
// option alone, at both head dims and formats, and both stage counts.
func hopperVariants() []struct {
	d  int
	g  hopperGeom
	ff flashFlags
} {
	var vs []struct {
		d  int
		g  hopperGeom
		ff flashFlags
	}
	add := func(d, st int, ff flashFlags) {
		g := hopperCP
		g.st = st
		vs = append(vs, struct {
			d  int
			g  hopperGeom
			ff flashFlags
		}{d, g, ff})
	}
	for _, d := range []int{128, 64} {
		for _, f16 := range []bool{false, true} {
			for _, m := range []exec.MaskKind{exec.MaskNone, exec.MaskCausal, exec.MaskExplicit} {
				add(d, 2, flashFlags{f16: f16, mask: m})
			}
		}
	}
	add(128, 3, flashFlags{})
	add(128, 3, flashFlags{mask: exec.MaskCausal})
	add(128, 2, flashFlags{round: true, cap: true, alibi: true, bias: true, mask: exec.MaskCausal})
	for _, g := range []hopperGeom{{wg: 1, bc: 64, st: 2}, {wg: 2, bc: 64, st: 2}} {
		vs = append(vs, struct {
			d  int
			g  hopperGeom
			ff flashFlags
		}{128, g, flashFlags{}})
	}
	// The warp-specialised kernel: every option alone at d 128, both head
	// dims, with and without turns, two and three stages.
	for _, d := range []int{128, 64} {
		for _, m := range []exec.MaskKind{exec.MaskNone, exec.MaskCausal, exec.MaskExplicit} {
			add2 := func(g hopperGeom, ff flashFlags) {
				vs = append(vs, struct {
					d  int
					g  hopperGeom
					ff flashFlags
				}{d, g, ff})
			}
			add2(hopperWS, flashFlags{mask: m})
			if d == 128 {
				add2(hopperWS, flashFlags{f16: true, mask: m})
				add2(hopperGeom{wg: 2, bc: 128, st: 2, ws: true}, flashFlags{mask: m})
				add2(hopperGeom{wg: 2, bc: 128, st: 3, ws: true, pp: true}, flashFlags{mask: m})
				add2(hopperWSP, flashFlags{mask: m})
				add2(hopperGeom{wg: 2, bc: 176, st: 2, ws: true, pp: true, persist: true}, flashFlags{mask: m})
			}
		}
	}
	vs = append(vs, struct {
		d  int
		g  hopperGeom
		ff flashFlags
	}{128, hopperWS, flashFlags{round: true, cap: true, alibi: true, bias: true, mask: exec.MaskCausal}})

	return vs
}

// TestHopperSourceCompiles builds the Hopper attention kernel for sm_90a
// with NVRTC alone (no GPU needed; skipped without NVRTC) and checks that
// ptxas neither spills nor serialises the warpgroup MMAs; it logs each
// variant's registers.
func TestHopperSourceCompiles(t *testing.T) {
	rtc, err := loadNVRTC()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	t.Logf("NVRTC %s (%s)", rtc.version(), rtc.path)
	regs := regexp.MustCompile(`Used (\d+) registers`)
	spills := regexp.MustCompile(`(\d+) bytes spill stores`)
	for _, v := range hopperVariants() {
		opts := append(hopperOptions(v.d, v.g, v.ff), "--std=c++17", "-default-device", "--ptxas-options=-v")
		name := fmt.Sprintf("d%d %+v %+v", v.d, v.g, v.ff)
		_, log, err := rtc.compileLog("hopper", hopperModuleSource(v.g.ws), opts...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		r := "?"
		if m := regs.FindStringSubmatch(log); m != nil {
			r = m[1]
		}
		t.Logf("%s: %s registers", name, r)
		for _, m := range spills.FindAllStringSubmatch(log, -1) {
			if m[1] != "0" {
				t.Errorf("%s: ptxas spills (%s bytes of spill stores):\n%s", name, m[1], log)
			}
		}
		if strings.Contains(log, "serialized") || strings.Contains(log, "C7508") {
			t.Errorf("%s: ptxas serialises the warpgroup MMAs:\n%s", name, log)
		}
		if testing.Verbose() && strings.Contains(log, "warning") {
			t.Logf("%s log:\n%s", name, log)
		}
	}
}
