package cpu

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

func TestEulerHandComputed(t *testing.T) {
	bk := New(1)
	for _, c := range []struct {
		sign float32
		want []float64
	}{
		{1, []float64{2, 0}},  // x + (0 − 1)·v
		{-1, []float64{0, 4}}, // x − (0 − 1)·v
	} {
		x := up(t, bk, f32, []int{2}, 1, 2)
		var seen []float32
		p := exec.EulerParams{Sigmas: []float32{1, 0.75, 0}, Sign: c.sign,
			Timestep: exec.TimestepTransform{Scale: 1000, Format: precision.BF16}, Spec: exec.Out(f32)}
		out, err := exec.Euler(bk, x, p, func(step int, x, ts exec.Tensor) (exec.Tensor, error) {
			seen = append(seen, vals(t, bk)(ts, nil)...)
			return bk.Upload([]float32{-1, 2}, []int{2}, f32)
		})
		near(t, "euler", vals(t, bk)(out, err), c.want, 0)
		near(t, "timesteps", seen, []float64{1000, 752}, 0) // 750 in bf16 is 752
		near(t, "input untouched", vals(t, bk)(x, nil), []float64{1, 2}, 0)
	}
}

// TestEulerReplaysTraces: the sampler loop, fed the captured velocities,
// gives the model the captured latents and timesteps at every step and
// ends on the captured output, bit for bit.
func TestEulerReplaysTraces(t *testing.T) {
	for _, name := range []string{"flux-bf16", "flux-f32", "qwenimage-bf16", "qwenimage-f32"} {
		t.Run(name, func(t *testing.T) {
			c := openConf(t, name)
			calls := c.calls("transformer")
			sig := c.load(c.tr.Manifest.Inputs["sigmas"]).data
			p := exec.EulerParams{Sigmas: sig, Sign: 1,
				Timestep: exec.TimestepTransform{Scale: 1, Format: c.act},
				Spec:     exec.Spec{Out: c.act, Round: exec.RoundProduct}}
			x0 := c.load(c.tr.Manifest.Inputs["noise"])
			out, err := exec.Euler(c.bk, x0, p, func(step int, x, ts exec.Tensor) (exec.Tensor, error) {
				same(t, "latents in", x.(*Tensor).data, c.port(calls[step], "kw.hidden_states").data)
				same(t, "timestep in", ts.(*Tensor).data, c.port(calls[step], "kw.timestep").data)
				return c.port(calls[step], "out.0"), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			same(t, "final latents", out.(*Tensor).data, c.load(c.tr.Manifest.Outputs["latents"]).data)
		})
	}
}
