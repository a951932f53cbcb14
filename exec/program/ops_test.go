package program

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// runOne builds a one-node program over the given inputs (Input values,
// uploaded in their formats) and runs it through the interpreter.
func runOne(t *testing.T, n Node, ins map[string]*Value) ([]float32, []int) {
	t.Helper()
	b := cpu.New(1)
	p := &Program{Values: map[string]*Value{}}
	env := map[string]exec.Tensor{}
	shapes := make([][]int, len(n.In))
	for i, name := range n.In {
		if name == "" {
			continue
		}
		v := ins[name]
		p.Values[name], p.Order = v, append(p.Order, name)
		x, err := b.Upload(v.Data, v.Shape, v.Format)
		if err != nil {
			t.Fatal(err)
		}
		env[name] = x
		shapes[i] = v.Shape
	}
	outs, err := inferShapes(&n, shapes)
	if err != nil {
		t.Fatalf("%s: shapes: %v", n.Op, err)
	}
	p.Values["y"] = &Value{Name: "y", Kind: Temp, Shape: outs[0]}
	p.Order = append(p.Order, "y")
	n.Out = []string{"y"}
	p.Nodes = []Node{n}
	p.Outputs = []string{"y"}
	if err := p.finalize(); err != nil {
		t.Fatal(err)
	}
	it := &Interpreter{B: b, P: p}
	res, err := it.Forward(0, env)
	if err != nil {
		t.Fatalf("%s: %v", n.Op, err)
	}
	got, err := b.Download(res[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res[0].Shape(), outs[0]) {
		t.Errorf("%s: result %v, inferred %v", n.Op, res[0].Shape(), outs[0])
	}
	return got, res[0].Shape()
}

func in(name string, kind ValueKind, f precision.Format, shape []int, data ...float32) *Value {
	return &Value{Name: name, Kind: kind, Shape: shape, Data: data, Format: f}
}

// TestConstScalarOperand: x · c and x + c with c a Const [1] in f32 and x
// bf16 compute in f32 and round once to Spec.Out (torch's x * 0.22 on a
// bf16 tensor), so the constant is not rounded to bf16 first.
func TestConstScalarOperand(t *testing.T) {
	bf := precision.BF16
	c022 := float32(0.22) // f32 0.2199999988…; in bf16 it would be 0.2197265625
	cases := []struct {
		name string
		op   Op
		x, c float32
		out  precision.Format
		want float32
	}{
		// 0.796875 · 0.22 = 0.1753125… → bf16 0.17578125 (with c in bf16: 0.1748046875).
		{"mul 0.22", OpMul, 0.796875, c022, bf, 0.17578125},
		{"mul 0.22 f32 out", OpMul, 0.796875, c022, precision.F32, float32(0.796875) * c022},
		// (1 + 2^-7) · 12 = 12.09375, a tie between 12.0625 and 12.125: to even.
		{"mul 12", OpMul, 1 + 1.0/128, 12, bf, 12.125},
		// 0.03125 + 0.22 = 0.25125 → 0.251953125 (with c in bf16: 0.25).
		{"add 0.22", OpAdd, 0.03125, c022, bf, 0.251953125},
		{"sub 0.22", OpSub, 0.796875, c022, bf, precision.RoundBF16(0.796875 - c022)},
		{"div 12", OpDiv, 7, 12, bf, precision.RoundBF16(7.0 / 12)},
	}
	for _, c := range cases {
		for _, order := range [][2]string{{"x", "c"}, {"c", "x"}} {
			if (c.op == OpSub || c.op == OpDiv) && order[0] == "c" {
				continue
			}
			ins := map[string]*Value{
				"x": in("x", Input, bf, []int{1, 2, 1}, c.x, c.x),
				"c": in("c", Const, precision.F32, []int{1}, c.c),
			}
			got, shape := runOne(t, Node{Op: c.op, In: order[:], Spec: exec.Out(c.out)}, ins)
			if !slices.Equal(shape, []int{1, 2, 1}) {
				t.Errorf("%s: shape %v", c.name, shape)
			}
			for i, g := range got {
				if math.Float32bits(g) != math.Float32bits(c.want) {
					t.Errorf("%s (%s %s)[%d] = %v, want %v", c.name, order[0], order[1], i, g, c.want)
				}
			}
		}
	}
}

func TestSubDivPermuteNodes(t *testing.T) {
	f32 := precision.F32
	a := in("a", Input, f32, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	b := in("b", Input, f32, []int{3}, 1, 2, 4)
	got, _ := runOne(t, Node{Op: OpSub, In: []string{"a", "b"}, Spec: exec.Out(f32)}, map[string]*Value{"a": a, "b": b})
	if want := []float32{0, 0, -1, 3, 3, 2}; !slices.Equal(got, want) {
		t.Errorf("sub: %v, want %v", got, want)
	}
	got, _ = runOne(t, Node{Op: OpDiv, In: []string{"a", "b"}, Spec: exec.Out(f32)}, map[string]*Value{"a": a, "b": b})
	if want := []float32{1, 1, 0.75, 4, 2.5, 1.5}; !slices.Equal(got, want) {
		t.Errorf("div: %v, want %v", got, want)
	}
	// [B=1, S=2, H=3] → heads first [1, 3, 2]; a movement op: no Spec.
	x := in("x", Input, f32, []int{1, 2, 3}, 0, 1, 2, 3, 4, 5)
	got, shape := runOne(t, Node{Op: OpPermute, In: []string{"x"}, Attrs: Attrs{Perm: []int{0, 2, 1}}}, map[string]*Value{"x": x})
	if want := []float32{0, 3, 1, 4, 2, 5}; !slices.Equal(got, want) || !slices.Equal(shape, []int{1, 3, 2}) {
		t.Errorf("permute: %v %v, want %v [1 3 2]", got, shape, want)
	}
	got, _ = runOne(t, Node{Op: OpPermute, In: []string{"x"}, Attrs: Attrs{Perm: []int{-1, 0, 1}}}, map[string]*Value{"x": x})
	if want := []float32{0, 3, 1, 4, 2, 5}; !slices.Equal(got, want) {
		t.Errorf("permute with a negative axis: %v, want %v", got, want)
	}
	if !OpPermute.movement() || OpSub.movement() || OpDiv.movement() {
		t.Error("permute must be a movement op, sub and div not")
	}
	for _, bad := range [][]int{{0, 1}, {0, 0, 1}, {0, 1, 3}} {
		n := Node{Op: OpPermute, In: []string{"x"}, Attrs: Attrs{Perm: bad}}
		if _, err := inferShapes(&n, [][]int{{1, 2, 3}}); err == nil {
			t.Errorf("permute of [1 2 3] by %v accepted", bad)
		}
	}
	n := Node{Op: OpSub, In: []string{"a", "b"}}
	if _, err := inferShapes(&n, [][]int{{2, 3}, {2}}); err == nil {
		t.Error("sub of [2 3] and [2] accepted")
	}
	for _, o := range []Op{OpPermute, OpSub, OpDiv} {
		if o.String() == "" || o.String()[0] == 'O' {
			t.Errorf("op %d has no name (%q)", o, o.String())
		}
	}
}

// TestAttentionNodeBias: an attention node reads its bias from In[4]; a
// node of four inputs has none.
func TestAttentionNodeBias(t *testing.T) {
	f32 := precision.F32
	ins := map[string]*Value{
		"q":    in("q", Input, f32, []int{1, 1, 2}, 0, 0),
		"k":    in("k", Input, f32, []int{1, 2, 2}, 0, 0, 0, 0),
		"v":    in("v", Input, f32, []int{1, 2, 2}, 0, 0, 1, 1),
		"bias": in("bias", Input, f32, []int{1, 1, 1, 2}, 0, 1),
	}
	p := exec.AttentionParams{Heads: 2}
	got, _ := runOne(t, Node{Op: OpAttention, In: []string{"q", "k", "v", "", "bias"}, Spec: exec.Out(f32), Attrs: Attrs{Attention: p}}, ins)
	s := float32(1 / (1 + math.Exp(-1)))
	if math.Abs(float64(got[0]-s)) > 1e-7 || math.Abs(float64(got[1]-s)) > 1e-7 {
		t.Errorf("biased: %v, want %v twice", got, s)
	}
	got, _ = runOne(t, Node{Op: OpAttention, In: []string{"q", "k", "v", ""}, Spec: exec.Out(f32), Attrs: Attrs{Attention: p}}, ins)
	if got[0] != 0.5 || got[1] != 0.5 {
		t.Errorf("no bias: %v, want 0.5 twice", got)
	}
	ins["bias"] = in("bias", Input, f32, []int{3, 1, 2}, 0, 0, 0, 0, 0, 0)
	n := Node{Op: OpAttention, In: []string{"q", "k", "v", "", "bias"}, Attrs: Attrs{Attention: p}}
	if _, err := inferShapes(&n, [][]int{{1, 1, 2}, {1, 2, 2}, {1, 2, 2}, nil, {3, 1, 2}}); err == nil {
		t.Error("a bias [3 1 2] for 2 heads accepted")
	}
}

// TestHostSteps: the mean (plain and masked), the integer rounding, the
// argmin and the QR basis the program search emits, against
// hand-computed answers.
func TestHostSteps(t *testing.T) {
	x := &Value{Name: "x", Kind: Input, Shape: []int{1, 3, 2}, Data: []float32{1, 10, 2, 20, 6, 60}, Format: precision.F32}
	m := &Value{Name: "m", Kind: Input, Shape: []int{1, 3}, Data: []float32{1, 1, 0}, Format: precision.F32}
	r := &Value{Name: "r", Kind: Input, Shape: []int{4}, Data: []float32{0.5, 1.5, 2.5, 749.6}, Format: precision.F32}
	nan := float32(math.NaN())
	d := &Value{Name: "d", Kind: Input, Shape: []int{2, 2, 3}, Data: []float32{3, 1, 1, -2, 5, -7, 0, nan, -1, 4, 4, 4}, Format: precision.F32}
	a := &Value{Name: "a", Kind: Input, Shape: []int{3, 2}, Data: []float32{3, 1, 4, 2, 0, 0}, Format: precision.F32}
	for _, tc := range []struct {
		name  string
		n     Node
		want  []float32
		shape []int
	}{
		{"mean", Node{Op: OpMean, In: []string{"x", ""}, Attrs: Attrs{Axis: 1}, Spec: exec.Out(precision.F32)}, []float32{3, 30}, []int{1, 2}},
		{"masked mean", Node{Op: OpMean, In: []string{"x", "m"}, Attrs: Attrs{Axis: 1}, Spec: exec.Out(precision.F32)}, []float32{1.5, 15}, []int{1, 2}},
		{"round half to even", Node{Op: OpRound, In: []string{"r"}, Spec: exec.Out(precision.F32)}, []float32{0, 2, 2, 750}, []int{4}},
		// the first of equal least entries; a NaN counts as the least
		{"argmin", Node{Op: OpArgMin, In: []string{"d"}}, []float32{1, 2, 1, 0}, []int{2, 2}},
		// LAPACK's signs (torch.linalg.qr's): R₁₁ = −5 flips the first
		// column; the second's entries below its diagonal are 0, so no
		// reflection flips it
		{"qr", Node{Op: OpQR, In: []string{"a"}, Spec: exec.Out(precision.F32)}, []float32{-0.6, -0.8, -0.8, 0.6, 0, 0}, []int{3, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, shape := runOne(t, tc.n, map[string]*Value{"x": x, "m": m, "r": r, "d": d, "a": a})
			if !slices.Equal(got, tc.want) || !slices.Equal(shape, tc.shape) {
				t.Errorf("%v %v, want %v %v", got, shape, tc.want, tc.shape)
			}
		})
	}
}

// TestConcatPromotes: a concat of bf16 and f32 values is torch.cat's
// promotion to f32 (a rounding plan that keeps one producer in f32 makes
// such inputs), bf16 with f16 too; the values are kept exactly.
func TestConcatPromotes(t *testing.T) {
	b := cpu.New(1)
	for _, c := range []struct {
		name string
		fa   precision.Format
		fb   precision.Format
	}{
		{"bf16 with f32", precision.BF16, precision.F32},
		{"f32 with bf16", precision.F32, precision.BF16},
		{"bf16 with f16", precision.BF16, precision.F16},
	} {
		x, _ := b.Upload([]float32{1.5, -2}, []int{1, 2}, c.fa)
		y, _ := b.Upload([]float32{0.1, 3}, []int{1, 2}, c.fb)
		n := Node{Op: OpConcat, Attrs: Attrs{Axis: 1}}
		out, err := RunNode(b, &n, []exec.Tensor{x, y})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got, _ := b.Download(out[0])
		want := []float32{1.5, -2, c.fb.Round(0.1), 3}
		if c.fa != precision.F32 && c.fb == precision.F32 {
			want[2] = 0.1 // kept in f32
		}
		if out[0].Format() != precision.F32 || !slices.Equal(got, want) {
			t.Errorf("%s: %v in %v, want %v in f32", c.name, got, out[0].Format(), want)
		}
	}
}

// TestLinearAttentionNumerator: given qn and kn, the numerator reads them
// as they are and the normaliser still reads φ(q)·φ(k):
// out_n = Σ_j v_j (kn_j·qn_n) / (Σ_j φ(k_j)·φ(q_n) + ε), per head; a
// node with one of the two, or of another shape, is refused.
func TestLinearAttentionNumerator(t *testing.T) {
	const N, M, H, D = 3, 4, 2, 2
	gen := func(n int, seed float32) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(math.Sin(float64(seed) + 1.7*float64(i)))
		}
		return d
	}
	q, k, v := gen(N*H*D, 1), gen(M*H*D, 2), gen(M*H*D, 3)
	qn, kn := gen(N*H*D, 4), gen(M*H*D, 5)
	p := LinearAttentionParams{Heads: H, Kernel: exec.ActReLU, Eps: 1e-15}
	ins := map[string]*Value{
		"q": in("q", Input, precision.F32, []int{1, N, H * D}, q...), "k": in("k", Input, precision.F32, []int{1, M, H * D}, k...),
		"v": in("v", Input, precision.F32, []int{1, M, H * D}, v...), "qn": in("qn", Input, precision.F32, []int{1, N, H * D}, qn...),
		"kn": in("kn", Input, precision.F32, []int{1, M, H * D}, kn...),
	}
	got, _ := runOne(t, Node{Op: OpLinearAttention, In: []string{"q", "k", "v", "qn", "kn"}, Attrs: Attrs{LinearAttention: p}, Spec: exec.Out(precision.F32)}, ins)
	relu := func(x float32) float64 { return math.Max(0, float64(x)) }
	for n := range N {
		for h := range H {
			var den float64
			num := make([]float64, D)
			for j := range M {
				var s, sn float64
				for c := range D {
					s += relu(k[(j*H+h)*D+c]) * relu(q[(n*H+h)*D+c])
					sn += float64(kn[(j*H+h)*D+c]) * float64(qn[(n*H+h)*D+c])
				}
				den += s
				for c := range D {
					num[c] += float64(v[(j*H+h)*D+c]) * sn
				}
			}
			for c := range D {
				want := num[c] / (den + 1e-15)
				if g := float64(got[(n*H+h)*D+c]); math.Abs(g-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Fatalf("out[%d, %d, %d] = %g, want %g", n, h, c, g, want)
				}
			}
		}
	}
	for _, bad := range [][]int{{N, H * D}, {1, M, H * D}} {
		shapes := [][]int{{1, N, H * D}, {1, M, H * D}, {1, M, H * D}, bad, {1, M, H * D}}
		if _, err := inferShapes(&Node{Op: OpLinearAttention, Attrs: Attrs{LinearAttention: p}}, shapes); err == nil {
			t.Errorf("numerator q of %v accepted", bad)
		}
	}
	if _, err := inferShapes(&Node{Op: OpLinearAttention, Attrs: Attrs{LinearAttention: p}}, [][]int{{1, N, H * D}, {1, M, H * D}, {1, M, H * D}, {1, N, H * D}}); err == nil {
		t.Error("one numerator operand accepted")
	}
}

// TestQRReflects: a matrix whose columns both take a reflection gives
// torch.linalg.qr's Q in float64 (LAPACK's dgeqrf and dorgqr, printed by
// torch 1.13), rounded to f32.
func TestQRReflects(t *testing.T) {
	a := &Value{Name: "a", Kind: Input, Shape: []int{3, 2}, Data: []float32{1, 2, -3, 1, 2, -2}, Format: precision.F32}
	want := []float64{-0.2672612419124243, -0.877585088175084, 0.8017837257372732, 0.026593487520457093, -0.5345224838248488, 0.4786827753682276}
	got, shape := runOne(t, Node{Op: OpQR, In: []string{"a"}, Spec: exec.Out(precision.F32)}, map[string]*Value{"a": a})
	if !slices.Equal(shape, []int{3, 2}) {
		t.Fatalf("shape %v, want [3 2]", shape)
	}
	for i, w := range want {
		if got[i] != float32(w) {
			t.Errorf("Q[%d] = %v, want %v", i, got[i], float32(w))
		}
	}
}
