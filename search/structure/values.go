package structure

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// values reads and caches tensors by key, with content hashes for the
// bit-equality tests that tie the call tree's ports together.
type values struct {
	tr     *trace.Trace
	seed   maphash.Seed
	f32    map[string][]float32
	hash   map[string]uint64 // dtype + bytes
	sorted map[string]uint64 // dtype + bytes of the elements, sorted
}

func newValues(tr *trace.Trace) *values {
	return &values{tr: tr, seed: maphash.MakeSeed(), f32: map[string][]float32{}, hash: map[string]uint64{}, sorted: map[string]uint64{}}
}

// floats reads a real tensor as f32 (nil when it cannot).
func (v *values) floats(key string) []float32 {
	if f, ok := v.f32[key]; ok {
		return f
	}
	t, err := v.tr.Tensor(key)
	if err != nil {
		v.f32[key] = nil
		return nil
	}
	f, err := t.Float32()
	if err != nil {
		f = nil
	}
	v.f32[key] = f
	return f
}

// bytesHash hashes a tensor's dtype and bytes: equal hashes mean the same
// values in the same order, whatever the shape.
func (v *values) bytesHash(key string) uint64 {
	if h, ok := v.hash[key]; ok {
		return h
	}
	t, err := v.tr.Tensor(key)
	if err != nil {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(v.seed)
	h.WriteByte(byte(t.DType))
	h.Write(t.Bytes())
	s := h.Sum64()
	v.hash[key] = s
	return s
}

// sortedHash hashes a tensor's elements as a multiset: equal hashes mean
// the same values, possibly rearranged (a reshape and a transpose). It is
// order-independent without sorting: the sums (mod 2⁶⁴) of two
// independent 64-bit mixes of each element's bits, hashed with the dtype;
// linear in the elements (a sort of 14M elements took 1.5 s at real
// widths).
func (v *values) sortedHash(key string) uint64 {
	if h, ok := v.sorted[key]; ok {
		return h
	}
	t, err := v.tr.Tensor(key)
	if err != nil {
		return 0
	}
	size := t.DType.Size()
	b := t.Bytes()
	var s1, s2 uint64
	k1, k2 := v.seed1(), v.seed1()^0x9e3779b97f4a7c15
	for i := 0; i+size <= len(b); i += size {
		var e uint64
		for j := min(size, 8) - 1; j >= 0; j-- {
			e = e<<8 | uint64(b[i+j])
		}
		s1 += mix64(e ^ k1)
		s2 += mix64(e*0xff51afd7ed558ccd ^ k2)
	}
	var h maphash.Hash
	h.SetSeed(v.seed)
	h.WriteByte(byte(t.DType))
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], s1)
	binary.LittleEndian.PutUint64(buf[8:], s2)
	h.Write(buf[:])
	sum := h.Sum64()
	v.sorted[key] = sum
	return sum
}

// seed1 is a 64-bit key derived from the values' seed.
func (v *values) seed1() uint64 {
	var h maphash.Hash
	h.SetSeed(v.seed)
	h.WriteString("multiset")
	return h.Sum64()
}

// mix64 is SplitMix64's finaliser: a bijective mix of 64 bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// same reports whether two ports hold the same values in the same order.
func (v *values) same(a, b port) bool {
	return a.dt == b.dt && a.numel() == b.numel() && v.bytesHash(a.key) == v.bytesHash(b.key)
}

// rearranged reports whether two ports hold the same multiset of values.
func (v *values) rearranged(a, b port) bool {
	return a.dt == b.dt && a.numel() == b.numel() && v.sortedHash(a.key) == v.sortedHash(b.key)
}

// relErr is the rel-RMS of ours, rounded to f, against ref, mask-sized
// values compared apart (precision.Sums); +Inf when the lengths differ or
// ref is all zero while ours is not.
func relErr(ours []float64, ref []float32, f precision.Format) float64 {
	if len(ours) != len(ref) || len(ref) == 0 {
		return math.Inf(1)
	}
	var s precision.Sums
	s.AddRounded(f, ours, ref)
	if math.IsNaN(s.D2) || math.IsInf(s.D2, 0) {
		return math.Inf(1)
	}
	return s.RelRMS()
}

// close compares two ports' values (the wider rounded to the narrower's
// format): the rel-RMS, +Inf when they cannot be compared.
func (v *values) close(a, b port) float64 {
	if a.numel() != b.numel() || !a.float() || !b.float() {
		return math.Inf(1)
	}
	x, y := v.floats(a.key), v.floats(b.key)
	if x == nil || y == nil {
		return math.Inf(1)
	}
	f := b.dt.Format()
	if a.dt.Format() != precision.F32 {
		f = a.dt.Format()
	}
	return relErr(widen(x), y, f)
}

func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// Activations tried where a pointwise function sits between two captured
// tensors (exec's vocabulary).
var acts = []exec.ActKind{exec.ActIdentity, exec.ActSiLU, exec.ActGELUTanh, exec.ActGELUErf, exec.ActTanh, exec.ActSigmoid, exec.ActReLU, exec.ActHardswish, exec.ActHardsigmoid}

// actOf finds the activation f with y ≈ f(x) elementwise (computed in f32,
// rounded to y's format): the best one and its rel-RMS.
func actOf(x []float32, y []float32, f precision.Format) (exec.ActKind, float64) {
	best, bestErr := exec.ActIdentity, math.Inf(1)
	if len(x) != len(y) {
		return best, bestErr
	}
	idx := sampleIndices(len(x))
	ours, ref := make([]float64, len(idx)), make([]float32, len(idx))
	for i, j := range idx {
		ref[i] = y[j]
	}
	for _, a := range acts {
		for i, j := range idx {
			ours[i] = float64(exec.Activate(a, x[j], 0))
		}
		if e := relErr(ours, ref, f); e < bestErr {
			best, bestErr = a, e
		}
	}
	return best, bestErr
}

// maxSample bounds how many elements a pointwise value test reads.
const maxSample = 1 << 16

// sampleIndices spreads at most maxSample indices over [0, n).
func sampleIndices(n int) []int {
	k := min(n, maxSample)
	out := make([]int, k)
	for i := range out {
		out[i] = int(int64(i) * int64(n) / int64(k))
	}
	return out
}

// gluOf finds f with y ≈ f(g)·u: the best one and its rel-RMS.
func gluOf(g, u, y []float32, f precision.Format) (exec.ActKind, float64) {
	best, bestErr := exec.ActIdentity, math.Inf(1)
	if len(g) != len(y) || len(u) != len(y) {
		return best, bestErr
	}
	idx := sampleIndices(len(y))
	ours, ref := make([]float64, len(idx)), make([]float32, len(idx))
	for i, j := range idx {
		ref[i] = y[j]
	}
	for _, a := range acts[1:] {
		for i, j := range idx {
			ours[i] = float64(f.Round(exec.Activate(a, g[j], 0))) * float64(u[j])
		}
		if e := relErr(ours, ref, f); e < bestErr {
			best, bestErr = a, e
		}
	}
	return best, bestErr
}

// affineFit fits y[r, c] ≈ a[c]·x[r, c] + b[c] per channel over the rows
// (least squares) and returns a, b and the rel-RMS of the fit. x and y
// hold rows of width w. The sums run row by row into per-channel
// accumulators (each channel still sums its rows in order): a column walk
// of a [4608, 3072] tensor misses the cache on every element.
func affineFit(x, y []float32, w int) (a, b []float64, err float64) {
	if len(x) != len(y) || w <= 0 || len(x)%w != 0 || len(x)/w < 3 {
		return nil, nil, math.Inf(1)
	}
	rows := len(x) / w
	a, b = make([]float64, w), make([]float64, w)
	sx, sy, sxx, sxy := make([]float64, w), make([]float64, w), make([]float64, w), make([]float64, w)
	for r := range rows {
		xr, yr := x[r*w:(r+1)*w], y[r*w:(r+1)*w]
		for c, xf := range xr {
			xv, yv := float64(xf), float64(yr[c])
			sx[c] += xv
			sy[c] += yv
			sxx[c] += xv * xv
			sxy[c] += xv * yv
		}
	}
	n := float64(rows)
	for c := range w {
		den := n*sxx[c] - sx[c]*sx[c]
		if den > 1e-12*n*n {
			a[c] = (n*sxy[c] - sx[c]*sy[c]) / den
		}
		b[c] = (sy[c] - a[c]*sx[c]) / n
	}
	sd, sr := sx, sy // reused: per-channel sums of the residual and the target
	clear(sd)
	clear(sr)
	for r := range rows {
		xr, yr := x[r*w:(r+1)*w], y[r*w:(r+1)*w]
		for c, xf := range xr {
			yv := float64(yr[c])
			d := a[c]*float64(xf) + b[c] - yv
			sd[c] += d * d
			sr[c] += yv * yv
		}
	}
	var td, tr float64
	for c := range w {
		td += sd[c]
		tr += sr[c]
	}
	return a, b, precision.RelRMSFromSums(td, tr)
}

// normalizedRows reports whether every row of width w has mean ≈ 0 and
// variance ≈ 1 (a layer norm without affine) or mean square ≈ 1 (an RMS
// norm without affine).
func normalizedRows(y []float32, w int) bool {
	if w < 4 || len(y) == 0 || len(y)%w != 0 {
		return false
	}
	layer, rms := true, true
	for r := 0; r < len(y)/w; r++ {
		var s, ss float64
		for _, v := range y[r*w : (r+1)*w] {
			s += float64(v)
			ss += float64(v) * float64(v)
		}
		mean, ms := s/float64(w), ss/float64(w)
		if math.Abs(ms-1) > 0.05 {
			rms = false
		}
		if math.Abs(mean) > 0.05 || math.Abs(ms-mean*mean-1) > 0.05 {
			layer = false
		}
		if !layer && !rms {
			return false
		}
	}
	return true
}

// sinusoidal reports whether rows of width w are sinusoid embeddings: the
// two halves (or adjacent pairs) satisfy a² + b² = 1.
func sinusoidal(y []float32, w int) bool {
	if w < 4 || w%2 != 0 || len(y) == 0 || len(y)%w != 0 {
		return false
	}
	half, pairs := true, true
	for r := 0; r < len(y)/w; r++ {
		row := y[r*w : (r+1)*w]
		for j := 0; j < w/2; j++ {
			a, b := float64(row[j]), float64(row[j+w/2])
			if math.Abs(a*a+b*b-1) > 0.02 {
				half = false
			}
			a, b = float64(row[2*j]), float64(row[2*j+1])
			if math.Abs(a*a+b*b-1) > 0.02 {
				pairs = false
			}
		}
	}
	return half || pairs
}

// integral reports whether every value is an integer of modest size.
func integral(x []float64) bool {
	for _, v := range x {
		if v != math.Trunc(v) || math.Abs(v) > 1<<24 {
			return false
		}
	}
	return len(x) > 0
}

// float64s reads any real tensor as float64 (integers included).
func (v *values) float64s(key string) []float64 {
	t, err := v.tr.Tensor(key)
	if err != nil || t.DType.Components() != 1 {
		return nil
	}
	f, err := t.Float64()
	if err != nil {
		return nil
	}
	return f
}

// containsBytes reports at which element offset the bytes of part occur
// inside whole (both of one dtype), -1 when they do not.
func (v *values) containsAt(whole, part port) int {
	if whole.dt != part.dt || part.numel() > whole.numel() {
		return -1
	}
	tw, err1 := v.tr.Tensor(whole.key)
	tp, err2 := v.tr.Tensor(part.key)
	if err1 != nil || err2 != nil {
		return -1
	}
	size := whole.dt.Size()
	wb, pb := tw.Bytes(), tp.Bytes()
	for off := 0; off+len(pb) <= len(wb); off += size {
		if string(wb[off:off+len(pb)]) == string(pb) {
			return off / size
		}
	}
	return -1
}
