//go:build linux

package cuda

import (
	"strings"
	"testing"
)

// TestHopperEnv: the A/B switch takes its four values and unset; any
// other value is refused by name, before a device is looked for.
func TestHopperEnv(t *testing.T) {
	for _, c := range []struct {
		val  string
		off  bool
		geom hopperGeom
		bad  bool
	}{
		{val: ""},
		{val: "0", off: true},
		{val: "cp", geom: hopperCP},
		{val: "ws", geom: hopperWS},
		{val: "wsp", geom: hopperWSP},
		{val: "1", bad: true},
		{val: "WSP", bad: true},
	} {
		t.Setenv("ZFLOW_HOPPER_ATTN", c.val)
		st, err := hopperFromEnv()
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), "ZFLOW_HOPPER_ATTN") {
				t.Errorf("%q: %v, want an error naming the variable", c.val, err)
			}
			if _, err := New(); err == nil || !strings.Contains(err.Error(), "ZFLOW_HOPPER_ATTN") {
				t.Errorf("%q: New() = %v, want the variable's error", c.val, err)
			}
			continue
		}
		if err != nil || st.off != c.off || st.geom != c.geom {
			t.Errorf("%q: %+v, %v; want off %v geom %+v", c.val, st, err, c.off, c.geom)
		}
	}
}
