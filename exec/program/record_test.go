package program

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// TestRecorderKeysLikeReference: a value is written under the key the
// reference stores it by (a one-pass trace keeps its step-0 calls under
// "pre/"), so that a diff pairs the two; without a reference entry it
// keeps its step's key. The manifest's calls name the keys written.
func TestRecorderKeysLikeReference(t *testing.T) {
	b := cpu.New(1)
	stored := map[string]string{"s0/m.a/out": "pre/m.a/out"} // what the reference resolves, and where it keeps it
	rc := &Recorder{B: b, Like: func(key string) (trace.Info, bool) {
		k, ok := stored[key]
		return trace.Info{Key: k, Shape: []int{2}}, ok
	}}
	for _, mod := range []string{"m.a", "m.b"} {
		x, err := b.Upload([]float32{1, 2}, []int{2}, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Observe(0, Tap{Module: mod, Port: "out"}, x); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "ours.npz")
	if err := rc.Write(path, nil, map[string]any{"framework": "test"}); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	keys := tr.Keys()
	for _, want := range []string{"pre/m.a/out", "s0/m.b/out"} {
		if !slices.Contains(keys, want) {
			t.Errorf("keys %v lack %s", keys, want)
		}
	}
	var ports []string
	for _, c := range tr.Manifest.Calls {
		for _, p := range c.Tensors {
			ports = append(ports, p.Key)
		}
	}
	if !slices.Equal(ports, []string{"pre/m.a/out", "s0/m.b/out"}) {
		t.Errorf("manifest ports %v, want the keys written", ports)
	}
}
