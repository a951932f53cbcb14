package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestSinkhorn: hand-computed normalisations, the many-step limit doubly
// stochastic, and refusals (a backend without the kernel, bad shapes).
func TestSinkhorn(t *testing.T) {
	bk := New(2)
	cases := []struct {
		name string
		x    []float32
		p    exec.SinkhornParams
		want []float32
	}{
		// [[1 2] [3 4]]: columns sum to 4 and 6
		{"columns", []float32{1, 2, 3, 4}, exec.SinkhornParams{Steps: 1}, []float32{0.25, 2.0 / 6, 0.75, 4.0 / 6}},
		// rows sum to 3 and 7
		{"rows", []float32{1, 2, 3, 4}, exec.SinkhornParams{Steps: 1, RowsFirst: true}, []float32{1.0 / 3, 2.0 / 3, 3.0 / 7, 4.0 / 7}},
		// eps joins each sum: 1/(2+1), 1/(2+1)
		{"eps", []float32{1, 1, 1, 1}, exec.SinkhornParams{Steps: 1, Eps: 1}, []float32{1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3}},
		// columns then rows: [[.25 1/3] [.75 2/3]], rows sum to 7/12 and 17/12
		{"two steps", []float32{1, 2, 3, 4}, exec.SinkhornParams{Steps: 2}, []float32{0.25 / (7.0 / 12), (1.0 / 3) / (7.0 / 12), 0.75 / (17.0 / 12), (2.0 / 3) / (17.0 / 12)}},
	}
	for _, c := range cases {
		got := runSinkhorn(t, bk, c.x, []int{2, 2}, c.p)
		for i := range c.want {
			if math.Abs(float64(got[i]-c.want[i])) > 1e-6 {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
	// many steps: every row and column sums to 1 (a stack of two matrices)
	x := []float32{0.1, 0.7, 0.2, 0.5, 0.4, 0.3, 0.9, 0.1, 0.6, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	got := runSinkhorn(t, bk, x, []int{2, 3, 3}, exec.SinkhornParams{Steps: 200})
	for m := range 2 {
		for i := range 3 {
			var r, c float64
			for j := range 3 {
				r += float64(got[m*9+i*3+j])
				c += float64(got[m*9+j*3+i])
			}
			if math.Abs(r-1) > 1e-5 || math.Abs(c-1) > 1e-5 {
				t.Errorf("matrix %d line %d: row sum %g, column sum %g, want 1", m, i, r, c)
			}
		}
	}
	in, _ := bk.Upload([]float32{1, 2, 3, 4}, []int{2, 2}, precision.F32)
	if _, err := newBasicOnly(bk).Sinkhorn(in, exec.SinkhornParams{Steps: 1}, exec.Out(precision.F32)); !errors.Is(err, exec.ErrUnsupported) || !strings.Contains(err.Error(), "sinkhorn") {
		t.Errorf("a backend without the kernel: %v, want ErrUnsupported naming sinkhorn", err)
	}
	if _, err := bk.Sinkhorn(in, exec.SinkhornParams{}, exec.Out(precision.F32)); err == nil {
		t.Error("0 steps: no error")
	}
	v, _ := bk.Upload([]float32{1, 2}, []int{2}, precision.F32)
	if _, err := bk.Sinkhorn(v, exec.SinkhornParams{Steps: 1}, exec.Out(precision.F32)); err == nil || !strings.Contains(err.Error(), "sinkhorn") {
		t.Errorf("a vector: %v, want an error naming sinkhorn", err)
	}
}

func runSinkhorn(t *testing.T, bk *Backend, x []float32, shape []int, p exec.SinkhornParams) []float32 {
	t.Helper()
	in, err := bk.Upload(x, shape, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	out, err := bk.Sinkhorn(in, p, exec.Out(precision.F32))
	if err != nil {
		t.Fatal(err)
	}
	d, err := bk.Download(out)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestMatMul: hand-computed batched products, bf16 rounding once, and
// refusals.
func TestMatMul(t *testing.T) {
	bk := New(2)
	cases := []struct {
		name          string
		a, b          []float32
		as, bs, shape []int
		f             precision.Format
		want          []float32
	}{
		{"2x2", []float32{1, 2, 3, 4}, []float32{5, 6, 7, 8}, []int{2, 2}, []int{2, 2}, []int{2, 2}, precision.F32, []float32{19, 22, 43, 50}},
		// a weighted sum of three streams per batch entry: [1, 3] @ [3, 2]
		{"streams", []float32{1, 0, 2, 0.5, 0.5, 0}, []float32{1, 2, 3, 4, 5, 6, 1, 1, 2, 2, 3, 3}, []int{2, 1, 3}, []int{2, 3, 2}, []int{2, 1, 2}, precision.F32, []float32{11, 14, 1.5, 1.5}},
		// 1 + 2^-9 is not a bf16: rounded once to 1
		{"bf16", []float32{1, 1.0 / 512}, []float32{1, 1}, []int{1, 2}, []int{2, 1}, []int{1, 1}, precision.BF16, []float32{1}},
	}
	for _, c := range cases {
		a, _ := bk.Upload(c.a, c.as, precision.F32)
		b, _ := bk.Upload(c.b, c.bs, precision.F32)
		out, err := bk.MatMul(a, b, exec.Out(c.f))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, _ := bk.Download(out)
		if !slices.Equal(out.Shape(), c.shape) || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v %v", c.name, out.Shape(), got, c.shape, c.want)
		}
	}
	a, _ := bk.Upload([]float32{1, 2, 3, 4}, []int{2, 2}, precision.F32)
	b, _ := bk.Upload([]float32{1, 2, 3}, []int{3, 1}, precision.F32)
	if _, err := bk.MatMul(a, b, exec.Out(precision.F32)); err == nil || !strings.Contains(err.Error(), "matmul") {
		t.Errorf("inner widths 2 and 3: %v, want an error naming matmul", err)
	}
	// a backend without the kernel composes it from Basic ops with the
	// same arithmetic: bit for bit on random products, f32 and bf16
	basic := newBasicOnly(bk)
	rng := rand.New(rand.NewPCG(5, 27))
	fill := func(n int) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(rng.NormFloat64())
		}
		return d
	}
	ra, _ := bk.Upload(fill(2*3*5*7), []int{2, 3, 5, 7}, precision.BF16)
	rb, _ := bk.Upload(fill(2*3*7*4), []int{2, 3, 7, 4}, precision.BF16)
	for _, f := range []precision.Format{precision.F32, precision.BF16} {
		want, err := bk.MatMul(ra, rb, exec.Out(f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := basic.MatMul(ra, rb, exec.Out(f))
		if err != nil {
			t.Fatalf("composed %s: %v", f, err)
		}
		w, _ := bk.Download(want)
		g, _ := basic.Download(got)
		if !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(g, w) {
			t.Errorf("composed %s differs from the kernel", f)
		}
	}
	if _, err := basic.MatMul(a, b, exec.Out(precision.F32)); err == nil || !strings.Contains(err.Error(), "matmul") {
		t.Errorf("composed, inner widths 2 and 3: %v, want an error naming matmul", err)
	}
}
