package synth

import (
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// notVelocity is the rel-RMS above which no form of the model's result is
// the loop's velocity at all (a velocity read in the wrong rounding misses
// by the format's noise, a few 1e-3 in bf16; a result of another kind
// misses by its own size): only then is the result tried as the clean
// sample the step moves towards.
const notVelocity = 0.1

// xpredLabel labels the velocity made from a clean-sample prediction, and
// xpredNarrowLabel σ cast to the latents' format for its division.
const (
	xpredLabel       = "(x − x̂)/σ: the velocity of a clean-sample prediction"
	xpredNarrowLabel = "σ in the latents' format"
)

// predictedSample tries each form of the model's result as its estimate x̂
// of the clean sample (x-prediction, as pixel-space models are trained):
// under x_σ = (1 − σ)·x̂ + σ·ε the loop integrates v = (x − x̂)/σ, made
// here from the step's latents and σ_i (the program's timestep input).
// σ_0 is 1 in most schedules, where the division does not show, so every
// candidate is scored at each step whose next latents the trace holds, by
// its worst step. In a narrow format σ is also tried as a scalar of the
// latents' format (torch ≤ 1.13's CPU casts a Python scalar so; torch 2
// keeps it f32); among the candidates that explain the steps, the one
// whose updates land nearest the next latents (sampleNextError) is kept.
// It returns the velocity, its sign and the candidates' scores, or nil
// where no form explains the steps better than velErr (the velocity
// forms' best) and within notVelocity.
func (s *synth) predictedSample(latents, sigmas *val, forms []*val, velErr float64) (*val, int, []semantics.Candidate) {
	steps := s.tr.Steps()
	if sigmas == nil || len(steps) < 2 || len(sigmas.data) < len(steps)+1 || stepKey(latents.keys) == "" {
		// the latents must be the model's own argument, bound as the
		// step's input, whose value the trace holds at every step
		return nil, 0, nil
	}
	sig := s.stepSigma(sigmas)
	divisors := []*val{sig}
	if latents.format != precision.F32 {
		// σ a Python scalar that torch ≤ 1.13's CPU casts to the latents'
		// format before the division (torch 2 keeps it f32)
		if c := s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: latents.format}, args: []*val{sig}, out: latents.format, label: xpredNarrowLabel}); c != nil {
			divisors = append(divisors, c)
		}
	}
	var best *val
	bestSign, bestNext := 1, math.Inf(1)
	var cands []semantics.Candidate
	for _, f := range forms {
		xh := f
		if f.numel() != latents.numel() {
			continue
		}
		if xh = s.reshape(f, latents.shape); xh == nil {
			continue
		}
		diff := s.derive(&expr{op: program.OpSub, args: []*val{latents, xh}, out: latents.format, label: "x − x̂"})
		if diff == nil {
			continue
		}
		for di, dv := range divisors {
			v := s.derive(&expr{op: program.OpDiv, args: []*val{diff, dv}, out: latents.format, label: xpredLabel})
			if v == nil {
				continue
			}
			for _, sign := range []int{1, -1} {
				e := s.sampleStepsError(latents, sigmas, v, float32(sign))
				cands = append(cands, semantics.Candidate{Value: sign, Score: finite(e)})
				if e >= velErr || e > notVelocity {
					continue
				}
				// among the forms that explain the steps, the one whose
				// updates land nearest the next latents, the step size a
				// scalar of the same kind as σ
				if n := s.sampleNextError(latents, sigmas, v, float32(sign), di > 0); n < bestNext {
					best, bestSign, bestNext = v, sign, n
				}
			}
		}
	}
	if best == nil {
		return nil, 0, nil
	}
	return best, bestSign, cands
}

// sampleNextError is the worst rel-RMS, over every step (the last against
// the run's output), between the next latents the trace holds and x +
// round(Δσ·sign·v) in the latents' format, Δσ rounded to that format
// first where narrow (a Python scalar torch ≤ 1.13's CPU casts, as it
// casts σ).
func (s *synth) sampleNextError(latents, sigmas, v *val, sign float32, narrow bool) float64 {
	steps := s.tr.Steps()
	f := latents.format
	var final []float32
	if names := slices.Sorted(maps.Keys(s.tr.Manifest.Outputs)); len(names) > 0 {
		if t, err := s.tr.Tensor(s.tr.Manifest.Outputs[names[0]]); err == nil {
			final, _ = t.Float32Rounded()
		}
	}
	worst := 0.0
	for k := range steps {
		x, ok1 := s.at(latents, steps[k])
		got, ok2 := s.at(v, steps[k])
		next, ok3 := final, len(final) == len(x)
		if k+1 < len(steps) {
			next, ok3 = s.at(latents, steps[k+1])
		}
		if !ok1 || !ok2 || !ok3 || len(got) != len(x) || len(next) != len(x) {
			return math.Inf(1)
		}
		dt := sigmas.data[k+1] - sigmas.data[k]
		if narrow {
			dt = f.Round(dt)
		}
		pred := make([]float32, len(x))
		for i := range x {
			pred[i] = f.Round(x[i] + f.Round(dt*sign*got[i]))
		}
		worst = math.Max(worst, relRMS(f, pred, next))
	}
	return worst
}

// sampleStepsError is the worst rel-RMS, over the steps whose next latents the
// trace holds (the latents' argument of the following call), between
// sign·v at a step and the velocity the step implies, (x_{i+1} − x_i) /
// (σ_{i+1} − σ_i).
func (s *synth) sampleStepsError(latents, sigmas, v *val, sign float32) float64 {
	steps := s.tr.Steps()
	worst, scored := 0.0, 0
	for k := 0; k+1 < len(steps); k++ {
		x, ok1 := s.at(latents, steps[k])
		next, ok2 := s.at(latents, steps[k+1])
		got, ok3 := s.at(v, steps[k])
		dt := float64(sigmas.data[k+1] - sigmas.data[k])
		if !ok1 || !ok2 || !ok3 || len(x) != len(next) || len(got) != len(x) || dt == 0 {
			return math.Inf(1)
		}
		implied := make([]float32, len(x))
		d := make([]float32, len(x))
		for i := range x {
			implied[i] = float32((float64(next[i]) - float64(x[i])) / dt)
			d[i] = sign * got[i]
		}
		worst = math.Max(worst, relRMS(latents.format, d, implied))
		scored++
	}
	if scored == 0 {
		return math.Inf(1)
	}
	return worst
}

// stepSigma is σ_i as the program's timestep step input, bound once (the
// value the timestep argument's forms are made from, where one is).
func (s *synth) stepSigma(sigmas *val) *val {
	if s.sigma == nil {
		s.sigma = &val{shape: []int{1}, data: sigmas.data[:1], format: f32,
			perStep: func(step int) []float32 { return sigmas.data[step : step+1] }}
		s.em.bindLeaf(s.sigma, program.StepInput, program.StepTimestep, "timestep")
	}
	return s.sigma
}

// noteSample says in the euler_sign factor's evidence when the loop's
// velocity is made from a clean-sample prediction.
func noteSample(f *semantics.Factor, v *val) {
	if v == nil || v.from == nil || v.from.label != xpredLabel {
		return
	}
	f.Evidence.Note = strings.TrimPrefix(f.Evidence.Note+"; ", "; ") + "the model's result is the clean sample x̂ (x-prediction): the loop integrates v = (x − x̂)/σ, scored at every step the trace holds the next latents of"
	if d := v.from.args[1]; d != nil && d.from != nil && d.from.label == xpredNarrowLabel {
		f.Evidence.Note += "; σ divided as a scalar of the latents' format (" + d.format.String() + "), whose updates land nearest the next latents"
	}
}
