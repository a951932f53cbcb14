package program

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// refConv2D is torch's conv2d written out: zeros padded on every side,
// group q's channels through its filters at every stride-th position, the
// taps p.Dilation apart, sums in f64.
func refConv2D(x, w, bias []float32, xs, ws []int, groups int, p ConvParams) []float32 {
	ph, pw, sh, sw := p.axes()
	B, C, H, W := xs[0], xs[1], xs[2], xs[3]
	O, cg, kh, kw := ws[0], ws[1], ws[2], ws[3]
	dil := p.dilation()
	oh, ow := (H+2*ph-dil*(kh-1)-1)/sh+1, (W+2*pw-dil*(kw-1)-1)/sw+1
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
								y, z := i*sh+a*dil-ph, j*sw+d*dil-pw
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
// depthwise with two filters per channel), of stride 1 or more (an
// overlapping patch embedding's 7×7 of stride 4, pad 3; a stride that
// leaves positions unread) matches the direct sum, and a count that does
// not divide them is refused.
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
		x, w               []int
		pad, group, stride int
		seq                bool
		dilation           int
	}{
		{[]int{1, 8, 1, 11}, []int{8, 2, 1, 4}, 2, 4, 1, false, 1},  // conv1d as a 1-row image, even kernel
		{[]int{2, 6, 5, 5}, []int{9, 2, 3, 3}, 1, 3, 1, false, 1},   // more filters than channels
		{[]int{1, 4, 4, 4}, []int{8, 1, 3, 3}, 1, 4, 1, false, 1},   // depthwise, two filters per channel
		{[]int{1, 4, 3, 3}, []int{4, 4, 3, 3}, 1, 1, 1, false, 1},   // groups 1
		{[]int{1, 4, 3, 3}, []int{4, 1, 3, 3}, 0, 4, 1, false, 1},   // depthwise
		{[]int{1, 3, 16, 16}, []int{5, 3, 7, 7}, 3, 1, 4, false, 1}, // overlapping patches, stride 4
		{[]int{2, 4, 9, 7}, []int{4, 1, 3, 3}, 1, 4, 2, false, 1},   // depthwise, stride 2, odd sizes
		{[]int{1, 4, 1, 40}, []int{6, 2, 1, 9}, 0, 2, 5, false, 1},  // a strided grouped conv1d, the tail unread
		{[]int{1, 4, 1, 40}, []int{6, 2, 1, 9}, 3, 2, 5, true, 1},   // conv1d: pad and stride along L alone
		{[]int{1, 4, 9, 9}, []int{6, 4, 3, 3}, 2, 1, 1, false, 2},   // dilated 2, padded to keep the size
		{[]int{1, 4, 7, 8}, []int{4, 1, 3, 2}, 1, 4, 1, false, 3},   // dilated depthwise, shrinking
		{[]int{1, 4, 1, 20}, []int{4, 2, 1, 3}, 9, 2, 1, true, 9},   // a dilated conv1d (WaveNet's 9)
		{[]int{1, 6, 2, 7}, []int{6, 3, 1, 3}, 1, 2, 1, false, 1},   // two groups, bias-free below
	}
	for k, c := range cases {
		stride := max(c.stride, 1)
		name := fmt.Sprintf("x%v w%v groups %d stride %d dilation %d", c.x, c.w, c.group, stride, c.dilation)
		x, w := fill(exec.Numel(c.x)), fill(exec.Numel(c.w))
		var bias []float32
		ins := map[string]*Value{"x": in("x", Input, f32, c.x, x...), "w": in("w", Input, f32, c.w, w...)}
		names := []string{"x", "w", ""}
		if k != len(cases)-1 {
			bias = fill(c.w[0])
			ins["b"] = in("b", Input, f32, []int{c.w[0]}, bias...)
			names[2] = "b"
		}
		p := ConvParams{Pad: c.pad, Groups: c.group, Stride: c.stride, Seq: c.seq, Dilation: c.dilation}
		got, _ := runOne(t, Node{Op: OpConv2D, In: names, Spec: exec.Out(f32), Attrs: Attrs{Conv: p}}, ins)
		want := refConv2D(x, w, bias, c.x, c.w, c.group, p)
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
	if _, err := convShape([]int{1, 4, 9, 9}, []int{4, 4, 3, 3}, ConvParams{Stride: 2, Dilation: 2}); err == nil {
		t.Error("dilation 2 at stride 2: no error")
	}
}

// TestConvRoundBeforeBias: under RoundBeforeBias a bf16 convolution's sum
// is rounded before the bias is added, in the output's format (cuDNN's
// convolutions), for groups 1 and depthwise alike; without it the sum and
// the bias are rounded once together, and the two differ somewhere.
func TestConvRoundBeforeBias(t *testing.T) {
	bf := precision.BF16
	rng := rand.New(rand.NewPCG(4, 4))
	fill := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = bf.Round(float32(rng.NormFloat64() * scale))
		}
		return v
	}
	for _, c := range []struct {
		x, w        []int
		groups, pad int
	}{
		{[]int{1, 3, 8, 8}, []int{4, 3, 3, 3}, 1, 1},
		{[]int{1, 4, 6, 6}, []int{4, 1, 3, 3}, 4, 1},
	} {
		x, w, bias := fill(exec.Numel(c.x), 1), fill(exec.Numel(c.w), 1), fill(c.w[0], 3)
		ins := map[string]*Value{"x": in("x", Input, bf, c.x, x...), "w": in("w", Input, bf, c.w, w...), "b": in("b", Input, bf, []int{c.w[0]}, bias...)}
		p := ConvParams{Pad: c.pad, Groups: c.groups}
		sums := refConv2D(x, w, nil, c.x, c.w, c.groups, p)
		per := len(sums) / c.w[0]
		early, _ := runOne(t, Node{Op: OpConv2D, In: []string{"x", "w", "b"}, Spec: exec.Spec{Out: bf, Round: exec.RoundBeforeBias}, Attrs: Attrs{Conv: p}}, ins)
		once, _ := runOne(t, Node{Op: OpConv2D, In: []string{"x", "w", "b"}, Spec: exec.Out(bf), Attrs: Attrs{Conv: p}}, ins)
		differ := false
		for i, s := range sums {
			o := i / per % c.w[0]
			if want := bf.Round(bf.Round(s) + bias[o]); early[i] != want {
				t.Fatalf("groups %d: [%d] = %v, want round(round(Σ) + b) = %v", c.groups, i, early[i], want)
			}
			differ = differ || early[i] != once[i]
		}
		if !differ {
			t.Errorf("groups %d: rounding before the bias changes nothing: the plant does not tell them apart", c.groups)
		}
	}
}
