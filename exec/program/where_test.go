package program

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestWhereHost: a where cond > 0, b elsewhere, each broadcast (a [1]
// scalar, b a row), NaN in cond picks b.
func TestWhereHost(t *testing.T) {
	b := cpu.New(1)
	up := func(v []float32, shape ...int) exec.Tensor {
		x, err := b.Upload(v, shape, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	nan := float32(math.NaN())
	cond := up([]float32{1, -1, 0, nan, 2, -3}, 2, 3)
	a := up([]float32{7}, 1)
	bb := up([]float32{10, 20, 30}, 3)
	y, err := whereHost(b, cond, a, bb, exec.Out(precision.F32))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := b.Download(y)
	if want := []float32{7, 20, 30, 10, 7, 30}; !slices.Equal(got, want) || !slices.Equal(y.Shape(), []int{2, 3}) {
		t.Errorf("where: %v %v, want %v [2 3]", got, y.Shape(), want)
	}
	if _, err := whereHost(b, cond, up([]float32{1, 2}, 2), bb, exec.Out(precision.F32)); err == nil {
		t.Error("where of [2, 3] and [2]: no error")
	}
}
