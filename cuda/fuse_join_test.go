//go:build linux

package cuda

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestFusedJoinRope: the region kinds a joint attention's q and k make —
// per-head RMS norms of each stream, joined along the sequence, then
// roped (join(norm, norm) → rope), and norm → rope and linear → rope
// alone — run fused (one norm kernel a part writing its rows of the
// joined result, the rope applied where the norm would store) and
// unfused (the norms, the concat, the rope), in each storage format: the
// same bits, and the CPU backend's values.
func TestFusedJoinRope(t *testing.T) {
	b := need(t)
	b.SetFusion(FusionOn)
	defer b.SetFusion(fusionFromEnv())
	defer func() { b.splitJoins = false }()
	const heads, d, s1, s2, k = 4, 64, 40, 88, 96
	w := heads * d
	for _, f := range []precision.Format{bf16, f16, f32} {
		var free []pair
		u := func(data []float32, shape []int, g precision.Format) pair {
			p := up(t, b, data, shape, g)
			free = append(free, p)
			return p
		}
		a := u(withSpecials(randn(s1*w, 61, 2)), []int{1, s1, w}, f)
		c := u(randn(s2*w, 62, 3), []int{1, s2, w}, f)
		ga, gc := u(randn(d, 63, 1), []int{d}, f), u(randn(d, 64, 1), []int{d}, f)
		x := u(randn((s1+s2)*k, 65, 1), []int{1, s1 + s2, k}, f)
		wt := u(randn(w*k, 66, 0.1), []int{w, k}, f)
		mod := u(randn(w, 67, 0.5), []int{1, w}, f)
		x1, x2 := u(randn(s1*k, 69, 1), []int{1, s1, k}, f), u(randn(s2*k, 70, 1), []int{1, s2, k}, f)
		bias := u(randn(w, 71, 0.1), []int{w}, f)
		ang := randn((s1+s2)*d, 68, 3)
		cv, sv := make([]float32, len(ang)), make([]float32, len(ang))
		for i, v := range ang {
			cv[i], sv[i] = float32(math.Cos(float64(v))), float32(math.Sin(float64(v)))
		}
		cs, sn := u(cv, []int{s1 + s2, d}, f32), u(sv, []int{s1 + s2, d}, f32)
		cs16, sn16 := u(cv, []int{s1 + s2, d}, bf16), u(sv, []int{s1 + s2, d}, bf16)
		qk := exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6, Group: d}
		sQK := exec.Spec{Out: f, Round: exec.RoundNormalized}
		rp := exec.RopeParams{Heads: heads, Layout: exec.RopeInterleaved}
		// region builds a case on the CPU's tensors (side 0) or the GPU's.
		type build func(side int) exec.Region
		pick := func(p pair, side int) exec.Tensor {
			if side == 0 {
				return p.c
			}
			return p.g
		}
		norm := func(x, g pair, side int) exec.Head {
			return exec.Head{Op: exec.HeadNorm, In: [3]exec.Tensor{pick(x, side), pick(g, side), nil}, Norm: qk, Spec: sQK}
		}
		rope := func(c, s pair, spec exec.Spec, side int) exec.Step {
			return exec.Step{Op: exec.StepRope, In: []exec.Tensor{nil, pick(c, side), pick(s, side)}, Rope: rp, Spec: spec}
		}
		join := func(side int) exec.Head {
			return exec.Head{Op: exec.HeadJoin, Parts: []exec.Head{norm(a, ga, side), norm(c, gc, side)}, Axis: 1}
		}
		cases := []struct {
			name string
			r    build
		}{
			{"join(norm, norm) → rope", func(s int) exec.Region {
				return exec.Region{Head: join(s), Steps: []exec.Step{rope(cs, sn, exec.Out(f), s)}}
			}},
			{"join(norm, norm) → rope, bf16 tables, products rounded", func(s int) exec.Region {
				return exec.Region{Head: join(s), Steps: []exec.Step{rope(cs16, sn16, exec.Spec{Out: f, Round: exec.RoundProduct}, s)}}
			}},
			{"join(norm, norm) → rope → mul", func(s int) exec.Region {
				return exec.Region{Head: join(s), Steps: []exec.Step{rope(cs, sn, exec.Out(f), s),
					{Op: exec.StepMul, In: []exec.Tensor{nil, pick(mod, s)}, Spec: exec.Out(f)}}}
			}},
			{"join(norm, norm) → mul", func(s int) exec.Region {
				return exec.Region{Head: join(s), Steps: []exec.Step{{Op: exec.StepMul, In: []exec.Tensor{nil, pick(mod, s)}, Spec: exec.Out(f)}}}
			}},
			{"norm → rope", func(s int) exec.Region {
				h := norm(a, ga, s)
				h.In[0] = pick(c, s)
				return exec.Region{Head: h, Steps: []exec.Step{rope(cs, sn, exec.Out(f), s)}}
			}},
			{"join(norm, norm), no chain", func(s int) exec.Region {
				return exec.Region{Head: join(s)}
			}},
			{"join(linear, linear), no chain", func(s int) exec.Region {
				lin := func(x pair) exec.Head {
					return exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{pick(x, s), pick(wt, s), pick(bias, s)}, Spec: exec.Out(f)}
				}
				return exec.Region{Head: exec.Head{Op: exec.HeadJoin, Parts: []exec.Head{lin(x1), lin(x2)}, Axis: 1}}
			}},
			{"linear → rope", func(s int) exec.Region {
				return exec.Region{Head: exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{pick(x, s), pick(wt, s), nil}, Spec: exec.Out(f)},
					Steps: []exec.Step{rope(cs, sn, exec.Out(f), s)}}
			}},
		}
		// norm → rope over the second stream alone reads the tables' first
		// rows: give it tables of its own length.
		cs2, sn2 := u(cv[:s2*d], []int{s2, d}, f32), u(sv[:s2*d], []int{s2, d}, f32)
		cases[4].r = func(s int) exec.Region {
			h := norm(c, gc, s)
			return exec.Region{Head: h, Steps: []exec.Step{rope(cs2, sn2, exec.Out(f), s)}}
		}
		for ci := 0; ci < 2*len(cases); ci++ {
			// Each case in both of a join's fused forms (the chain in the
			// norms; the norms into the join, then the chain).
			cse := cases[ci/2]
			b.splitJoins = ci%2 == 1
			name := f.String() + ": " + cse.name
			if b.splitJoins {
				name += " (norms into the join, then the chain)"
			}
			r := cse.r(1)
			want, err := exec.RunUnfused(b, r)
			if err != nil {
				t.Fatalf("%s: unfused: %v", name, err)
			}
			got, ok, err := b.Fuse(r)
			if err != nil || !ok {
				t.Fatalf("%s: fused: ok %v, %v (%+v)", name, ok, err, b.Fusions()[len(b.Fusions())-1])
			}
			sameBits(t, b, name, got, want)
			if r.Head.Op == exec.HeadLinear || r.Head.Op == exec.HeadJoin && r.Head.Parts[0].Op == exec.HeadLinear { // cuBLASLt sums in its own order: not the CPU's bits
				b.Free(got)
				b.Free(want)
				continue
			}
			cpu, err := exec.RunUnfused(ref, cse.r(0))
			if err != nil {
				t.Fatalf("%s: cpu: %v", name, err)
			}
			gv, err := b.Download(got)
			if err != nil {
				t.Fatal(err)
			}
			cv, _ := ref.Download(cpu)
			bad := 0
			for i := range cv {
				if math.Float32bits(gv[i]) != math.Float32bits(cv[i]) && !(gv[i] != gv[i] && cv[i] != cv[i]) {
					bad++
				}
			}
			if bad > 0 || len(cv) != len(gv) {
				t.Errorf("%s: %d of %d values differ from the CPU backend's", name, bad, len(cv))
			}
			b.Free(got)
			b.Free(want)
			ref.Free(cpu)
		}
		// What does not fuse is declined, with its reason.
		for _, bad := range []exec.Region{
			{Head: join(1), Steps: []exec.Step{{Op: exec.StepRope, In: []exec.Tensor{nil, cs.g, sn.g}, Rope: exec.RopeParams{Heads: heads, Layout: exec.RopeHalf}, Spec: exec.Out(f)}}},
			{Head: exec.Head{Op: exec.HeadJoin, Parts: []exec.Head{{Op: exec.HeadLinear, In: [3]exec.Tensor{x.g, wt.g, nil}, Spec: exec.Out(f)}}, Axis: 1},
				Steps: []exec.Step{rope(cs, sn, exec.Out(f), 1)}},
			{Head: join(1), Steps: []exec.Step{rope(cs2, sn2, exec.Out(f), 1)}}, // tables too short
		} {
			if _, ok, err := b.Fuse(bad); ok || err != nil {
				t.Errorf("%v: ok %v, %v; want declined", bad, ok, err)
				continue
			}
			why := ""
			for _, rec := range b.Fusions() {
				if rec.Region == bad.String() {
					why = rec.Declined
				}
			}
			if why == "" {
				t.Errorf("%v: declined without a reason", bad)
			} else if f == bf16 {
				t.Logf("declined %v: %s", bad, why)
			}
		}
		t.Logf("%v: %d region kinds with a join or a rope fused, each bit-exact with its unfused route and the CPU", f, len(cases))
		for _, p := range free {
			p.free(b)
		}
	}
}
