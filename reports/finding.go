package reports

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// Finding is what Diff says about the first failing boundary: both sides'
// per-channel statistics (channels are the last dimension) and the
// signature Diagnose reads from them, with its evidence.
type Finding struct {
	Key             string
	Rows, NChannels int
	Diagnosis       Diagnosis
	Channels        ChannelDiff
	ErrRMS          []float64 // per channel: RMS of ours - ref over finite pairs
	// OneRow says the tensor had a single row, so Diagnose read its values
	// as one channel (per-channel statistics need rows).
	OneRow bool
}

// diagnoseBoundary reads both tensors of a compared pair whole (Diagnose
// sorts each channel) and diagnoses them. It is the one place Diff holds a
// whole tensor pair in memory, and it runs once.
func diagnoseBoundary(ours, ref *trace.Trace, d *BoundaryDiff) (*Finding, error) {
	ot, err := ours.Values(d.Key)
	if err != nil {
		return nil, err
	}
	rt, err := ref.Values(d.Key)
	if err != nil {
		return nil, err
	}
	o, err := ot.Float32()
	if err != nil {
		return nil, err
	}
	r, err := rt.Float32()
	if err != nil {
		return nil, err
	}
	ri, _ := ref.Info(d.Key)
	C := rowLen(ri)
	if len(r) == 0 || len(o) != len(r) {
		return nil, nil
	}
	f := &Finding{Key: d.Key, Rows: len(r) / C, NChannels: C, OneRow: len(r) == C}
	f.Diagnosis = DiagnoseRows(o, r, C, fmtOrF32(d.DType))
	if f.Channels, err = CompareChannels(o, r, C); err != nil {
		return nil, err
	}
	f.ErrRMS = make([]float64, C)
	n := make([]int, C)
	for i, x := range o {
		ch := i % C
		if e := float64(x) - float64(r[i]); !math.IsNaN(e) && !math.IsInf(e, 0) {
			f.ErrRMS[ch] += e * e
			n[ch]++
		}
	}
	for ch := range f.ErrRMS {
		if n[ch] > 0 {
			f.ErrRMS[ch] = math.Sqrt(f.ErrRMS[ch] / float64(n[ch]))
		}
	}
	return f, nil
}

// DiagnoseRows is the diagnosis Diff gives a boundary: ours and ref are
// rows of rowLen channels (the last dimension), stored in format f. One row
// has no per-channel statistics: its values are read as the rows of one
// channel instead (a [1, C] embedding, a modulation vector), and the
// row-block rule is off (those rows are channels). The lengths must agree
// and be whole rows (DiagnoseIn's errors otherwise read as NoSignature).
func DiagnoseRows(ours, ref []float32, rowLen int, f precision.Format) Diagnosis {
	if rowLen <= 0 || len(ours) != len(ref) || len(ref)%rowLen != 0 {
		return Diagnosis{Reason: fmt.Sprintf("%d values against %d in rows of %d: not diagnosed", len(ours), len(ref), rowLen)}
	}
	if len(ref) == rowLen {
		return diagnose(ours, ref, 1, f, false)
	}
	return diagnose(ours, ref, rowLen, f, true)
}

// WorstChannels lists up to k channels (all if k <= 0) by falling error
// RMS, ties by index.
func (f *Finding) WorstChannels(k int) []int {
	idx := make([]int, len(f.ErrRMS))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(f.ErrRMS[b], f.ErrRMS[a]) })
	if k > 0 && k < len(idx) {
		idx = idx[:k]
	}
	return idx
}

// fmtOrF32 is the format a dtype is diagnosed in.
func fmtOrF32(dtype string) precision.Format {
	if f, ok := formatOf(dtype); ok {
		return f
	}
	return precision.F32
}
