package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestDivisor checks zf_epi_offsets' division, (mulhi(n, m) + n) >> s,
// against n / d: every d below 2¹², powers of two and their neighbours,
// and random d up to 2³¹ − 1, each at the quotients' edges (k·d − 1,
// k·d), the largest n and random n below 2³¹.
func TestDivisor(t *testing.T) {
	div := func(n uint32, m uint32, s int32) uint32 {
		hi := uint32((uint64(n) * uint64(m)) >> 32)
		return (hi + n) >> uint32(s)
	}
	r := rand.New(rand.NewPCG(3, 4))
	var ds []int
	for d := 1; d < 1<<12; d++ {
		ds = append(ds, d)
	}
	for k := 12; k < 31; k++ {
		ds = append(ds, 1<<k-1, 1<<k, 1<<k+1)
	}
	for range 2000 {
		ds = append(ds, 1+r.IntN(1<<31-1))
	}
	const top = 1<<31 - 1
	for _, d := range ds {
		m, s := divisor(d)
		check := func(n int) {
			if n < 0 || n > top {
				return
			}
			if got, want := div(uint32(n), m, s), uint32(n/d); got != want {
				t.Fatalf("d %d (m %d, s %d), n %d: %d, want %d", d, m, s, n, got, want)
			}
		}
		check(0)
		check(top)
		check(top - top%d)
		check(top - top%d - 1)
		for range 64 {
			n := r.IntN(top + 1)
			check(n)
			q := n / d
			check(q*d - 1)
			check(q * d)
			check(q*d + d - 1)
		}
	}
}
