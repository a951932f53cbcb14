package exec

import (
	"fmt"

	"github.com/zflow/zflow/precision"
)

// EulerParams configures the flow-matching Euler sampler:
//
//	t_i = round_T(Scale · σ_i)                     what the model is given
//	v_i = model(x_i, t_i)
//	x_{i+1} = x_i + Sign · (σ_{i+1} − σ_i) · v_i    under Spec
//
// σ differences are taken in f32 (as a scheduler holding f32 sigmas does).
// Spec.Out is the latents' storage format; Spec.Round may hold
// RoundProduct: the step dt·v rounded to Out before the add. diffusers'
// FlowMatchEulerDiscreteScheduler on bf16 latents is
// Spec{Out: BF16, Round: RoundProduct}: the sample is upcast to f32,
// dt·v (a 0-dim f32 times a bf16 tensor) is a bf16 tensor, the sum is f32,
// and the result is cast back to bf16.
type EulerParams struct {
	Sigmas   []float32 // σ_0 … σ_n; n steps
	Sign     float32   // +1 or −1, the velocity's sign
	Timestep TimestepTransform
	Batch    int // the timestep tensor is [Batch] (0: 1)
	Spec     Spec
}

// TimestepTransform is what the model is given as its timestep.
type TimestepTransform struct {
	Scale  float32          // multiplies σ in f32 (1: σ itself; 1000: σ·1000)
	Format precision.Format // the product is rounded to this format (the model dtype, or F32)
}

// Velocity evaluates the model at step i on latents x and timestep t; it
// returns v, which the sampler frees after use.
type Velocity func(step int, x, t Tensor) (Tensor, error)

// check validates p.
func (p EulerParams) check() error {
	if len(p.Sigmas) < 2 {
		return fmt.Errorf("exec: euler: %d sigmas: need at least 2", len(p.Sigmas))
	}
	if p.Sign != 1 && p.Sign != -1 {
		return fmt.Errorf("exec: euler: sign %g is not ±1", p.Sign)
	}
	if p.Timestep.Scale == 0 || !p.Timestep.Format.Valid() {
		return fmt.Errorf("exec: euler: timestep transform %+v: scale and format must be set", p.Timestep)
	}
	if p.Spec.Round&^RoundProduct != 0 {
		return fmt.Errorf("exec: euler: rounding points %v: only product is defined", p.Spec.Round)
	}
	return p.Spec.Check()
}

// Timesteps are the model's timesteps t_i for every step.
func (p EulerParams) Timesteps() []float32 {
	out := make([]float32, len(p.Sigmas)-1)
	for i := range out {
		out[i] = p.Timestep.Format.Round(p.Timestep.Scale * p.Sigmas[i])
	}
	return out
}

// Euler runs the sampler from x (not freed) and returns the final latents.
func Euler(b Backend, x Tensor, p EulerParams, model Velocity) (Tensor, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	batch := max(p.Batch, 1)
	cur := x
	for i, ti := range p.Timesteps() {
		ts := make([]float32, batch)
		for j := range ts {
			ts[j] = ti
		}
		t, err := b.Upload(ts, []int{batch}, p.Timestep.Format)
		if err != nil {
			return nil, fmt.Errorf("euler step %d: timestep: %w", i, err)
		}
		v, err := model(i, cur, t)
		b.Free(t)
		if err != nil {
			return nil, fmt.Errorf("euler step %d: %w", i, err)
		}
		next, err := EulerStep(b, cur, v, p.Sigmas[i], p.Sigmas[i+1], p.Sign, p.Spec)
		b.Free(v)
		if err != nil {
			return nil, fmt.Errorf("euler step %d: %w", i, err)
		}
		if cur != x {
			b.Free(cur)
		}
		cur = next
	}
	return cur, nil
}

// EulerStep is one update x + sign·(σ_next − σ)·v under s (see EulerParams).
func EulerStep(b Basic, x, v Tensor, sigma, sigmaNext, sign float32, s Spec) (Tensor, error) {
	dt := sign * (sigmaNext - sigma)
	d, err := b.Upload([]float32{dt}, []int{1}, precision.F32)
	if err != nil {
		return nil, fmt.Errorf("euler: %w", err)
	}
	defer b.Free(d)
	step, err := b.Mul(v, d, mid(s, RoundProduct))
	if err != nil {
		return nil, fmt.Errorf("euler: dt·v: %w", err)
	}
	defer b.Free(step)
	return b.Add(x, step, final(s))
}
