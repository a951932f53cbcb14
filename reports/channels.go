package reports

import (
	"fmt"
	"math"
)

// ChannelStat is one channel's mean and population standard deviation over
// its finite values.
type ChannelStat struct {
	N    int // finite values seen
	Mean float64
	Std  float64
}

// Range is the smallest and largest of a set of per-channel numbers.
type Range struct{ Min, Max float64 }

// ChannelSummary is the per-channel statistics of a rows × channels tensor.
type ChannelSummary struct {
	Channels  []ChannelStat
	Mean, Std Range // over channels with N > 0; zero if there are none
	NonFinite int   // NaN and Inf values, left out of every channel
}

// ChannelStats computes per-channel statistics of data laid out as rows ×
// channels (channels is the last dimension).
func ChannelStats(data []float32, channels int) (ChannelSummary, error) {
	acc, err := NewChannelAccumulator(channels)
	if err != nil {
		return ChannelSummary{}, err
	}
	if err := acc.Add(data); err != nil {
		return ChannelSummary{}, err
	}
	return acc.Result(), nil
}

// ChannelAccumulator streams per-channel statistics over chunks of whole
// rows. Each chunk is reduced exactly in two passes (mean, then squared
// deviations) and merged with Chan et al.'s pairwise update, so a large
// channel mean does not swamp the variance.
type ChannelAccumulator struct {
	channels  int
	n         []int
	mean, m2  []float64 // running mean and Σ(x-mean)² per channel
	nonFinite int
	// scratch for one chunk
	cn      []int
	cs, cm2 []float64
}

// NewChannelAccumulator starts statistics over channels channels.
func NewChannelAccumulator(channels int) (*ChannelAccumulator, error) {
	if channels <= 0 {
		return nil, fmt.Errorf("reports: %d channels, want > 0", channels)
	}
	return &ChannelAccumulator{
		channels: channels,
		n:        make([]int, channels), mean: make([]float64, channels), m2: make([]float64, channels),
		cn: make([]int, channels), cs: make([]float64, channels), cm2: make([]float64, channels),
	}, nil
}

// Add folds in a chunk of whole rows.
func (c *ChannelAccumulator) Add(rows []float32) error {
	C := c.channels
	if len(rows)%C != 0 {
		return fmt.Errorf("reports: %d values are not whole rows of %d channels", len(rows), C)
	}
	clear(c.cn)
	clear(c.cs)
	clear(c.cm2)
	for r := 0; r < len(rows); r += C {
		for ch, v := range rows[r : r+C] {
			x := float64(v)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				c.nonFinite++
				continue
			}
			c.cn[ch]++
			c.cs[ch] += x
		}
	}
	for ch := range C {
		if c.cn[ch] > 0 {
			c.cs[ch] /= float64(c.cn[ch]) // now the chunk mean
		}
	}
	for r := 0; r < len(rows); r += C {
		for ch, v := range rows[r : r+C] {
			x := float64(v)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			d := x - c.cs[ch]
			c.cm2[ch] += d * d
		}
	}
	for ch := range C {
		nb := c.cn[ch]
		if nb == 0 {
			continue
		}
		na := c.n[ch]
		n := na + nb
		delta := c.cs[ch] - c.mean[ch]
		c.mean[ch] += delta * float64(nb) / float64(n)
		c.m2[ch] += c.cm2[ch] + delta*delta*float64(na)*float64(nb)/float64(n)
		c.n[ch] = n
	}
	return nil
}

// Result returns the statistics so far; more rows may follow.
func (c *ChannelAccumulator) Result() ChannelSummary {
	s := ChannelSummary{Channels: make([]ChannelStat, c.channels), NonFinite: c.nonFinite}
	first := true
	for ch := range c.channels {
		st := ChannelStat{N: c.n[ch], Mean: c.mean[ch]}
		if st.N > 0 {
			st.Std = math.Sqrt(c.m2[ch] / float64(st.N))
			if first {
				s.Mean, s.Std = Range{st.Mean, st.Mean}, Range{st.Std, st.Std}
				first = false
			}
			s.Mean = s.Mean.with(st.Mean)
			s.Std = s.Std.with(st.Std)
		}
		s.Channels[ch] = st
	}
	return s
}

func (r Range) with(x float64) Range { return Range{min(r.Min, x), max(r.Max, x)} }

// ChannelDiff compares per-channel statistics of the port ("ours") and the
// reference.
type ChannelDiff struct {
	Ours, Ref ChannelSummary
	MeanDiff  []float64 // ours − ref, per channel
	StdDiff   []float64 // ours − ref, per channel
	// StdRatio is ours / ref per channel: 1 when both are 0, +Inf when only
	// the reference's is.
	StdRatio                           []float64
	MeanDiffRange, StdDiffRange, Ratio Range // Ratio is StdRatio's range
}

// CompareChannels computes both sides' per-channel statistics and their
// differences; ours and ref are rows × channels.
func CompareChannels(ours, ref []float32, channels int) (ChannelDiff, error) {
	if len(ours) != len(ref) {
		return ChannelDiff{}, fmt.Errorf("reports: %d values against %d reference values", len(ours), len(ref))
	}
	o, err := ChannelStats(ours, channels)
	if err != nil {
		return ChannelDiff{}, err
	}
	r, err := ChannelStats(ref, channels)
	if err != nil {
		return ChannelDiff{}, err
	}
	d := ChannelDiff{Ours: o, Ref: r,
		MeanDiff: make([]float64, channels), StdDiff: make([]float64, channels), StdRatio: make([]float64, channels)}
	for ch := range channels {
		a, b := o.Channels[ch], r.Channels[ch]
		d.MeanDiff[ch] = a.Mean - b.Mean
		d.StdDiff[ch] = a.Std - b.Std
		switch {
		case b.Std > 0:
			d.StdRatio[ch] = a.Std / b.Std
		case a.Std == 0:
			d.StdRatio[ch] = 1
		default:
			d.StdRatio[ch] = math.Inf(1)
		}
		if ch == 0 {
			d.MeanDiffRange = Range{d.MeanDiff[0], d.MeanDiff[0]}
			d.StdDiffRange = Range{d.StdDiff[0], d.StdDiff[0]}
			d.Ratio = Range{d.StdRatio[0], d.StdRatio[0]}
		}
		d.MeanDiffRange = d.MeanDiffRange.with(d.MeanDiff[ch])
		d.StdDiffRange = d.StdDiffRange.with(d.StdDiff[ch])
		d.Ratio = d.Ratio.with(d.StdRatio[ch])
	}
	return d, nil
}
