package program

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// refConv2D is torch's conv2d of stride 1 written out: zeros padded on
// every side, group q's channels through its filters, sums in f64.
func refConv2D(x, w, bias []float32, xs, ws []int, pad, groups int) []float32 {
	B, C, H, W := xs[0], xs[1], xs[2], xs[3]
	O, cg, kh, kw := ws[0], ws[1], ws[2], ws[3]
	oh, ow := H+2*pad-kh+1, W+2*pad-kw+1
	og := O / groups
	out := make([]float32, B*O*oh*ow)
	for b := range B {
		for o := range O {
			q := o / og
			for i := range oh {
				for j := range ow {
					var sum float64
					if bias != nil {
						sum = float64(bias[o])
					}
					for c := range cg {
						ci := q*cg + c
						for a := range kh {
							for d := range kw {
								y, z := i+a-pad, j+d-pad
								if y < 0 || y >= H || z < 0 || z >= W {
									continue
								}
								sum += float64(x[((b*C+ci)*H+y)*W+z]) * float64(w[((o*cg+c)*kh+a)*kw+d])
							}
						}
					}
					out[((b*O+o)*oh+i)*ow+j] = float32(sum)
				}
			}
		}
	}
	return out
}

// TestGroupedConv2D: a convolution of any group count dividing the
// channels and the filters (4 groups of a 1-row image: a grouped conv1d;
// depthwise with two filters per channel) matches the direct sum, and a
// count that does not divide them is refused.
func TestGroupedConv2D(t *testing.T) {
	f32 := precision.F32
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	cases := []struct {
		x, w       []int
		pad, group int
	}{
		{[]int{1, 8, 1, 11}, []int{8, 2, 1, 4}, 2, 4}, // conv1d as a 1-row image, even kernel
		{[]int{2, 6, 5, 5}, []int{9, 2, 3, 3}, 1, 3},  // more filters than channels
		{[]int{1, 4, 4, 4}, []int{8, 1, 3, 3}, 1, 4},  // depthwise, two filters per channel
		{[]int{1, 4, 3, 3}, []int{4, 4, 3, 3}, 1, 1},  // groups 1
		{[]int{1, 4, 3, 3}, []int{4, 1, 3, 3}, 0, 4},  // depthwise
		{[]int{1, 6, 2, 7}, []int{6, 3, 1, 3}, 1, 2},  // two groups, bias-free below
	}
	for k, c := range cases {
		name := fmt.Sprintf("x%v w%v groups %d", c.x, c.w, c.group)
		x, w := fill(exec.Numel(c.x)), fill(exec.Numel(c.w))
		var bias []float32
		ins := map[string]*Value{"x": in("x", Input, f32, c.x, x...), "w": in("w", Input, f32, c.w, w...)}
		names := []string{"x", "w", ""}
		if k != len(cases)-1 {
			bias = fill(c.w[0])
			ins["b"] = in("b", Input, f32, []int{c.w[0]}, bias...)
			names[2] = "b"
		}
		got, _ := runOne(t, Node{Op: OpConv2D, In: names, Spec: exec.Out(f32), Attrs: Attrs{Conv: ConvParams{Pad: c.pad, Groups: c.group}}}, ins)
		want := refConv2D(x, w, bias, c.x, c.w, c.pad, c.group)
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
		}
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%s: [%d] = %v, want %v", name, i, got[i], want[i])
			}
		}
	}
	if _, err := convShape([]int{1, 6, 4, 4}, []int{6, 2, 3, 3}, ConvParams{Groups: 4}); err == nil {
		t.Error("4 groups of 6 channels: no error")
	}
}
