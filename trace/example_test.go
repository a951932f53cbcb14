package trace_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/zflow/zflow/trace"
)

// A Go port writes the tensors it computed under the reference's keys;
// an empty manifest (no call tree) makes a port trace that zflow diff pairs
// with the reference by key. Close writes the file atomically.
func ExampleCreate() {
	dir, _ := os.MkdirTemp("", "zflow-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ours.safetensors")

	w, err := trace.Create(path) // .npz or .safetensors
	if err != nil {
		panic(err)
	}
	data := make([]byte, 4*3)
	for i, v := range []float32{1, 2, 3} {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	if err := w.Add("s0/transformer.x_embedder/out", trace.Float32, []int{1, 3}, data); err != nil {
		w.Abort()
		panic(err)
	}
	if err := w.Close(&trace.Manifest{}); err != nil { // bf16 entries are named in dtypes by Close
		panic(err)
	}

	tr, err := trace.OpenPort(path)
	if err != nil {
		panic(err)
	}
	defer tr.Close()
	t, _ := tr.Tensor("s0/transformer.x_embedder/out")
	v, _ := t.Float32()
	fmt.Println(tr.Bare(), tr.Keys(), t.Shape, v)
	// Output: true [s0/transformer.x_embedder/out] [1 3] [1 2 3]
}
