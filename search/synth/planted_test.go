package synth

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// plantedTrace writes a planted test's trace: tensors under their keys, each
// encoded in its dtype, then the manifest; open closes the file and opens
// it for the test (closed at its end).
type plantedTrace struct {
	t    *testing.T
	w    *trace.Writer
	path string
	m    *trace.Manifest // the manifest a builder made, for open
}

func newPlanted(t *testing.T, name string) *plantedTrace {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".npz")
	w, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	return &plantedTrace{t: t, w: w, path: path}
}

func (p *plantedTrace) add(key string, dt trace.DType, shape []int, b []byte) {
	p.t.Helper()
	if err := p.w.Add(key, dt, shape, b); err != nil {
		p.t.Fatal(err)
	}
}

// f32 stores v as float32.
func (p *plantedTrace) f32(key string, shape []int, v []float32) {
	p.t.Helper()
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	p.add(key, trace.Float32, shape, b)
}

// bf16 stores v rounded to bfloat16 (round to nearest even).
func (p *plantedTrace) bf16(key string, shape []int, v []float32) {
	p.t.Helper()
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], precision.BF16Bits(x))
	}
	p.add(key, trace.BFloat16, shape, b)
}

// i64 stores v as int64.
func (p *plantedTrace) i64(key string, shape []int, v []int64) {
	p.t.Helper()
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	p.add(key, trace.Int64, shape, b)
}

// open writes the manifest and opens the trace.
func (p *plantedTrace) open(m *trace.Manifest) *trace.Trace {
	p.t.Helper()
	if err := p.w.Close(m); err != nil {
		p.t.Fatal(err)
	}
	tr, err := trace.Open(p.path)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { tr.Close() })
	return tr
}
