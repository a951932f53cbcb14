package precision

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"testing"
)

// lattice is a narrow format's non-negative values in order, built from the
// format's definition with float64 arithmetic, independent of the bit tricks
// under test. Entry k is the value of bit pattern k; the last entry is Inf,
// placed where an unbounded exponent would put the next power of two, so
// that the midpoint rule decides overflow like any other rounding.
type lattice struct {
	vals []float64
	mids []float64 // mids[k] = (vals[k]+vals[k+1])/2, exact in float64
}

func newLattice(expBits, mantBits uint) lattice {
	bias := 1<<(expBits-1) - 1
	n := (1<<expBits-1)<<mantBits + 1 // finite patterns plus Inf
	l := lattice{vals: make([]float64, n), mids: make([]float64, n-1)}
	for k := range n {
		e := k >> mantBits
		m := float64(k & (1<<mantBits - 1))
		if e == 0 {
			l.vals[k] = math.Ldexp(m, 1-bias-int(mantBits))
		} else {
			l.vals[k] = math.Ldexp(1+m/float64(uint(1)<<mantBits), e-bias)
		}
	}
	for k := range n - 1 {
		l.mids[k] = (l.vals[k] + l.vals[k+1]) / 2
	}
	return l
}

// round is the reference rounding of x >= 0: the nearest lattice point,
// ties to the even pattern. It is slow (a binary search) and used for
// sampled values; the exhaustive sweep uses runs.
func (l lattice) round(x float64) uint16 {
	k := sort.Search(len(l.vals), func(i int) bool { return l.vals[i] > x }) - 1
	if k == len(l.vals)-1 {
		return uint16(k)
	}
	switch mid := l.mids[k]; {
	case x < mid:
		return uint16(k)
	case x > mid:
		return uint16(k + 1)
	case k%2 == 0:
		return uint16(k)
	}
	return uint16(k + 1)
}

// runs splits the non-negative non-NaN f32 patterns 0..0x7F800000 into the
// maximal runs that round to one code: code k's run starts at the f32
// pattern of the midpoint below it (that pattern itself if k is even, since
// ties go to even, else the next one). Non-negative f32 patterns are ordered
// like their values, and every midpoint of bf16 and f16 is an f32 value
// (checked here), so the runs are exact.
type runs struct {
	start []uint32
	code  []uint16
}

func (l lattice) runs() runs {
	rs := runs{start: []uint32{0}, code: []uint16{0}}
	for k := 1; k < len(l.vals); k++ {
		m := l.mids[k-1]
		if float64(float32(m)) != m {
			panic(fmt.Sprintf("midpoint %g is not an f32 value", m))
		}
		p := math.Float32bits(float32(m))
		if k%2 == 1 {
			p++
		}
		rs.start = append(rs.start, p)
		rs.code = append(rs.code, uint16(k))
	}
	return rs
}

// expect fills want with the reference codes of patterns lo, lo+1, ...
func (rs runs) expect(want []uint16, lo uint32) {
	r := sort.Search(len(rs.start), func(i int) bool { return rs.start[i] > lo }) - 1
	for i := 0; i < len(want); r++ {
		end := len(want)
		if r+1 < len(rs.start) && uint64(rs.start[r+1]-lo) < uint64(end) {
			end = int(rs.start[r+1] - lo)
		}
		for ; i < end; i++ {
			want[i] = rs.code[r]
		}
	}
}

// narrowFormat is what the tests need to know about bf16 or f16.
type narrowFormat struct {
	name     string
	lat      lattice
	runs     runs
	bits     func(float32) uint16
	roundS   func(dst, src []float32)
	widen    func(uint16) float32
	expMask  uint16 // exponent bits of the pattern
	quietBit uint16
	// sweep checks the block of non-negative patterns start, start+1, ...
	// and their negations with direct calls, so the functions under test
	// inline: it returns the first failing pattern, or ok false if none.
	sweep func(start uint32, want []uint16, src, dst []float32) (bad uint32, found bool)
}

func bf16Format() narrowFormat {
	lat := newLattice(8, 7)
	return narrowFormat{
		name: "bf16", lat: lat, runs: lat.runs(),
		bits: BF16Bits, roundS: RoundSliceBF16, widen: BF16ToF32,
		expMask: 0x7F80, quietBit: 0x0040,
		sweep: func(start uint32, want []uint16, src, dst []float32) (uint32, bool) {
			src, dst = src[:len(want)], dst[:len(want)]
			for _, sign := range [2]uint32{0, 1 << 31} {
				for i := range src {
					src[i] = math.Float32frombits(start + uint32(i) | sign)
				}
				RoundSliceBF16(dst, src)
				var bad uint32
				for i, x := range src {
					w := uint32(want[i]) | sign>>16
					bad |= uint32(BF16Bits(x)) ^ w | math.Float32bits(dst[i]) ^ w<<16
				}
				if bad != 0 {
					for i, x := range src {
						w := uint32(want[i]) | sign>>16
						if uint32(BF16Bits(x)) != w || math.Float32bits(dst[i]) != w<<16 {
							return math.Float32bits(x), true
						}
					}
				}
			}
			return 0, false
		},
	}
}

// f16Format's sweep checks F16Bits only: RoundSliceF16 is F16ToF32 of it,
// and F16ToF32 is checked on all 2^16 patterns by TestWidenAll.
func f16Format() narrowFormat {
	lat := newLattice(5, 10)
	return narrowFormat{
		name: "f16", lat: lat, runs: lat.runs(),
		bits: F16Bits, roundS: RoundSliceF16, widen: F16ToF32,
		expMask: 0x7C00, quietBit: 0x0200,
		sweep: func(start uint32, want []uint16, _, _ []float32) (uint32, bool) {
			var bad uint16
			for i, w := range want {
				u := start + uint32(i)
				bad |= F16Bits(math.Float32frombits(u)) ^ w | F16Bits(math.Float32frombits(u|1<<31)) ^ (w | 0x8000)
			}
			if bad != 0 {
				for i, w := range want {
					for _, u := range [2]uint32{start + uint32(i), (start + uint32(i)) | 1<<31} {
						if F16Bits(math.Float32frombits(u)) != w|uint16(u>>16)&0x8000 {
							return u, true
						}
					}
				}
			}
			return 0, false
		},
	}
}

// valBits is the f32 pattern of lattice code k's value.
func (nf narrowFormat) valBits(k uint16) uint32 {
	if int(k) == len(nf.lat.vals)-1 {
		return 0x7F800000
	}
	return math.Float32bits(float32(nf.lat.vals[k]))
}

// checkNaN says what is wrong, if anything, with the narrowing h of the NaN
// whose f32 pattern is u.
func (nf narrowFormat) checkNaN(u uint32, h uint16) error {
	switch {
	case h&nf.expMask != nf.expMask || h&^0x8000&^nf.expMask == 0:
		return fmt.Errorf("NaN %#08x narrowed to non-NaN %#04x", u, h)
	case h&nf.quietBit == 0:
		return fmt.Errorf("NaN %#08x narrowed to signalling %#04x", u, h)
	case (h>>15 == 1) != (u>>31 == 1):
		return fmt.Errorf("NaN %#08x lost its sign: %#04x", u, h)
	}
	return nil
}

// checkRange checks every non-negative non-NaN f32 pattern in [lo, hi)
// and its negation against the runs.
func (nf narrowFormat) checkRange(lo, hi uint32) error {
	const block = 4096
	src := make([]float32, block)
	dst := make([]float32, block)
	want := make([]uint16, block)
	for start := lo; start < hi; start += block {
		n := min(block, hi-start)
		nf.runs.expect(want[:n], start)
		if u, bad := nf.sweep(start, want[:n], src, dst); bad {
			x := math.Float32frombits(u)
			var slice [1]float32
			nf.roundS(slice[:], []float32{x})
			return fmt.Errorf("%s of %#08x (%g): bits %#04x, slice %#08x; want %#04x",
				nf.name, u, x, nf.bits(x), math.Float32bits(slice[0]),
				want[u&^(1<<31)-start]|uint16(u>>16)&0x8000)
		}
	}
	return nil
}

// checkPatterns checks arbitrary f32 patterns (any sign, NaN included) with
// the scalar and slice conversions against the slow reference.
func (nf narrowFormat) checkPatterns(us []uint32) error {
	src := make([]float32, len(us))
	dst := make([]float32, len(us))
	for i, u := range us {
		src[i] = math.Float32frombits(u)
	}
	nf.roundS(dst, src)
	for i, u := range us {
		h := nf.bits(src[i])
		if u&^(1<<31) > 0x7F800000 {
			if err := nf.checkNaN(u, h); err != nil {
				return err
			}
			if math.Float32bits(dst[i]) != math.Float32bits(nf.widen(h)) {
				return fmt.Errorf("%s slice round of NaN %#08x = %#08x", nf.name, u, math.Float32bits(dst[i]))
			}
			continue
		}
		sign := u & (1 << 31)
		k := nf.lat.round(math.Abs(float64(src[i])))
		if want := k | uint16(sign>>16); h != want {
			return fmt.Errorf("%s(%#08x = %g) = %#04x, want %#04x", nf.name, u, src[i], h, want)
		}
		if got, want := math.Float32bits(dst[i]), nf.valBits(k)|sign; got != want {
			return fmt.Errorf("%s slice round of %#08x = %#08x, want %#08x", nf.name, u, got, want)
		}
	}
	return nil
}

// checkAll checks all 2^32 f32 patterns, spread over the cores.
func (nf narrowFormat) checkAll(t *testing.T) {
	const chunks = 1024
	var wg sync.WaitGroup
	work := make(chan uint32)
	var mu sync.Mutex
	var errs []error
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range work {
				err := nf.checkRange(split(0, 0x7F800001, c, chunks))
				if err == nil {
					err = nf.checkNaNRange(split(0x7F800001, 0x80000000, c, chunks))
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for c := range uint32(chunks) {
		work <- c
	}
	close(work)
	wg.Wait()
	for i, err := range errs {
		if i == 10 {
			t.Fatalf("... and %d more failing chunks", len(errs)-10)
		}
		t.Error(err)
	}
}

// split returns chunk c of n of [lo, hi).
func split(lo, hi, c, n uint32) (uint32, uint32) {
	w := uint64(hi - lo)
	return lo + uint32(w*uint64(c)/uint64(n)), lo + uint32(w*uint64(c+1)/uint64(n))
}

// checkNaNRange checks the NaN magnitudes in [lo, hi), both signs.
func (nf narrowFormat) checkNaNRange(lo, hi uint32) error {
	us := make([]uint32, 0, 2*(hi-lo))
	for u := lo; u < hi; u++ {
		us = append(us, u, u|1<<31)
	}
	return nf.checkPatterns(us)
}
