package program

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// TestSSMScanNode: an ssm_scan node, read from a document's node and run
// by the interpreter, gives the backend's SSMScan bit for bit, with the
// skip D and without it (an absent optional input).
func TestSSMScanNode(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	vals := func(k int, lo, span float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(lo + span*r.Float64())
		}
		return v
	}
	const B, L, H, P, G, N = 1, 6, 4, 3, 2, 5
	f := precision.F32
	ins := map[string]*Value{
		"x":  in("x", Input, f, []int{B, L, H, P}, vals(B*L*H*P, -1, 2)...),
		"dt": in("dt", Input, f, []int{B, L, H}, vals(B*L*H, 0.05, 1)...),
		"a":  in("a", Weight, f, []int{H}, vals(H, -3, 2.5)...),
		"bm": in("bm", Input, f, []int{B, L, G, N}, vals(B*L*G*N, -1, 2)...),
		"cm": in("cm", Input, f, []int{B, L, G, N}, vals(B*L*G*N, -1, 2)...),
		"d":  in("d", Weight, f, []int{H}, vals(H, 0.8, 0.4)...),
	}
	for _, c := range []struct {
		name string
		in   []string
	}{
		{"with D", []string{"x", "dt", "a", "bm", "cm", "d"}},
		{"without D", []string{"x", "dt", "a", "bm", "cm", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := nodeFromDoc(&semantics.Precision{Activations: "f32"}, semantics.ProgramNode{Op: "ssm_scan", In: c.in, Out: []string{"y"}})
			if err != nil {
				t.Fatalf("node from document: %v", err)
			}
			if n.Op != OpSSMScan {
				t.Fatalf("read as %v", n.Op)
			}
			got, shape := runOne(t, n, ins)
			b := cpu.New(1)
			ts := make([]exec.Tensor, 6)
			for i, name := range c.in {
				if name == "" {
					continue
				}
				v := ins[name]
				if ts[i], err = b.Upload(v.Data, v.Shape, v.Format); err != nil {
					t.Fatal(err)
				}
			}
			y, err := b.SSMScan(ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], exec.Out(f))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := b.Download(y)
			if !slices.Equal(shape, []int{B, L, H, P}) || !slices.Equal(got, want) {
				t.Errorf("interpreter gave %v %v, backend %v", shape, got, want)
			}
		})
	}
}

// TestSSMScanShapes: shape inference keeps x's shape and refuses what the
// scan cannot read.
func TestSSMScanShapes(t *testing.T) {
	x, dt, a, bc, d := []int{2, 5, 4, 3}, []int{2, 5, 4}, []int{4}, []int{2, 5, 2, 6}, []int{4}
	for _, c := range []struct {
		name string
		in   [][]int
		ok   bool
	}{
		{"all", [][]int{x, dt, a, bc, bc, d}, true},
		{"no D", [][]int{x, dt, a, bc, bc, nil}, true},
		{"five inputs", [][]int{x, dt, a, bc, bc}, true},
		{"four inputs", [][]int{x, dt, a, bc}, false},
		{"x of rank 3", [][]int{{2, 5, 12}, dt, a, bc, bc, d}, false},
		{"dt of another length", [][]int{x, {2, 4, 4}, a, bc, bc, d}, false},
		{"A per head and state", [][]int{x, dt, {4, 6}, bc, bc, d}, true},
		{"A per head and another state width", [][]int{x, dt, {4, 3}, bc, bc, d}, false},
		{"3 groups over 4 heads", [][]int{x, dt, a, {2, 5, 3, 6}, {2, 5, 3, 6}, d}, false},
		{"C not B's shape", [][]int{x, dt, a, bc, {2, 5, 2, 5}, d}, false},
		{"D of 3", [][]int{x, dt, a, bc, bc, {3}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := inferShapes(&Node{Op: OpSSMScan}, c.in)
			if (err == nil) != c.ok {
				t.Fatalf("error %v, want ok = %v", err, c.ok)
			}
			if c.ok && (len(out) != 1 || !slices.Equal(out[0], x)) {
				t.Errorf("shapes %v, want [%v]", out, x)
			}
		})
	}
}

// TestDeltaScanNode: a delta_scan node, read from a document's node and
// run by the interpreter, gives the backend's DeltaScan bit for bit, its
// shape v's.
func TestDeltaScanNode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	vals := func(k int, lo, span float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(lo + span*r.Float64())
		}
		return v
	}
	const B, L, H, V, G, K = 1, 6, 4, 3, 2, 5
	f := precision.F32
	ins := map[string]*Value{
		"q":    in("q", Input, f, []int{B, L, G, K}, vals(B*L*G*K, -0.5, 1)...),
		"k":    in("k", Input, f, []int{B, L, G, K}, vals(B*L*G*K, -0.5, 1)...),
		"v":    in("v", Input, f, []int{B, L, H, V}, vals(B*L*H*V, -1, 2)...),
		"g":    in("g", Input, f, []int{B, L, H}, vals(B*L*H, -2, 2)...),
		"beta": in("beta", Input, f, []int{B, L, H}, vals(B*L*H, 0, 1)...),
	}
	names := []string{"q", "k", "v", "g", "beta"}
	n, err := nodeFromDoc(&semantics.Precision{Activations: "f32"}, semantics.ProgramNode{Op: "delta_scan", In: names, Out: []string{"y"}})
	if err != nil {
		t.Fatalf("node from document: %v", err)
	}
	if n.Op != OpDeltaScan {
		t.Fatalf("read as %v", n.Op)
	}
	got, shape := runOne(t, n, ins)
	b := cpu.New(1)
	ts := make([]exec.Tensor, 5)
	for i, name := range names {
		v := ins[name]
		if ts[i], err = b.Upload(v.Data, v.Shape, v.Format); err != nil {
			t.Fatal(err)
		}
	}
	y, err := b.DeltaScan(ts[0], ts[1], ts[2], ts[3], ts[4], exec.Out(f))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := b.Download(y)
	if !slices.Equal(shape, []int{B, L, H, V}) || !slices.Equal(got, want) {
		t.Errorf("interpreter gave %v %v, backend %v", shape, got, want)
	}
	if _, err := inferShapes(&Node{Op: OpDeltaScan, In: names[:4]}, [][]int{{B, L, G, K}, {B, L, G, K}, {B, L, H, V}, {B, L, H}}); err == nil {
		t.Error("a node of four inputs: want an error")
	}
}
