package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The f64 emulation (zf_d_*) and the integer square root against Go's
// float64 and math.Sqrt, bit for bit, on random bit patterns of every
// exponent, near-cancelling pairs, subnormals, zeros, infinities and NaNs.

const f64Driver = `
#include <cstdio>
int main(int argc, char** argv) {
  FILE* in = fopen(argv[1], "rb");
  FILE* out = fopen(argv[2], "wb");
  if (!in || !out) { perror("open"); return 2; }
  int op;
  zf_u64 ab[2];
  while (fread(&op, 4, 1, in) == 1 && fread(ab, 8, 2, in) == 2) {
    zf_u64 a = ab[0], b = ab[1], r = 0;
    float fa = zf_float((uint)a);
    switch (op) {
    case 1: r = zf_d_add(a, b); break;
    case 2: r = zf_d_sub(a, b); break;
    case 3: r = zf_d_mul(a, b); break;
    case 4: r = zf_d_div(a, b); break;
    case 5: r = zf_bits(zf_d_to_f32(a)); break;
    case 6: r = zf_d_from_f32(fa); break;
    case 7: r = zf_bits(zf_sqrt_f32(fa)); break;
    case 8: r = zf_d_from_int((int)a); break;
    default: fprintf(stderr, "op %d\n", op); return 2;
    }
    fwrite(&r, 8, 1, out);
  }
  fclose(out);
  return 0;
}
`

type f64Case struct {
	op   int32
	a, b uint64
}

// f64Bits draws a float64 bit pattern: any exponent, with the edges
// (subnormal, zero, max, inf, NaN) and f32-range values over-represented.
func f64Bits(r *rand.Rand) uint64 {
	sign := uint64(r.IntN(2)) << 63
	frac := r.Uint64() & (1<<52 - 1)
	switch r.IntN(8) {
	case 0:
		return sign | frac // subnormal
	case 1:
		return sign | []uint64{0, 0x7FF << 52, 0x7FF<<52 | 1<<51, 0x7FE<<52 | (1<<52 - 1), 1, 1 << 52}[r.IntN(6)]
	case 2, 3:
		return sign | uint64(1023-150+r.IntN(300))<<52 | frac // around the f32 range
	case 4:
		return sign | uint64(1023+r.IntN(8)-4)<<52 | frac&^(1<<uint(r.IntN(40))-1) // near 1, short fractions (ties)
	}
	return sign | uint64(r.IntN(2047))<<52 | frac
}

func f64Want(c f64Case) uint64 {
	a, b := math.Float64frombits(c.a), math.Float64frombits(c.b)
	switch c.op {
	case 1:
		return math.Float64bits(a + b)
	case 2:
		return math.Float64bits(a - b)
	case 3:
		return math.Float64bits(float64(a * b))
	case 4:
		return math.Float64bits(a / b)
	case 5:
		return uint64(math.Float32bits(float32(a)))
	case 6:
		return math.Float64bits(float64(math.Float32frombits(uint32(c.a))))
	case 7:
		return uint64(math.Float32bits(float32(math.Sqrt(float64(math.Float32frombits(uint32(c.a)))))))
	case 8:
		return math.Float64bits(float64(int32(c.a)))
	}
	panic("op")
}

func isNaNBits(op int32, u uint64) bool {
	if op == 5 || op == 7 {
		return math.IsNaN(float64(math.Float32frombits(uint32(u))))
	}
	return math.IsNaN(math.Float64frombits(u))
}

func TestHostF64Emulation(t *testing.T) {
	bin := compileHost(t, f64Driver)
	r := rand.New(rand.NewPCG(5, 6))
	var cases []f64Case
	for op := int32(1); op <= 4; op++ {
		for range 200000 {
			a, b := f64Bits(r), f64Bits(r)
			if r.IntN(4) == 0 { // b close to ±a: cancellation, equal exponents
				b = a&^(1<<63) ^ uint64(r.IntN(2))<<63 + uint64(r.IntN(5)) - 2
			}
			cases = append(cases, f64Case{op, a, b})
		}
	}
	for range 200000 {
		cases = append(cases, f64Case{5, f64Bits(r), 0})
		u := uint64(r.Uint32())
		cases = append(cases, f64Case{6, u, 0}, f64Case{7, u, 0}, f64Case{8, uint64(r.Int32N(math.MaxInt32)), 0})
	}
	for _, u := range []uint32{0, 1 << 31, 1, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000, 0x40800000, 0xBF800000} {
		cases = append(cases, f64Case{6, uint64(u), 0}, f64Case{7, uint64(u), 0})
	}
	// f64 → f32 at the edges: f32 max, the overflow tie, subnormal ties.
	for _, v := range []float64{math.MaxFloat32, 3.4028235677973366e38, 3.402823567797337e38, 1.401298464324817e-45, 7.006492321624085e-46,
		7.006492321624087e-46, 1.1754942807573643e-38, 1 + 1.0/(1<<24), 1 + 3.0/(1<<24), -0.0} {
		cases = append(cases, f64Case{5, math.Float64bits(v), 0})
	}
	cases = append(cases, f64Case{8, 0, 0}, f64Case{8, 1, 0}, f64Case{8, math.MaxInt32, 0})

	var in bytes.Buffer
	for _, c := range cases {
		binary.Write(&in, binary.LittleEndian, c.op)
		binary.Write(&in, binary.LittleEndian, [2]uint64{c.a, c.b})
	}
	dir := t.TempDir()
	inPath, outPath := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.WriteFile(inPath, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, inPath, outPath).CombinedOutput(); err != nil {
		t.Fatalf("running the f64 driver: %v\n%s", err, out)
	}
	outs, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 8*len(cases) {
		t.Fatalf("%d bytes back for %d cases", len(outs), len(cases))
	}
	names := []string{"", "add", "sub", "mul", "div", "to_f32", "from_f32", "sqrt_f32", "from_int"}
	bad := map[int32]int{}
	for i, c := range cases {
		got, want := binary.LittleEndian.Uint64(outs[8*i:]), f64Want(c)
		if got == want || isNaNBits(c.op, got) && isNaNBits(c.op, want) {
			continue
		}
		if bad[c.op] < 3 {
			t.Errorf("%s(%#x, %#x) = %#x, Go %#x", names[c.op], c.a, c.b, got, want)
		}
		bad[c.op]++
	}
	for op, n := range bad {
		t.Errorf("%s: %d differ", names[op], n)
	}
	t.Logf("%d cases (200000 each of add, sub, mul, div, to_f32, from_f32, sqrt_f32, from_int, plus edges), all bit-exact with Go", len(cases))
}
