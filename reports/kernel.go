package reports

import (
	"math"

	"github.com/zflow/zflow/precision"
)

// The streaming kernels behind Diff: the same metrics as an Accumulator
// (TestKernelsMatchAccumulator holds them to it on random data with every
// kind of special value), computed for one segment of a tensor pair at a
// time so that segments can run on all cores and be merged in order.
//
// What makes them fast (BenchmarkKernelBF16Bits: 4-5x the Accumulator's
// speed, BenchmarkAccumulatorBF16, on one core):
//
//   - no per-element calls: the rounding, the lattice position and the
//     finite test are a few integer operations inline;
//   - bf16 against bf16 reads the stored bit patterns directly: both sides
//     are on the lattice already, so exactness and the ULP distance are
//     integer arithmetic on the bits and nothing is rounded or widened
//     into a buffer;
//   - no row bookkeeping: the worst row is the row of the first element
//     reaching MaxAbs (a row holds the largest |d| exactly when it holds
//     an element reaching the global maximum, and the first such row is the
//     one holding the first such element);
//   - Exact is the histogram's count at distance 0, not a separate count;
//   - the float64 sums run in two interleaved sets, so consecutive elements
//     do not wait on each other's additions.
//
// Pairs with a NaN, an Inf or a mask-sized value (precision.MaskSized) on
// either side take a slow path (special) that follows the Accumulator step
// by step.

// partial holds the sums of one segment; merge folds segments in order, so
// a pair's result does not depend on which worker ran which segment.
type partial struct {
	n, specials, nanPairs, mismatch int
	masked, maskMismatch            int
	ours, ref                       Side

	sumAbs, sumSqDiff, sumSqOurs, sumSqRef, dot float64
	maxAbs, maxRef                              float64
	maxAbsIndex                                 int // absolute element index; -1 if no finite pair yet

	close []CloseStats // one per allclose gate of the pair
}

func newPartial() partial { return partial{maxAbsIndex: -1} }

// merge folds q, the segment after p's last one, into p.
func (p *partial) merge(q *partial) {
	p.n += q.n
	p.specials += q.specials
	p.nanPairs += q.nanPairs
	p.mismatch += q.mismatch
	p.masked += q.masked
	p.maskMismatch += q.maskMismatch
	p.ours = addSide(p.ours, q.ours)
	p.ref = addSide(p.ref, q.ref)
	p.sumAbs += q.sumAbs
	p.sumSqDiff += q.sumSqDiff
	p.sumSqOurs += q.sumSqOurs
	p.sumSqRef += q.sumSqRef
	p.dot += q.dot
	p.maxRef = max(p.maxRef, q.maxRef)
	for k := range min(len(p.close), len(q.close)) {
		p.close[k].merge(&q.close[k])
	}
	if q.maxAbsIndex >= 0 && (p.maxAbsIndex < 0 || q.maxAbs > p.maxAbs) {
		p.maxAbs, p.maxAbsIndex = q.maxAbs, q.maxAbsIndex
	}
}

func addSide(a, b Side) Side {
	return Side{a.NaN + b.NaN, a.PosInf + b.PosInf, a.NegInf + b.NegInf, a.Inexact + b.Inexact}
}

// segHist counts one segment's ULP distances: a dense array for distances
// below ulpDense (every bf16 and f16 distance) and a list for the rest.
// It is reused: flush moves its counts into a pair's ulpHist and clears it.
type segHist struct {
	dense  [ulpDense]uint32
	dense2 [ulpDense]uint32 // a second set of counters for the bf16 kernel's odd elements
	top    uint32           // largest dense index counted since the last flush
	big    []uint64
}

// reset clears h without counting anything.
func (h *segHist) reset() {
	clear(h.dense[:h.top+1])
	clear(h.dense2[:h.top+1])
	h.top, h.big = 0, h.big[:0]
}

func (h *segHist) add(d uint64) {
	if d < ulpDense {
		h.dense[d]++
		h.top = max(h.top, uint32(d))
		return
	}
	h.big = append(h.big, d)
}

// flush adds the counts to u and clears h. u.dense grows only as far as
// the largest distance counted: ulpHist reads a shorter dense array as
// zeros beyond its end, and a small tensor then costs little.
func (h *segHist) flush(u *ulpHist) {
	if need := int(h.top) + 1; len(u.dense) < need {
		u.dense = append(u.dense, make([]uint64, need-len(u.dense))...)
	}
	var n uint64
	top := -1
	for d := range h.top + 1 {
		if c := uint64(h.dense[d]) + uint64(h.dense2[d]); c != 0 {
			u.dense[d] += c
			n += c
			top = int(d)
			h.dense[d], h.dense2[d] = 0, 0
		}
	}
	u.n += n
	if top >= 0 {
		u.max = max(u.max, uint64(top))
	}
	for _, d := range h.big {
		u.add(d)
	}
	h.top, h.big = 0, h.big[:0]
}

// metrics turns the merged sums and histogram of a whole pair into
// Metrics, through the Accumulator's own Result so the definitions cannot
// drift apart.
func (p *partial) metrics(f precision.Format, rowLen int, h *ulpHist) (Metrics, error) {
	a := &Accumulator{
		format: f, rowLen: rowLen,
		n: p.n, finite: p.n - p.specials, nanPairs: p.nanPairs, masked: p.masked, maskMismatch: p.maskMismatch,
		ours: p.ours, ref: p.ref,
		sumAbs: p.sumAbs, sumSqDiff: p.sumSqDiff, sumSqOurs: p.sumSqOurs, sumSqRef: p.sumSqRef, dot: p.dot,
		maxAbs: p.maxAbs, maxRef: p.maxRef, maxAbsIndex: p.maxAbsIndex,
		row: p.n / rowLen, col: p.n % rowLen, worstRow: -1,
		ulp: *h,
	}
	if h.dense != nil {
		a.exact = int(h.dense[0])
	}
	if p.maxAbsIndex >= 0 {
		a.worstRow, a.worstMax, a.anyWorst = p.maxAbsIndex/rowLen, p.maxAbs, true
	}
	return a.Result()
}

// special folds in a pair with a NaN, an Inf or a mask-sized value on at
// least one side, exactly as Accumulator.special does, and counts
// positions whose classes (finite, NaN, +Inf, -Inf) differ.
func (p *partial) special(h *segHist, f precision.Format, o, r float32) {
	p.specials++
	p.n++
	tallySide(&p.ours, f, o)
	tallySide(&p.ref, f, r)
	if class(o) != class(r) {
		p.mismatch++
	}
	p.masked, p.maskMismatch = countMask(f, o, r, p.masked, p.maskMismatch)
	switch {
	case o != o && r != r:
		p.nanPairs++
	case o != o || r != r:
	default:
		h.add(precision.ULPDistance(f, o, r))
	}
}

func tallySide(s *Side, f precision.Format, x float32) {
	switch {
	case x != x:
		s.NaN++
	case math.IsInf(float64(x), 1):
		s.PosInf++
	case math.IsInf(float64(x), -1):
		s.NegInf++
	case f.Round(x) != x:
		s.Inexact++
	}
}

// lattice16 maps a 16-bit float's bit pattern (bf16 or f16) to its place on
// the format's monotone integer line: sign-magnitude to two's complement,
// so +0 and -0 are both 0.
func lattice16(b uint16) int32 {
	// As int16, a negative pattern s stands for -(s & 0x7FFF) = -32768 - s
	// = (s ^ -1) - 32767; a non-negative one for itself.
	s := int32(int16(b))
	m := s >> 15
	return (s ^ m) - (m & 0x7FFF)
}

// bf16Block is the number of elements bf16Bits reads in each of its passes
// over a block: small enough to stay in L1 between the passes.
const bf16Block = 512

// bf16Bits compares stored bf16 bit patterns; base is the element index of
// ours[0] in the tensor. It works in blocks of bf16Block elements, each in
// two passes that keep few values live (so nothing spills to the stack):
// the float sums, which also notice any NaN or Inf, then the ULP
// histogram. A block holding a NaN or Inf is redone element by element.
func (p *partial) bf16Bits(h *segHist, ours, ref []uint16, base int) {
	ours = ours[:len(ref)]
	for from := 0; from < len(ref); from += bf16Block {
		to := min(len(ref), from+bf16Block)
		o, r := ours[from:to], ref[from:to]
		var b blockSums
		if !b.bf16(o, r) {
			p.bf16Slow(h, o, r, base+from)
			continue
		}
		h.top = max(h.top, bf16Hist(&h.dense, &h.dense2, o, r))
		p.foldSums(b.sAbs, b.sD, b.sO, b.sR, b.dot)
		p.n += len(r)
		p.maxRef = max(p.maxRef, b.maxRef)
		if b.maxAbs > p.maxAbs || p.maxAbsIndex < 0 {
			// the first element reaching the block's maximum
			for i := range r {
				e := math.Abs(float64(math.Float32frombits(uint32(o[i])<<16)) - float64(math.Float32frombits(uint32(r[i])<<16)))
				if e == b.maxAbs {
					p.maxAbs, p.maxAbsIndex = e, base+from+i
					break
				}
			}
		}
	}
}

// blockSums are one block's float64 sums and maxima.
type blockSums struct {
	sAbs, sD, sO, sR, dot float64
	maxAbs, maxRef        float64
}

// bf16 sums a block of bf16 pairs; it returns false, with the sums
// unusable, if any value is a NaN, an Inf or mask-sized. Two elements per step, each
// sum taking one addition per step, halves the chains of dependent
// additions.
func (b *blockSums) bf16(ours, ref []uint16) bool {
	ours = ours[:len(ref)]
	var sAbs, sD, sO, sR, dot, maxAbs, maxRef float64
	var special uint16
	i := 0
	for ; i+2 <= len(ref); i += 2 {
		o0, r0, o1, r1 := ours[i], ref[i], ours[i+1], ref[i+1]
		// an exponent of 254 or 255 (mask-sized from 2^127, Inf, NaN:
		// precision.MaskBits) carries into bit 15
		special |= (o0&0x7F80 + 0x100) | (r0&0x7F80 + 0x100) | (o1&0x7F80 + 0x100) | (r1&0x7F80 + 0x100)
		a0 := float64(math.Float32frombits(uint32(o0) << 16))
		c0 := float64(math.Float32frombits(uint32(r0) << 16))
		a1 := float64(math.Float32frombits(uint32(o1) << 16))
		c1 := float64(math.Float32frombits(uint32(r1) << 16))
		e0, e1 := a0-c0, a1-c1
		ad0, ad1 := math.Abs(e0), math.Abs(e1)
		sAbs += ad0 + ad1
		sD += e0*e0 + e1*e1
		sO += a0*a0 + a1*a1
		sR += c0*c0 + c1*c1
		dot += a0*c0 + a1*c1
		if ad0 > maxAbs {
			maxAbs = ad0
		}
		if ad1 > maxAbs {
			maxAbs = ad1
		}
		if m := math.Abs(c0); m > maxRef {
			maxRef = m
		}
		if m := math.Abs(c1); m > maxRef {
			maxRef = m
		}
	}
	if i < len(ref) {
		o0, r0 := ours[i], ref[i]
		special |= (o0&0x7F80 + 0x100) | (r0&0x7F80 + 0x100)
		a0 := float64(math.Float32frombits(uint32(o0) << 16))
		c0 := float64(math.Float32frombits(uint32(r0) << 16))
		e0 := a0 - c0
		ad0 := math.Abs(e0)
		sAbs += ad0
		sD += e0 * e0
		sO += a0 * a0
		sR += c0 * c0
		dot += a0 * c0
		maxAbs = max(maxAbs, ad0)
		maxRef = max(maxRef, math.Abs(c0))
	}
	*b = blockSums{sAbs, sD, sO, sR, dot, maxAbs, maxRef}
	return special&0x8000 == 0
}

// bf16Hist counts the ULP distances of a block of finite bf16 pairs, even
// elements in h0 and odd ones in h1 so that equal distances in a row do
// not wait on each other's increments, and returns the largest.
func bf16Hist(h0, h1 *[ulpDense]uint32, ours, ref []uint16) uint32 {
	ours = ours[:len(ref)]
	var top uint32
	i := 0
	for ; i+2 <= len(ref); i += 2 {
		x0 := lattice16(ours[i]) - lattice16(ref[i])
		x1 := lattice16(ours[i+1]) - lattice16(ref[i+1])
		m0, m1 := x0>>31, x1>>31
		d0, d1 := uint32((x0^m0)-m0), uint32((x1^m1)-m1)
		h0[d0&0xFFFF]++
		h1[d1&0xFFFF]++
		top = max(top, d0, d1)
	}
	if i < len(ref) {
		x := lattice16(ours[i]) - lattice16(ref[i])
		m := x >> 31
		d := uint32((x ^ m) - m)
		h0[d&0xFFFF]++
		top = max(top, d)
	}
	return top
}

// bf16Slow compares bf16 pairs one at a time, NaN and Inf included.
func (p *partial) bf16Slow(h *segHist, ours, ref []uint16, base int) {
	ours = ours[:len(ref)]
	for i, rb := range ref {
		ob := ours[i]
		if ob&0x7F80 >= 0x7F00 || rb&0x7F80 >= 0x7F00 { // NaN, Inf or mask-sized
			p.special(h, precision.BF16, precision.BF16ToF32(ob), precision.BF16ToF32(rb))
			continue
		}
		x := lattice16(ob) - lattice16(rb)
		m := x >> 31
		h.add(uint64((x ^ m) - m))
		a := float64(math.Float32frombits(uint32(ob) << 16))
		b := float64(math.Float32frombits(uint32(rb) << 16))
		e := a - b
		ad := math.Abs(e)
		p.foldSums(ad, e*e, a*a, b*b, a*b)
		if ad > p.maxAbs || p.maxAbsIndex < 0 {
			p.maxAbs, p.maxAbsIndex = ad, base+i
		}
		p.maxRef = max(p.maxRef, math.Abs(b))
		p.n++
	}
}

func (p *partial) foldSums(sAbs, sD, sO, sR, dot float64) {
	p.sumAbs += sAbs
	p.sumSqDiff += sD
	p.sumSqOurs += sO
	p.sumSqRef += sR
	p.dot += dot
}

// f32 compares float32 values on the f32 lattice (a reference stored in
// f32, or any dtype other than bf16 and f16 widened to float32).
func (p *partial) f32(h *segHist, ours, ref []float32, base int) {
	ours = ours[:len(ref)]
	lim := precision.MaskBits(precision.F32)
	var sAbs, sD, sO, sR, dot float64
	maxAbs, maxRef, idx := p.maxAbs, p.maxRef, p.maxAbsIndex
	finite := 0
	for i, r32 := range ref {
		o32 := ours[i]
		uo, ur := math.Float32bits(o32), math.Float32bits(r32)
		if uo&0x7FFFFFFF >= lim || ur&0x7FFFFFFF >= lim { // NaN, Inf or mask-sized
			p.special(h, precision.F32, o32, r32)
			continue
		}
		so, sr := -int64(uo>>31), -int64(ur>>31)
		x := ((int64(uo&0x7FFFFFFF) ^ so) - so) - ((int64(ur&0x7FFFFFFF) ^ sr) - sr)
		m := x >> 63
		if d := uint64((x ^ m) - m); d < ulpDense {
			h.dense[d]++
			h.top = max(h.top, uint32(d))
		} else {
			h.big = append(h.big, d)
		}
		a, b := float64(o32), float64(r32)
		e := a - b
		ad := math.Abs(e)
		sAbs += ad
		sD += e * e
		sO += a * a
		sR += b * b
		dot += a * b
		if ad > maxAbs || idx < 0 {
			maxAbs, idx = ad, base+i
		}
		maxRef = max(maxRef, math.Abs(b))
		finite++
	}
	p.foldSums(sAbs, sD, sO, sR, dot)
	p.maxAbs, p.maxRef, p.maxAbsIndex = maxAbs, maxRef, idx
	p.n += finite
}

// round16 rounds a finite x to f (bf16 or f16) and returns the bit pattern
// and whether rounding moved it.
func round16(f precision.Format, x float32) (uint16, bool) {
	if f == precision.BF16 {
		u := math.Float32bits(x)
		b := uint16((u + 0x7FFF + (u>>16)&1) >> 16)
		return b, uint32(b)<<16 != u
	}
	b := precision.F16Bits(x)
	return b, precision.F16ToF32(b) != x
}

// rounded compares float32 values on a 16-bit lattice (f is BF16 or F16):
// each side is rounded to f first, and values the rounding moved are
// counted as Inexact.
func (p *partial) rounded(h *segHist, f precision.Format, ours, ref []float32, base int) {
	ours = ours[:len(ref)]
	lim := precision.MaskBits(f)
	var sAbs, sD, sO, sR, dot float64
	maxAbs, maxRef, idx := p.maxAbs, p.maxRef, p.maxAbsIndex
	finite := 0
	for i, r32 := range ref {
		o32 := ours[i]
		if math.Float32bits(o32)&0x7FFFFFFF >= lim || math.Float32bits(r32)&0x7FFFFFFF >= lim { // NaN, Inf or mask-sized
			p.special(h, f, o32, r32)
			continue
		}
		bo, movedO := round16(f, o32)
		br, movedR := round16(f, r32)
		if movedO {
			p.ours.Inexact++
		}
		if movedR {
			p.ref.Inexact++
		}
		x := lattice16(bo) - lattice16(br)
		m := x >> 31
		d := uint32((x ^ m) - m)
		h.dense[d&0xFFFF]++
		h.top = max(h.top, d)
		a, b := float64(o32), float64(r32)
		e := a - b
		ad := math.Abs(e)
		sAbs += ad
		sD += e * e
		sO += a * a
		sR += b * b
		dot += a * b
		if ad > maxAbs || idx < 0 {
			maxAbs, idx = ad, base+i
		}
		maxRef = max(maxRef, math.Abs(b))
		finite++
	}
	p.foldSums(sAbs, sD, sO, sR, dot)
	p.maxAbs, p.maxRef, p.maxAbsIndex = maxAbs, maxRef, idx
	p.n += finite
}
