package factors

import (
	"github.com/zflow/zflow/exec/program"
	"math"
	"slices"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
)

// order lists the weight sets (or streams) in joint order.
func order(names []string, jointOrder any) []int {
	first := "text"
	if jointOrder == "image_first" {
		first = "image"
	}
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case names[a] == first && names[b] != first:
			return -1
		case names[b] == first && names[a] != first:
			return 1
		}
		return 0
	})
	return idx
}

// tables returns cos and sin for the weight sets joined in ord.
func (b *block) ropeTables(ord []int, layout string) (attn.Tables, bool) {
	if layout == attn.None || len(b.tables) == 0 {
		return attn.Tables{}, layout == attn.None
	}
	expand := func(t tableSrc) ([]float64, []float64, int) {
		if t.complex {
			return attn.Complex(t.cos, t.w, layout)
		}
		return f64(t.cos), f64(t.sin), t.w
	}
	total := 0
	for _, s := range b.sets {
		total += s.rows
	}
	// A table shorter than the rows it must cover (its rows counted on
	// an axis other than the one its values fill) is not these rows' table.
	fits := func(c, s []float64, w, rows int) bool { return w > 0 && len(c) >= rows*w && len(s) >= rows*w }
	if len(b.tables) == 1 && b.tables[0].rows == total {
		c, s, w := expand(b.tables[0])
		if !fits(c, s, w, total) {
			return attn.Tables{}, false
		}
		return attn.Tables{Cos: c[:total*w], Sin: s[:total*w], W: w}, true
	}
	if len(b.tables) != len(b.sets) {
		return attn.Tables{}, false
	}
	var t attn.Tables
	for _, i := range ord {
		j := i
		for k, tb := range b.tables {
			if tb.rows == b.sets[i].rows && b.sets[0].rows != b.sets[len(b.sets)-1].rows {
				j = k
			}
		}
		c, s, w := expand(b.tables[j])
		if !fits(c, s, w, b.sets[i].rows) {
			return attn.Tables{}, false
		}
		t.Cos, t.Sin, t.W = append(t.Cos, c[:b.sets[i].rows*w]...), append(t.Sin, s[:b.sets[i].rows*w]...), w
	}
	return t, true
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// scoreAttention: each weight set's rows of the block's attention (q, k
// after their norms, and v, the trace's; RoPE from the tables the block
// reads; the sets joined in joint order), run by the candidate's
// fragment at up to 32 query rows per set with every key, against its
// out projection's argument (a parallel block's: the better of its first
// and last q-width columns, the MLP's order being searched later).
func (b *block) scoreAttention(a search.Assignment) (search.Score, error) {
	boundary := b.blk.Roles[b.sets[0].prefix+"out"].Module + "/arg"
	inf := search.Score{Err: math.Inf(1), Boundary: boundary, Metric: search.MetricRelRMS}
	p, ok, err := b.fragment(a)
	if err != nil || !ok {
		return inf, err
	}
	var worst float64
	for _, st := range b.sets {
		out := b.blk.Roles[st.prefix+"out"]
		tp := program.Tap{Module: out.Module, Port: "arg0"}
		name, key := tapped(p, tp.Module, tp.Port), b.cp.tapKey(tp)
		if name == "" || key == "" {
			return inf, nil
		}
		refShape := p.Values[name].Shape
		cols := []int{0}
		if n := producer(p, name); n != nil && n.Op == program.OpConcat && b.rc.FusedOut("out") {
			// The fused out's argument: the attention's columns of it.
			name = attentionOf(p)
			w := refShape[len(refShape)-1]
			if name == "" {
				return inf, nil
			}
			cols = []int{0, w - st.qw}
		}
		rows := attn.Spread(st.rows, 32)
		e := math.Inf(1)
		for _, col := range cols {
			var s fsums
			if ok, err := s.compare(b.frag, p, name, key, refShape, rows, col); err != nil {
				return inf, err
			} else if ok {
				e = math.Min(e, s.score(boundary).Err)
			}
		}
		worst = math.Max(worst, e)
	}
	return search.Score{Err: worst, Boundary: boundary, Metric: search.MetricRelRMS}, nil
}

// attentionOf is the result of p's attention node ("" for none).
func attentionOf(p *program.Program) string {
	for _, n := range p.Nodes {
		if n.Op == program.OpAttention {
			return n.Out[0]
		}
	}
	return ""
}

// sampleRows caps the rows the pointwise scores (modulation, gate, final
// norm, MLP) read: every row where there are few; at real widths that many
// spread over them, which tell candidates apart as well as all rows do.
const sampleRows = 1024

// normNames are the modulated norms' roles of the block's recipe: before
// the attention and before the MLP ("" where the first feeds both, or the
// block has no modulation).
func (b *block) normNames() (string, string) {
	if !b.rc.HasRole("modulation") {
		return "", ""
	}
	n1, n2 := b.rc.FeedingNorm("q"), b.rc.FeedingNorm("mlp_in")
	if n2 == n1 {
		n2 = ""
	}
	return n1, n2
}

// scoreModulation: each weight set's modulated norms (the norm's result
// and the modulation's chunks, the trace's), run by the candidate's
// fragment, against q's argument (group 0) and mlp_in's argument (group
// 1).
func (b *block) scoreModulation(a search.Assignment) (search.Score, error) {
	n1, n2 := b.normNames()
	pairs := [][2]string{{n1, "q"}, {n2, "mlp_in"}}
	return b.scoreAt(a, func(st set) []target {
		var ts []target
		for _, pair := range pairs {
			if _, ok := b.role(st.prefix + pair[0]); pair[0] == "" || !ok {
				continue
			}
			m := b.blk.Roles[st.prefix+pair[1]].Module
			ts = append(ts, target{tap: program.Tap{Module: m, Port: "arg0"}, boundary: m + "/arg", sample: true})
		}
		return ts
	})
}

// scoreModAct: act(cond), run by the candidate's fragment, against each
// modulation linear's argument.
func (b *block) scoreModAct(a search.Assignment) (search.Score, error) {
	if bd := b.blk.Boundary; bd == nil || bd.Inputs["cond"] == "" {
		return search.Score{Err: math.Inf(1)}, nil
	}
	return b.scoreAt(a, func(st set) []target {
		m := b.blk.Roles[st.prefix+"modulation"].Module
		return []target{{tap: program.Tap{Module: m, Port: "arg0"}, boundary: m + "/arg"}}
	})
}

// scoreGate: the gated residual after the attention (the block's input
// rows, the out projection's result and the gate chunk, the trace's), run
// by the candidate's fragment, against norm2's argument or (parallel)
// the block's result.
func (b *block) scoreGate(a search.Assignment) (search.Score, error) {
	bd := b.blk.Boundary
	if bd == nil {
		return search.Score{Err: math.Inf(1)}, nil
	}
	_, n2 := b.normNames()
	return b.scoreAt(a, func(st set) []target {
		if nr, ok := b.role(st.prefix + n2); n2 != "" && ok {
			return []target{{tap: program.Tap{Module: nr.Module, Port: "arg0"}, boundary: nr.Module + "/arg", sample: true}}
		}
		if !b.rc.FusedOut("out") {
			return nil
		}
		var ts []target
		for _, role := range sortedKeys(bd.Outputs) {
			ts = append(ts, target{tap: program.Tap{Module: bd.Module, Port: bd.Outputs[role]}, boundary: bd.Module + "/out", sample: true})
		}
		return ts
	})
}

// scoreMLP: the MLP's activation (act(mlp_in), or act(mlp_gate)·mlp_in,
// the projections the trace's), run by the candidate's fragment, against
// the MLP's output projection's argument (a parallel block's out: the
// MLP's columns, where the fragment's join puts them).
func (b *block) scoreMLP(a search.Assignment) (search.Score, error) {
	return b.scoreAt(a, func(st set) []target {
		if b.rc.FusedOut("out") {
			m := b.blk.Roles["out"].Module
			return []target{{tap: program.Tap{Module: m, Port: "arg0"}, boundary: m + "/arg", sample: true, part: true}}
		}
		m := b.blk.Roles[st.prefix+"mlp_out"].Module
		return []target{{tap: program.Tap{Module: m, Port: "arg0"}, boundary: m + "/arg", sample: true}}
	})
}

// scoreQKNorm: each per-head norm (its weight, ε 1e-6), run by the
// candidate's fragment from its argument, the trace's, against its
// result.
func (b *block) scoreQKNorm(a search.Assignment) (search.Score, error) {
	return b.scoreAt(a, func(st set) []target {
		var ts []target
		for _, name := range []string{"q_norm", "k_norm"} {
			if r, ok := b.role(st.prefix + name); ok {
				ts = append(ts, target{tap: program.Tap{Module: r.Module, Port: r.OutPort()}, boundary: r.Module + "/" + r.OutPort(), sample: true})
			}
		}
		return ts
	})
}

// target is one comparison of a score: the value the fragment taps at
// tap against the reference there, at sampled tokens (sample) or whole;
// part: only the columns the fragment's MLP activation fills of a joined
// value.
type target struct {
	tap      program.Tap
	boundary string
	sample   bool
	part     bool
}

// scoreAt builds the candidate's fragment and pools the rel-RMS of every
// set's targets (the first target's boundary is the score's); +Inf where
// the fragment cannot be built or a target not compared.
func (b *block) scoreAt(a search.Assignment, targets func(set) []target) (search.Score, error) {
	var ts []target
	for _, st := range b.sets {
		ts = append(ts, targets(st)...)
	}
	if len(ts) == 0 {
		return search.Score{Err: math.Inf(1)}, nil
	}
	inf := search.Score{Err: math.Inf(1), Boundary: ts[0].boundary, Metric: search.MetricRelRMS}
	p, ok, err := b.fragment(a)
	if err != nil || !ok {
		return inf, err
	}
	var s fsums
	for _, t := range ts {
		name, key := tapped(p, t.tap.Module, t.tap.Port), b.cp.tapKey(t.tap)
		if name == "" || key == "" {
			return inf, nil
		}
		refShape := p.Values[name].Shape
		var rows []int
		if t.sample {
			rows = tokenRows(refShape)
		}
		col := 0
		if t.part {
			var ok bool
			if name, col, ok = mlpColumns(p, name); !ok {
				return inf, nil
			}
		}
		if ok, err := s.compare(b.frag, p, name, key, refShape, rows, col); err != nil || !ok {
			return inf, err
		}
	}
	return s.score(ts[0].boundary), nil
}

// mlpColumns is the MLP activation's part of joined value name (made by a
// join of the last axis) and the column it starts at.
func mlpColumns(p *program.Program, name string) (string, int, bool) {
	n := producer(p, name)
	if n == nil || n.Op != program.OpConcat {
		return "", 0, false
	}
	col := 0
	for _, in := range n.In {
		if m := producer(p, in); m != nil && (m.Op == program.OpAct || m.Op == program.OpGLU) {
			return in, col, true
		}
		s := p.Values[in].Shape
		col += s[len(s)-1]
	}
	return "", 0, false
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
