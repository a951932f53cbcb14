package exec

import (
	"math"
	"math/big"
)

// SinCUDA and CosCUDA are sinf and cosf as CUDA computes them without fast
// math (libdevice's __nv_sinf and __nv_cosf, the functions PyTorch's CUDA
// kernels call): the quadrant j = rint(a·2/π), a three-part Cody–Waite
// residual t = a − j·π/2 with fused multiply-adds, then a minimax
// polynomial in t² for sin or cos by the quadrant, every step an f32
// operation. Beyond |a| ≥ 105615 libdevice reduces by Payne–Hanek; there
// the residual here is exact, rounded once to f32, which can differ from
// libdevice's by an ulp.
func SinCUDA(a float32) float32 { t, j := reduceCUDA(a); return sinCosPoly(t, j) }

// CosCUDA: see SinCUDA (the sine polynomial one quadrant on).
func CosCUDA(a float32) float32 { t, j := reduceCUDA(a); return sinCosPoly(t, j+1) }

// The constants, as f32 bit patterns.
var (
	twoOverPi  = math.Float32frombits(0x3F22F983)
	piHalfHi   = math.Float32frombits(0xBFC90FDA) // −π/2, three parts
	piHalfMid  = math.Float32frombits(0xB3A22168)
	piHalfLo   = math.Float32frombits(0xA7C234C5)
	sinC0      = math.Float32frombits(0xB94D4153)
	sinC1      = math.Float32frombits(0x3C0885E4)
	sinC2      = math.Float32frombits(0xBE2AAAA8)
	cosC0a     = math.Float32frombits(0x37CBAC00)
	cosC0b     = math.Float32frombits(0xBAB607ED)
	cosC1      = math.Float32frombits(0x3D2AAABB)
	cosC2      = math.Float32frombits(0xBEFFFFFF)
	payneHanek = float32(105615)
)

// reduceCUDA is the residual t and quadrant j of a.
func reduceCUDA(a float32) (float32, int64) {
	switch {
	case math.IsInf(float64(a), 0) || math.IsNaN(float64(a)):
		return a * 0, 0 // NaN
	case float32(math.Abs(float64(a))) >= payneHanek:
		return reduceExact(a)
	}
	j := math.RoundToEven(float64(a * twoOverPi))
	jf := float32(j)
	t := FMA32(jf, piHalfHi, a)
	t = FMA32(jf, piHalfMid, t)
	t = FMA32(jf, piHalfLo, t)
	return t, int64(j)
}

// piHalf is π/2 to 300 bits, enough for any f32's residual.
var piHalf = func() *big.Float {
	pi, _, err := big.ParseFloat("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651328230664709384460955058223172535940812848111745028410270193852110555964462294895493038196", 10, 300, big.ToNearestEven)
	if err != nil {
		panic(err)
	}
	return pi.Quo(pi, big.NewFloat(2).SetPrec(300))
}()

// reduceExact is a − j·π/2 for the nearest integer j, exact, rounded to
// f32, with j mod 4 (all a quadrant needs).
func reduceExact(a float32) (float32, int64) {
	const prec = 300
	x := new(big.Float).SetPrec(prec).SetFloat64(float64(a))
	q := new(big.Float).SetPrec(prec).Quo(x, piHalf)
	q.Add(q, big.NewFloat(0.5).SetPrec(prec)) // floor(q + ½): a tie is measure zero
	j, _ := q.Int(nil)
	if q.Sign() < 0 && !q.IsInt() {
		j.Sub(j, big.NewInt(1)) // Int truncates toward zero
	}
	r := new(big.Float).SetPrec(prec).Mul(new(big.Float).SetPrec(prec).SetInt(j), piHalf)
	r.Sub(x, r)
	t, _ := r.Float32()
	return t, new(big.Int).And(j, big.NewInt(3)).Int64()
}

// sinCosPoly is sin t for even i, cos t for odd i, negated when i&2.
func sinCosPoly(t float32, i int64) float32 {
	t2 := t * t
	even := i&1 == 0
	s, c0, c1, c2 := float32(1), FMA32(cosC0a, t2, cosC0b), cosC1, cosC2
	if even {
		s, c0, c1, c2 = t, sinC0, sinC1, sinC2
	}
	u := FMA32(t2, s, 0)
	p := FMA32(c0, t2, c1)
	p = FMA32(p, t2, c2)
	z := FMA32(p, u, s)
	if i&2 != 0 {
		z = FMA32(z, -1, 0)
	}
	return z
}
