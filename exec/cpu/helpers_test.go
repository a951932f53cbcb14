package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// up uploads values (rounded to f) or fails the test.
func up(t *testing.T, bk *Backend, f precision.Format, shape []int, v ...float32) exec.Tensor {
	t.Helper()
	x, err := bk.Upload(v, shape, f)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// values downloads t or fails the test.
func values(t *testing.T, bk *Backend, x exec.Tensor, err error) []float32 {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	v, err := bk.Download(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// near compares against float64 answers, relative to max(1, |want|).
func near(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i, w := range want {
		if math.Abs(float64(got[i])-w) > tol*math.Max(1, math.Abs(w)) {
			t.Errorf("%s[%d] = %.9g, want %.9g", name, i, got[i], w)
		}
	}
}

// same requires bit-identical values (NaNs equal to NaNs).
func same(t *testing.T, name string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.9g, want %.9g", name, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values differ", name, bad, len(want))
	}
}

// rnd is a random tensor of the given shape, values N(0, σ²) rounded to f.
func rnd(t *testing.T, bk *Backend, r *rand.Rand, f precision.Format, sigma float64, shape ...int) exec.Tensor {
	t.Helper()
	v := make([]float32, exec.Numel(shape))
	for i := range v {
		v[i] = float32(r.NormFloat64() * sigma)
	}
	return up(t, bk, f, shape, v...)
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// vals is values for a call's two results: vals(t, bk)(bk.Op(...)).
func vals(t *testing.T, bk *Backend) func(exec.Tensor, error) []float32 {
	return func(x exec.Tensor, err error) []float32 {
		t.Helper()
		return values(t, bk, x, err)
	}
}
