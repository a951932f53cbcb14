package reports

import (
	"math"
	"slices"

	"github.com/zflow/zflow/precision"
)

// moments are one channel's first and second moments over the finite pairs.
type moments struct {
	n               int
	meanO, meanR    float64
	varO, varR, cov float64 // population (divided by n)
}

func isFinite(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }

// class is 0 finite, 1 NaN, 2 +Inf, 3 -Inf.
func class(x float32) int {
	switch {
	case x != x:
		return 1
	case math.IsInf(float64(x), 1):
		return 2
	case math.IsInf(float64(x), -1):
		return 3
	}
	return 0
}

// measure computes every Evidence field; ours and ref are rows × C.
func measure(ours, ref []float32, C int) Evidence {
	e := Evidence{Rows: len(ref) / C}
	for i, o := range ours {
		co, cr := class(o), class(ref[i])
		e.OursNaN += b2i(co == 1)
		e.OursInf += b2i(co >= 2)
		e.RefNaN += b2i(cr == 1)
		e.RefInf += b2i(cr >= 2)
		e.NonFiniteMismatch += b2i(co != cr)
	}
	mom := channelMoments(ours, ref, C)

	// Squared differences, their total, per-row energy, f16 range.
	d2 := make([]float64, len(ref))
	rowE := make([]float64, e.Rows)
	var sumD2, sumR2, f16D2 float64
	for i, o := range ours {
		r := ref[i]
		if !isFinite(o) || !isFinite(r) {
			continue
		}
		d := float64(o) - float64(r)
		d2[i] = d * d
		sumD2 += d2[i]
		sumR2 += float64(r) * float64(r)
		rowE[i/C] += d2[i]
		if (math.Abs(float64(o)) > F16Max) != (math.Abs(float64(r)) > F16Max) {
			e.F16RangeMismatch++
			f16D2 += d2[i]
		}
	}
	e.RelRMS = precision.RelRMSFromSums(sumD2, sumR2)
	if sumD2 == 0 {
		e.MultisetMatch, e.PositionMatch = 1, 1
		e.SmoothExplained, e.PooledExplained, e.AffineExplained = 1, 1, 1
		e.Slope, e.StdRatio = Range{1, 1}, Range{1, 1}
		return e
	}
	e.F16RangeShare = f16D2 / sumD2
	e.TopErrorShare, e.TopErrorCount, e.TopErrorRows = topErrors(d2, sumD2, C)
	e.RowFraction90 = rowFraction(rowE, sumD2, 0.9)
	e.MultisetMatch, e.PositionMatch = matches(ours, ref, C, mom)
	e.SmoothExplained = smoothExplained(ours, ref, C, sumD2)
	e.PooledExplained = pooledExplained(ours, ref, sumD2)
	affine(&e, mom, sumD2)
	return e
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// channelMoments computes per-channel moments over finite pairs, in two
// passes so the centred sums are accurate.
func channelMoments(ours, ref []float32, C int) []moments {
	m := make([]moments, C)
	for i := 0; i < len(ref); i += C {
		for ch, o := range ours[i : i+C] {
			r := ref[i+ch]
			if isFinite(o) && isFinite(r) {
				m[ch].n++
				m[ch].meanO += float64(o)
				m[ch].meanR += float64(r)
			}
		}
	}
	for ch := range m {
		if m[ch].n > 0 {
			m[ch].meanO /= float64(m[ch].n)
			m[ch].meanR /= float64(m[ch].n)
		}
	}
	for i := 0; i < len(ref); i += C {
		for ch, o := range ours[i : i+C] {
			r := ref[i+ch]
			if isFinite(o) && isFinite(r) {
				do, dr := float64(o)-m[ch].meanO, float64(r)-m[ch].meanR
				m[ch].varO += do * do
				m[ch].varR += dr * dr
				m[ch].cov += do * dr
			}
		}
	}
	for ch := range m {
		if n := float64(m[ch].n); n > 0 {
			m[ch].varO /= n
			m[ch].varR /= n
			m[ch].cov /= n
		}
	}
	return m
}

// topErrors is the share of sumD2 in the largest OutlierFraction of the
// squared differences (at least one element), how many of those are
// non-zero, and the distinct rows those lie in.
func topErrors(d2 []float64, sumD2 float64, C int) (share float64, count, rows int) {
	k := max(1, int(math.Ceil(OutlierFraction*float64(len(d2)))))
	sorted := slices.Clone(d2)
	slices.Sort(sorted)
	thr := sorted[len(sorted)-k]
	seen := make(map[int]bool)
	var top float64
	// everything above the k-th largest, then ties with it in index order
	take := func(keep func(v float64) bool) {
		for i, v := range d2 {
			if count < k && v > 0 && keep(v) {
				top += v
				count++
				seen[i/C] = true
			}
		}
	}
	take(func(v float64) bool { return v > thr })
	take(func(v float64) bool { return v == thr })
	return top / sumD2, count, len(seen)
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// rowFraction is the smallest fraction of rows whose energies reach frac of
// the total.
func rowFraction(rowE []float64, total, frac float64) float64 {
	if len(rowE) == 0 {
		return 1
	}
	e := slices.Clone(rowE)
	slices.SortFunc(e, cmpDesc)
	var acc float64
	for i, v := range e {
		if acc += v; acc >= frac*total {
			return float64(i+1) / float64(len(e))
		}
	}
	return 1
}

// matches compares each channel's finite pairs in sorted order (the values
// as multisets) and in place, within MultisetTol of the channel's reference
// RMS, and returns both match fractions.
func matches(ours, ref []float32, C int, mom []moments) (multiset, position float64) {
	var colO, colR []float32
	var nMulti, nPos, n int
	for ch := range C {
		tol := MultisetTol * math.Sqrt(mom[ch].meanR*mom[ch].meanR+mom[ch].varR)
		colO, colR = colO[:0], colR[:0]
		for i := ch; i < len(ref); i += C {
			if o, r := ours[i], ref[i]; isFinite(o) && isFinite(r) {
				colO = append(colO, o)
				colR = append(colR, r)
				if math.Abs(float64(o)-float64(r)) <= tol {
					nPos++
				}
			}
		}
		slices.Sort(colO)
		slices.Sort(colR)
		for i, o := range colO {
			if math.Abs(float64(o)-float64(colR[i])) <= tol {
				nMulti++
			}
		}
		n += len(colO)
	}
	if n == 0 {
		return 1, 1
	}
	return float64(nMulti) / float64(n), float64(nPos) / float64(n)
}

// smoothExplained is the share of sumD2 removed by subtracting, within each
// channel, the mean difference of pairs with similar reference values
// (equal-count bins of the sorted reference): high when the error is a
// function of the reference value, near 0 when it is noise.
func smoothExplained(ours, ref []float32, C int, sumD2 float64) float64 {
	bins := min(maxBins, max(1, len(ref)/C/rowsPerBin))
	type pair struct{ r, d float64 }
	var col []pair
	var resid float64
	for ch := range C {
		col = col[:0]
		for i := ch; i < len(ref); i += C {
			if o, r := ours[i], ref[i]; isFinite(o) && isFinite(r) {
				col = append(col, pair{float64(r), float64(o) - float64(r)})
			}
		}
		slices.SortFunc(col, func(a, b pair) int { return -cmpDesc(a.r, b.r) })
		for b := range bins {
			part := col[b*len(col)/bins : (b+1)*len(col)/bins]
			if len(part) == 0 {
				continue
			}
			var mean float64
			for _, p := range part {
				mean += p.d
			}
			mean /= float64(len(part))
			for _, p := range part {
				resid += (p.d - mean) * (p.d - mean)
			}
		}
	}
	return clamp01(1 - resid/sumD2)
}

// pooledExplained is smoothExplained over all channels at once: the share
// of sumD2 removed by subtracting the mean difference of pairs with
// similar reference values, in up to maxPooledBins equal-count bins of at
// least rowsPerBin pairs. An element-wise function applied wrongly (an
// activation) makes the same error at the same value in every channel, so
// pooling sees it with the few rows per channel that defeat the
// per-channel bins.
func pooledExplained(ours, ref []float32, sumD2 float64) float64 {
	type pair struct{ r, d float64 }
	all := make([]pair, 0, len(ref))
	for i, r := range ref {
		if o := ours[i]; isFinite(o) && isFinite(r) {
			all = append(all, pair{float64(r), float64(o) - float64(r)})
		}
	}
	slices.SortFunc(all, func(a, b pair) int { return -cmpDesc(a.r, b.r) })
	bins := min(maxPooledBins, max(1, len(all)/rowsPerBin))
	var resid float64
	for b := range bins {
		part := all[b*len(all)/bins : (b+1)*len(all)/bins]
		var mean float64
		for _, p := range part {
			mean += p.d
		}
		mean /= float64(max(1, len(part)))
		for _, p := range part {
			resid += (p.d - mean) * (p.d - mean)
		}
	}
	return clamp01(1 - resid/sumD2)
}

// affine fits ours ≈ α·ref + β per channel by least squares and fills the
// scale and mean evidence. The fitted error splits exactly, per channel,
// into a scale part n(α-1)²·var(ref) and a mean part n·Δmean²; the mean
// part not explained by the scale is n·β'² with β' = Δmean - (α-1)·mean(ref).
func affine(e *Evidence, mom []moments, sumD2 float64) {
	var resid, scale, mean, unexplained float64
	first := true
	for _, m := range mom {
		if m.n == 0 {
			continue
		}
		n := float64(m.n)
		dMean := m.meanO - m.meanR
		alpha := 1.0
		if m.varR > 0 {
			alpha = m.cov / m.varR
			resid += n * max(0, m.varO-m.cov*alpha)
			ratio := math.Sqrt(m.varO / m.varR)
			if first {
				e.StdRatio, e.Slope = Range{ratio, ratio}, Range{alpha, alpha}
				first = false
			}
			e.StdRatio, e.Slope = e.StdRatio.with(ratio), e.Slope.with(alpha)
			e.MeanShift = max(e.MeanShift, math.Abs(dMean)/math.Sqrt(m.varR))
		} else {
			resid += n * m.varO
		}
		scale += n * (alpha - 1) * (alpha - 1) * m.varR
		mean += n * dMean * dMean
		b := dMean - (alpha-1)*m.meanR
		unexplained += n * b * b
	}
	e.AffineExplained = clamp01(1 - resid/sumD2)
	if d := scale + min(mean, unexplained); d > 0 {
		e.ScaleShare = scale / d
	}
	if d := scale + mean; d > 0 {
		e.MeanShare = mean / d
	}
}

func clamp01(x float64) float64 { return max(0, min(1, x)) }
