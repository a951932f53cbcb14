package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// benchTrace writes n tensors of per bytes each (f32, or bf16) and returns
// the path; sub-benchmarks share it through b.TempDir of the parent.
func benchTrace(b *testing.B, n int, per int, dt DType) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.npz")
	w, err := Create(path)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, per)
	for i := range data {
		data[i] = byte(i * 7)
	}
	m := &Manifest{Params: map[string]string{}}
	for i := range n {
		key := fmt.Sprintf("s0/m.%d/out", i)
		if err := w.Add(key, dt, []int{per / dt.Size()}, data); err != nil {
			b.Fatal(err)
		}
		m.Calls = append(m.Calls, Call{ID: i, Step: new(0), Module: fmt.Sprintf("m.%d", i), Tensors: Ports{{"out", key}}})
	}
	if err := w.Close(m); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkOpen: opening 2,000 tensors (128 MiB) and validating the
// manifest, against reading the same file whole (the baseline: what a
// reader that loads tensor data would at least cost).
func BenchmarkOpen(b *testing.B) {
	path := benchTrace(b, 2000, 64<<10, Float32)
	st, _ := os.Stat(path)
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			tr, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			tr.Close()
		}
	})
	b.Run("baseline-readfile", func(b *testing.B) {
		b.SetBytes(st.Size())
		for b.Loop() {
			if _, err := os.ReadFile(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTensor: getting a 64 MiB tensor as []float32 — a view for
// stored f32, a widening for bf16 — against copying the same bytes.
func BenchmarkTensor(b *testing.B) {
	const size = 64 << 20
	for _, tc := range []struct {
		name string
		dt   DType
	}{{"f32-view", Float32}, {"bf16-to-f32", BFloat16}} {
		path := benchTrace(b, 1, size, tc.dt)
		tr, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		ten, _ := tr.Tensor("s0/m.0/out")
		// Fault the pages in once so every case measures memory, not disk.
		dst := make([]byte, size)
		copy(dst, ten.Bytes())
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(size)
			var out []float32
			if tc.dt == BFloat16 {
				out = make([]float32, ten.Len())
			}
			for b.Loop() {
				if tc.dt == Float32 {
					v, ok := ten.Float32View()
					if !ok {
						b.Fatal("no view")
					}
					_ = v
					continue
				}
				if err := ten.ReadFloat32(out, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"-baseline-copy", func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				copy(dst, ten.Bytes())
			}
		})
		tr.Close()
	}
}

// BenchmarkManyCalls: opening a trace of 10^5 calls on one tensor (issue
// 12, item 10). It reports the heap still held
// once the trace is open and the manifest bytes it was decoded from, per
// call: the manifest is decoded as it streams, so the first is the calls'
// own size, not their JSON's plus a copy.
func BenchmarkManyCalls(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "calls.npz")
	w, err := Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Add("s0/m/out", Float32, []int{4}, make([]byte, 16)); err != nil {
		b.Fatal(err)
	}
	m := &Manifest{Params: map[string]string{}}
	for i := range n {
		c := Call{ID: i, Step: new(0), Module: fmt.Sprintf("m.%d", i), Type: "Module", Tensors: Ports{{"out", "s0/m/out"}}}
		if i > 0 {
			c.Parent = new(0)
		}
		m.Calls = append(m.Calls, c)
	}
	if err := w.Close(m); err != nil {
		b.Fatal(err)
	}
	doc, _ := json.Marshal(m)
	m = nil
	var live uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tr, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		live = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(tr)
		tr.Close()
	}
	b.ReportMetric(float64(live)/n, "live-B/call")
	b.ReportMetric(float64(len(doc))/n, "json-B/call")
}
