package reports

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestChannelStatsHand(t *testing.T) {
	nan := float32(math.NaN())
	// channel 0: 1, 3 (mean 2, std 1); channel 1: 10, 20, NaN left out
	// (mean 15, std 5).
	s, err := ChannelStats([]float32{1, 10, 3, 20, 2, nan}, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := ChannelSummary{
		Channels:  []ChannelStat{{N: 3, Mean: 2, Std: math.Sqrt(2.0 / 3)}, {N: 2, Mean: 15, Std: 5}},
		Mean:      Range{2, 15},
		Std:       Range{math.Sqrt(2.0 / 3), 5},
		NonFinite: 1,
	}
	for ch, c := range s.Channels {
		w := want.Channels[ch]
		if c.N != w.N || !near(c.Mean, w.Mean) || !near(c.Std, w.Std) {
			t.Errorf("channel %d: %+v, want %+v", ch, c, w)
		}
	}
	if !near(s.Mean.Min, 2) || !near(s.Mean.Max, 15) || !near(s.Std.Min, want.Std.Min) || !near(s.Std.Max, 5) || s.NonFinite != 1 {
		t.Errorf("summary %+v, want %+v", s, want)
	}
	if _, err := ChannelStats([]float32{1, 2, 3}, 2); err == nil {
		t.Error("partial row accepted")
	}
	if _, err := ChannelStats(nil, 0); err == nil {
		t.Error("zero channels accepted")
	}
}

// TestChannelStatsStreaming: streamed in chunks of rows, with a mean large
// enough that a naive Σx² - n·mean² would lose the variance, the result
// matches a float64 two-pass computation.
func TestChannelStatsStreaming(t *testing.T) {
	const C, rows = 3, 1000
	rng := rand.New(rand.NewPCG(9, 10))
	data := make([]float32, C*rows)
	for i := range data {
		data[i] = float32(1e4*float64(i%C+1) + rng.NormFloat64()*float64(i%C+1))
	}
	acc, _ := NewChannelAccumulator(C)
	for r := 0; r < rows; {
		n := min(rows-r, 1+rng.IntN(97))
		if err := acc.Add(data[r*C : (r+n)*C]); err != nil {
			t.Fatal(err)
		}
		r += n
	}
	got := acc.Result()
	for ch := range C {
		var mean, m2 float64
		for r := range rows {
			mean += float64(data[r*C+ch])
		}
		mean /= rows
		for r := range rows {
			d := float64(data[r*C+ch]) - mean
			m2 += d * d
		}
		std := math.Sqrt(m2 / rows)
		if c := got.Channels[ch]; math.Abs(c.Mean-mean) > 1e-9*mean || math.Abs(c.Std-std) > 1e-9*std {
			t.Errorf("channel %d: %+v, want mean %v std %v", ch, c, mean, std)
		}
	}
}

func TestCompareChannels(t *testing.T) {
	// channel 0 scaled ×2 around 0; channel 1 shifted by 1; channel 2
	// constant in both; channel 3 constant only in the reference.
	ref := []float32{-1, 0, 5, 7, 1, 2, 5, 7}
	ours := []float32{-2, 1, 5, 6, 2, 3, 5, 8}
	d, err := CompareChannels(ours, ref, 4)
	if err != nil {
		t.Fatal(err)
	}
	wantMean := []float64{0, 1, 0, 0}
	wantStdDiff := []float64{1, 0, 0, 1}
	wantRatio := []float64{2, 1, 1, math.Inf(1)}
	for ch := range 4 {
		if !near(d.MeanDiff[ch], wantMean[ch]) || !near(d.StdDiff[ch], wantStdDiff[ch]) || !near(d.StdRatio[ch], wantRatio[ch]) {
			t.Errorf("channel %d: mean diff %v std diff %v ratio %v", ch, d.MeanDiff[ch], d.StdDiff[ch], d.StdRatio[ch])
		}
	}
	if d.MeanDiffRange != (Range{0, 1}) || d.StdDiffRange != (Range{0, 1}) || d.Ratio.Min != 1 || !math.IsInf(d.Ratio.Max, 1) {
		t.Errorf("ranges: %+v %+v %+v", d.MeanDiffRange, d.StdDiffRange, d.Ratio)
	}
	if _, err := CompareChannels(ours, ref[:4], 4); err == nil {
		t.Error("length mismatch accepted")
	}
}
