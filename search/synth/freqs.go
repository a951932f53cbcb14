package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// A vector math library's exp (MKL's, CUDA's) is faithful, not correctly
// rounded: a few entries of a sinusoid's frequency table sit one ulp from
// exp(e_i). At a large timestep (a guidance of 6000) that ulp moves the
// angle t·f_i by t·ulp(f_i), thousands of ulps of sin and cos, and the
// error grows over a free-running loop. The captured embeddings show each
// entry the reference used wherever t is large enough; these constants
// say how the reading decides.
const (
	// freqReach: entries within this many ulps of exp(e_i) are tried.
	freqReach = 3
	// sinCosNoise: ulps within which a library's sin and cos of the same
	// angle agree with the correctly rounded ones.
	sinCosNoise = 4
	// freqShown: a column the computed table misses by more than
	// this many ulps is not explained by sin and cos alone.
	freqShown = 4 * sinCosNoise
)

// freqReading is what reading a sinusoid's frequency table found: the
// entries that differ from the computed exp(e_i), and the error of
// the embedding over every captured step without and with them.
type freqReading struct {
	overrides     []exec.FreqOverride
	ulps          []int     // per override, its distance from the computed f_i in ulps
	math          exec.Math // the variant f_i was computed with
	before, after float64
}

// readFreqs reads the frequency table the reference used off captured
// embeddings rows[n] of timesteps ts[n] (rows in format f): per entry,
// where exp(e_i) misses its column by more than freqShown ulps and exactly
// one value within freqReach ulps of it explains the column within
// sinCosNoise (both 0 under MathCUDASinCos, reproduced exactly), that
// value. Entries the captures do not decide keep
// exp(e_i).
//
// known holds entries read off another sinusoid of the same table (the
// reference's exp of the same exponent gives the same value in every
// call): where this one's captures do not decide an entry (one guidance
// value at every step leaves several neighbours equal) and the known value
// explains its column, it is taken.
func readFreqs(p exec.TimestepParams, m exec.Math, ts []float32, rows [][]float32, f precision.Format, known map[int]float32) ([]exec.FreqOverride, []int, error) {
	freqs, err := exec.TimestepFreqs(p, m)
	if err != nil {
		return nil, nil, err
	}
	for n, r := range rows {
		if len(r) != p.Dim {
			return nil, nil, fmt.Errorf("synth: sinusoid row %d has %d values, want %d", n, len(r), p.Dim)
		}
	}
	if len(rows) != len(ts) {
		return nil, nil, fmt.Errorf("synth: %d sinusoid rows for %d timesteps", len(rows), len(ts))
	}
	// CUDA's sin and cos are reproduced exactly: every column must match.
	noise, shown := uint64(sinCosNoise), uint64(freqShown)
	if m&exec.MathCUDASinCos != 0 {
		noise, shown = 0, 0
	}
	sinAt, cosAt := exec.TimestepColumns(p)
	miss := func(i int, fi float32) uint64 {
		var worst uint64
		for n, t := range ts {
			s, c := exec.TimestepSinCos(t, fi, p.Scale, m)
			worst = max(worst, precision.ULPDistance(f, f.Round(s), rows[n][sinAt+i]), precision.ULPDistance(f, f.Round(c), rows[n][cosAt+i]))
		}
		return worst
	}
	var out []exec.FreqOverride
	var ulps []int
	for i, fi := range freqs {
		if k, ok := known[i]; ok && k != fi && miss(i, k) <= noise {
			out = append(out, exec.FreqOverride{Index: i, Value: k})
			ulps = append(ulps, int(int32(math.Float32bits(k))-int32(math.Float32bits(fi))))
			continue
		}
		if miss(i, fi) <= shown {
			continue
		}
		found, at, best := 0, 0, uint64(math.MaxUint64)
		for k := -freqReach; k <= freqReach; k++ {
			if k == 0 {
				continue
			}
			if d := miss(i, nudge(fi, k)); d <= noise {
				found++
				if d < best {
					at, best = k, d
				}
			}
		}
		if found == 1 {
			out = append(out, exec.FreqOverride{Index: i, Value: nudge(fi, at)})
			ulps = append(ulps, at)
		}
	}
	return out, ulps, nil
}

// nudge moves f by k ulps.
func nudge(f float32, k int) float32 {
	dir := float32(math.Inf(1))
	if k < 0 {
		dir, k = -dir, -k
	}
	for range k {
		f = math.Nextafter32(f, dir)
	}
	return f
}

// sinusoidRows gathers a sinusoid's timesteps and captured rows over
// every step of the trace (x: its input, t: its captured output).
func (s *synth) sinusoidRows(x, t *val) ([]float32, [][]float32) {
	var ts []float32
	var rows [][]float32
	d := t.shape[1]
	for _, st := range s.tr.Steps() {
		xs, ok1 := s.at(x, st)
		out, ok2 := s.at(t, st)
		if !ok1 || !ok2 || len(out) != len(xs)*d {
			continue
		}
		for n, tn := range xs {
			ts = append(ts, tn)
			rows = append(rows, out[n*d:(n+1)*d])
		}
	}
	return ts, rows
}

// readTable refits a fitted sinusoid v of target t with the frequency
// table its captures show; v itself when they show none or the table does
// not lower the error at every step.
func (s *synth) readTable(v, x, t *val) (*val, *freqReading) {
	e := *v.from
	ts, rows := s.sinusoidRows(x, t)
	key := freqKey{dim: e.attrs.Timestep.Dim, shift: e.attrs.Timestep.FreqShift, period: e.attrs.Timestep.MaxPeriod, math: e.math}
	ov, ulps, err := readFreqs(e.attrs.Timestep, e.math, ts, rows, t.format, s.freqsRead[key])
	if err != nil || len(ov) == 0 {
		return v, nil
	}
	e.attrs.Timestep.FreqOverrides = ov
	e.label += " table read"
	w, _ := s.ev.score(&e, t)
	if w == nil {
		return v, nil
	}
	r := &freqReading{overrides: ov, ulps: ulps, math: e.math}
	for _, st := range s.tr.Steps() {
		old, ok1 := s.at(v, st)
		got, ok2 := s.at(w, st)
		want, ok3 := s.at(t, st)
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		b, a := relRMS(t.format, old, want), relRMS(t.format, got, want)
		if a > b {
			return v, nil
		}
		r.before, r.after = math.Max(r.before, b), math.Max(r.after, a)
	}
	if s.freqsRead == nil {
		s.freqsRead = map[freqKey]map[int]float32{}
	}
	if s.freqsRead[key] == nil {
		s.freqsRead[key] = map[int]float32{}
	}
	for _, o := range ov {
		s.freqsRead[key][o.Index] = o.Value
	}
	return w, r
}

// freqKey names a sinusoid's frequency table: its exponents and the
// variant of exp that made it.
type freqKey struct {
	dim           int
	shift, period float32
	math          exec.Math
}

// count is how many entries the reading replaced (0 for none).
func (r *freqReading) count() int {
	if r == nil {
		return 0
	}
	return len(r.overrides)
}

// label names a reading's entries: "f13 +1 ulp, f44 +1 ulp".
func (r *freqReading) label() string {
	var parts []string
	for i, o := range r.overrides {
		parts = append(parts, fmt.Sprintf("f%d %+d ulp", o.Index, r.ulps[i]))
	}
	return strings.Join(parts, ", ")
}

// factor is the reading as a factor: the entries read, scored by the
// worst step's rel-RMS of the embedding with the computed table
// and with the one read.
func (r *freqReading) factor(scope, boundary string) semantics.Factor {
	idx := make([]int, len(r.overrides))
	for i, o := range r.overrides {
		idx[i] = o.Index
	}
	slices.Sort(idx)
	margin := math.Inf(1)
	if r.after > 0 {
		margin = r.before / r.after
	}
	return semantics.Factor{Name: "timestep_freq_overrides", Scope: scope, Value: idx, Margin: semantics.Margin(margin), Decisive: margin > 1,
		Candidates: []semantics.Candidate{{Value: []int{}, Score: r.before}, {Value: idx, Score: r.after}},
		Evidence: semantics.Evidence{Boundary: boundary, Metric: "rel_rms",
			Note: fmt.Sprintf("frequency entries the reference's exp gave off exp(e_i) computed with math=%s, read from the captured sinusoid at every step: %s", r.math, r.label())}}
}
