package synth

import (
	"fmt"
	"math"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/trace"
)

// TestQuotientHead: a model whose output divides its input less one half
// of a projection by a positive map of the other half, as Würstchen's
// prior, (x − a)/(|1 − b| + 10⁻⁵), and its decoder, (x − a)/(σ(b)·(1 −
// 2·10⁻³) + 10⁻³), end their forward, is read as that quotient (with
// abs, or sigmoid, and the constants) and generates its run.
func TestQuotientHead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		divisor func(b float64) float64
		act     string
	}{
		{"abs", func(b float64) float64 { return math.Abs(1-b) + 1e-5 }, "abs"},
		{"sigmoid", func(b float64) float64 { return float64(float32(1/(1+math.Exp(-b)))*float32(1-2e-3)) + 1e-3 }, "sigmoid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const rows, width = 6, 3
			n := rows * width
			sigmas := []float32{1, 0.75, 0.4, 0}
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(math.Sin(float64(7*i + 1)))
			}
			w := make([]float32, 2*width*width)
			for i := range w {
				w[i] = float32(math.Cos(float64(3*i+2))) * 0.8
			}
			bias := []float32{0.1, -0.2, 0.05, 0.3, -0.1, 0.2}
			pt := newPlanted(t, "quotient"+tc.name)
			pt.f32("input/x", []int{1, rows, width}, x)
			pt.f32("input/sigmas", []int{len(sigmas)}, sigmas)
			pt.f32("param/m.proj.weight", []int{2 * width, width}, w)
			pt.f32("param/m.proj.bias", []int{2 * width}, bias)
			var calls []trace.Call
			for step := range len(sigmas) - 1 {
				pre := fmt.Sprintf("s%d/", step)
				proj := make([]float32, 2*n)
				for r := range rows {
					for o := range 2 * width {
						acc := bias[o]
						for k := range width {
							acc += x[r*width+k] * w[o*width+k]
						}
						proj[r*2*width+o] = acc
					}
				}
				out := make([]float32, n)
				for r := range rows {
					for c := range width {
						a, b := proj[r*2*width+c], proj[r*2*width+width+c]
						out[r*width+c] = float32(float64(x[r*width+c]-a) / float64(float32(tc.divisor(float64(b)))))
					}
				}
				pt.f32(pre+"m/arg0", []int{1, rows, width}, x)
				pt.f32(pre+"m/out", []int{1, rows, width}, out)
				pt.f32(pre+"m.proj/arg0", []int{1, rows, width}, x)
				pt.f32(pre+"m.proj/out", []int{1, rows, 2 * width}, proj)
				st, id := step, 2*step
				calls = append(calls,
					trace.Call{ID: id, Step: &st, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: pre + "m/arg0"}, {Name: "out", Key: pre + "m/out"}}},
					trace.Call{ID: id + 1, Step: &st, Parent: &id, Module: "m.proj", Type: "Linear", Params: []string{"m.proj.weight", "m.proj.bias"}, Tensors: trace.Ports{
						{Name: "arg0", Key: pre + "m.proj/arg0"}, {Name: "out", Key: pre + "m.proj/out"}}})
				next := make([]float32, n)
				for i := range x {
					next[i] = x[i] + (sigmas[step+1]-sigmas[step])*out[i]
				}
				x = next
			}
			pt.f32("output/latents", []int{1, rows, width}, x)
			res := discoverGeneratesWith(t, pt, calls, map[string]string{"x": "input/x", "sigmas": "input/sigmas"},
				map[string]string{"m.proj.weight": "param/m.proj.weight", "m.proj.bias": "param/m.proj.bias"})
			var div, act bool
			for _, nd := range res.Doc.Program.Nodes {
				div = div || nd.Op == program.OpDiv.String()
				act = act || nd.Op == program.OpAct.String() && nd.Attrs.Act == tc.act
			}
			if !div || !act {
				t.Errorf("program: division %v, %s %v; want both", div, tc.act, act)
			}
		})
	}
}
