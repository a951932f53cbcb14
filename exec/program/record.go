package program

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// Recorder keeps every tapped value a run observes, to write them as a
// trace whose keys and calls are named like the reference's.
type Recorder struct {
	B exec.Backend
	// Like, when set, gives the reference's entry of a key: its shape, so
	// a value the reference holds heads first ([B, H, S, D] where ours is
	// [B, S, H·D]) is written in the reference's layout, and the key it is
	// stored under (a one-pass trace keeps its step-0 calls under "pre/"),
	// so that the value pairs with the reference's in a diff.
	Like    func(key string) (trace.Info, bool)
	entries []recorded
	seen    map[string]bool
}

type recorded struct {
	step         int
	module, port string
	shape        []int
	format       precision.Format
	data         []float32
}

// Observe is a Hooks.Observe that downloads and keeps the value (once per
// key).
func (rc *Recorder) Observe(step int, tp Tap, t exec.Tensor) error {
	key := tp.Key(step)
	if rc.seen == nil {
		rc.seen = map[string]bool{}
	}
	if rc.seen[key] {
		return nil
	}
	data, err := rc.B.Download(t)
	if err != nil {
		return err
	}
	rc.seen[key] = true
	rc.entries = append(rc.entries, recorded{step: step, module: tp.Module, port: tp.Port,
		shape: slices.Clone(t.Shape()), format: t.Format(), data: data})
	return nil
}

// Add keeps a host tensor as the value at tap tp in step (once per key),
// for values a run makes outside Observe (before teacher forcing replaces
// them, for instance).
func (rc *Recorder) Add(step int, tp Tap, t HostTensor) {
	key := tp.Key(step)
	if rc.seen == nil {
		rc.seen = map[string]bool{}
	}
	if rc.seen[key] {
		return
	}
	rc.seen[key] = true
	rc.entries = append(rc.entries, recorded{step: step, module: tp.Module, port: tp.Port,
		shape: slices.Clone(t.Shape), format: t.Format, data: t.Data})
}

// Len is the number of recorded tensors.
func (rc *Recorder) Len() int { return len(rc.entries) }

// HostTensor is a tensor on the host: values, shape and the format they
// are exactly values of.
type HostTensor struct {
	Data   []float32
	Shape  []int
	Format precision.Format
}

// Write writes the recorded values, plus outputs (by name), as a trace v1
// at path, atomically. Calls are one per module and step, in the order
// their first tensor was seen, each the child of the nearest earlier call
// of an enclosing module.
func (rc *Recorder) Write(path string, outputs map[string]HostTensor, producer map[string]any) error {
	w, err := trace.Create(path)
	if err != nil {
		return err
	}
	m := &trace.Manifest{Producer: producer, Outputs: map[string]string{}}
	type callKey struct {
		step   int
		module string
	}
	index := map[callKey]int{}
	for _, e := range rc.entries {
		key := Tap{Module: e.module, Port: e.port}.Key(e.step)
		t := HostTensor{Data: e.data, Shape: e.shape, Format: e.format}
		if rc.Like != nil {
			info, ok := rc.Like(key)
			if ok && info.Key != "" {
				key = info.Key
			}
			switch ref := info.Shape; {
			case !ok || slices.Equal(ref, e.shape):
			case SameLayout(ref, e.shape): // the same elements in order: a reshape
				t.Shape = slices.Clone(ref)
			case headsFirst(ref, e.shape):
				t = HostTensor{Data: headsFirstOrder(e.data, ref), Shape: slices.Clone(ref), Format: e.format}
			}
		}
		if err := addTensor(w, key, t); err != nil {
			w.Abort()
			return err
		}
		ck := callKey{e.step, e.module}
		i, ok := index[ck]
		if !ok {
			step := e.step
			c := trace.Call{ID: len(m.Calls), Step: &step, Module: e.module}
			for j := len(m.Calls) - 1; j >= 0; j-- {
				pc := m.Calls[j]
				if *pc.Step == e.step && strings.HasPrefix(e.module, pc.Module+".") {
					id := pc.ID
					c.Parent = &id
					break
				}
			}
			m.Calls = append(m.Calls, c)
			i = len(m.Calls) - 1
			index[ck] = i
		}
		m.Calls[i].Tensors = append(m.Calls[i].Tensors, trace.Port{Name: e.port, Key: key})
	}
	for _, name := range sortedNames(outputs) {
		key := "output/" + name
		if err := addTensor(w, key, outputs[name]); err != nil {
			w.Abort()
			return err
		}
		m.Outputs[name] = key
	}
	return w.Close(m)
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// addTensor writes one host tensor in its format's dtype.
func addTensor(w *trace.Writer, key string, t HostTensor) error {
	var dt trace.DType
	var b []byte
	switch t.Format {
	case precision.BF16, precision.F16:
		dt = trace.BFloat16
		bits := precision.BF16Bits
		if t.Format == precision.F16 {
			dt, bits = trace.Float16, precision.F16Bits
		}
		b = make([]byte, 2*len(t.Data))
		for i, x := range t.Data {
			binary.LittleEndian.PutUint16(b[2*i:], bits(x))
		}
	case precision.F32, precision.F64:
		dt = trace.Float32
		b = make([]byte, 4*len(t.Data))
		for i, x := range t.Data {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
	default:
		return fmt.Errorf("%s: format %v", key, t.Format)
	}
	return w.Add(key, dt, t.Shape, b)
}
