package reports

import (
	"math"

	"github.com/zflow/zflow/trace"
)

// Summary is one tensor's statistics over its finite values; NaN and Inf
// are counted, not folded in.
type Summary struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"` // population standard deviation
	NaN   int64   `json:"nan"`
	Inf   int64   `json:"inf"`
}

// summaryChunk bounds the memory SummarizeTensor uses for a widened copy.
const summaryChunk = 1 << 16

// SummarizeTensor streams a tensor in chunks (a view needs no copy) and
// returns its statistics, accumulated in float64 (Welford's update, so a
// large mean does not swamp the variance).
func SummarizeTensor(t *trace.Tensor) (Summary, error) {
	var s Summary
	var m2 float64
	s.Min, s.Max = math.Inf(1), math.Inf(-1)
	add := func(vs []float32) {
		for _, v := range vs {
			x := float64(v)
			switch {
			case math.IsNaN(x):
				s.NaN++
				continue
			case math.IsInf(x, 0):
				s.Inf++
				continue
			}
			s.Count++
			d := x - s.Mean
			s.Mean += d / float64(s.Count)
			m2 += d * (x - s.Mean)
			s.Min, s.Max = min(s.Min, x), max(s.Max, x)
		}
	}
	if v, ok := t.Float32View(); ok {
		add(v)
	} else {
		buf := make([]float32, min(int64(summaryChunk), t.Scalars()))
		for from := int64(0); from < t.Scalars(); from += int64(len(buf)) {
			chunk := buf[:min(int64(len(buf)), t.Scalars()-from)]
			if err := t.ReadFloat32(chunk, from); err != nil {
				return s, err
			}
			add(chunk)
		}
	}
	if s.Count == 0 {
		s.Min, s.Max = 0, 0 // JSON has no NaN; Count says there was nothing
		return s, nil
	}
	s.Std = math.Sqrt(m2 / float64(s.Count))
	return s, nil
}
