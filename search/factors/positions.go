package factors

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/search/internal/rotary"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Precision factors of the RoPE tables, searched with rope_axes and
// rope_theta because the tables show them too; they become the document's
// precision.rope_table, not entries of its factors.
const (
	RopeFreqFormat  = "rope_table_freq"  // format of the inverse frequencies: f32, f64, bf16
	RopeAngleFormat = "rope_table_angle" // format of position·frequency and cos/sin: f32, f64
)

// PositionsFactors are rope_axes and rope_theta and the objective scoring
// them, with what the search needs to know about the tables.
type PositionsFactors struct {
	Factors   []search.Factor
	Objective search.Objective
	// TableFormat is the captured tables' storage format
	// (precision.rope_table.out).
	TableFormat precision.Format
	// Read is the split into axes (channels per axis) read off the tables'
	// angles, nil when they do not show one.
	Read []int
	// MaxJoint is the search.Options.MaxJoint that searches the stage
	// exhaustively: coordinate descent can stall where a wrong split and a
	// wrong θ fit each other better than either fits the truth alone, and
	// a θ a little off can mimic a frequency format (bf16 frequencies).
	MaxJoint int
}

// Positions returns the factors of the RoPE tables the first block reads
// (rope_axes, rope_theta and the tables' two precision factors, one stage
// searched exhaustively: see MaxJoint), scored where they are first observable: the tables themselves,
// computed (exec.RopeTables) from the position ids the tables' producer
// reads, or, without that port, from the structure's position sources in
// joint order, and compared with the captured tables (rel-RMS over cos and
// sin, rounded to their format). layout is the rope_layout winner.
//
// Candidates: rope_axes, every split of the rotary width into as many
// even parts as the ids have columns when there are at most 24 (else the
// split the tables' angles show, its permutations, its neighbours (one
// pair moved between two axes) and the equal split), the split the angles
// show first (readAxes); rope_theta, the base the
// angles show (3 significant digits) and 10⁴, 10³, 10⁵, 10⁶.
func Positions(tr *trace.Trace, st *semantics.Structure, layout, jointOrder string) (*PositionsFactors, error) {
	if st.Positions == nil || layout == attn.None || len(st.Blocks) == 0 {
		return nil, fmt.Errorf("factors: the structure has no RoPE positions")
	}
	cp, err := newCapture(tr, st)
	if err != nil {
		return nil, err
	}
	b := &block{st: st, blk: st.Blocks[0], cp: cp}
	if err := b.loadTables(); err != nil {
		return nil, fmt.Errorf("factors: positions: %w", err)
	}
	if len(b.tables) == 0 {
		return nil, fmt.Errorf("factors: positions: the first block reads no RoPE tables")
	}
	p := &posObjective{layout: layout, memo: map[string]search.Score{}}
	p.boundary = st.Blocks[0].Boundary.Module + "/rope tables"
	if bd := st.Positions.Boundary; bd != nil {
		p.boundary = bd.Module + "/" + bd.Outputs["cos"]
	}
	width := 0
	for _, t := range b.tables {
		ids, axes, err := tableIDs(cp, st, jointOrder, t.rows)
		if err != nil {
			return nil, fmt.Errorf("factors: positions: %w", err)
		}
		w := t.w
		if t.complex {
			w = 2 * t.w
		}
		if width != 0 && w != width || p.axes != 0 && axes != p.axes {
			return nil, fmt.Errorf("factors: positions: the tables disagree on their width or axes")
		}
		width, p.axes = w, axes
		p.tables = append(p.tables, sampleTable(t, ids, axes))
	}
	if width%2 != 0 {
		return nil, fmt.Errorf("factors: positions: rotary width %d is odd", width)
	}
	var angles [][]float64
	var ids []float32
	for _, t := range p.tables {
		angles, ids = append(angles, t.angles(layout)...), append(ids, t.ids...)
	}
	var read []int
	var freqs []float64
	if layout != attn.Half || p.axes == 1 {
		read, freqs = readAxes(angles, ids, p.axes)
	}
	splits := axisSplits(width/2, p.axes, read)
	if len(splits) == 0 {
		return nil, fmt.Errorf("factors: positions: %d rotary channels cannot be split into %d even axes", width, p.axes)
	}
	thetas := []any{}
	seen := map[float64]bool{}
	addTheta := func(t float64) {
		if t > 0 && !math.IsInf(t, 0) && !math.IsNaN(t) && !seen[t] {
			seen[t] = true
			thetas = append(thetas, t)
		}
	}
	addTheta(rotary.Theta(freqs, splits[0]))
	for _, t := range []float64{1e4, 1e3, 1e5, 1e6} {
		addTheta(t)
	}
	axesVals := make([]any, len(splits))
	for i, s := range splits {
		axesVals[i] = s
	}
	out := &PositionsFactors{
		Factors: []search.Factor{
			{Name: "rope_axes", Scope: "positions", Values: axesVals, Stage: 1},
			{Name: "rope_theta", Scope: "positions", Values: thetas, Stage: 1},
			{Name: RopeFreqFormat, Scope: "positions", Values: []any{"f32", "f64", "bf16"}, Stage: 1},
			{Name: RopeAngleFormat, Scope: "positions", Values: []any{"f32", "f64"}, Stage: 1},
		},
		MaxJoint:    len(axesVals) * len(thetas) * 6,
		Objective:   search.ObjectiveFunc(p.score),
		TableFormat: b.tables[0].f,
	}
	if read != nil && len(read) == p.axes {
		out.Read = channels(read)
	}
	return out, nil
}

// posTable is one captured table and the ids of its rows, and the same at
// up to 512 rows spread over it (what the objective scores).
type posTable struct {
	src tableSrc
	ids []float32 // [rows, axes]
	// the sample: ids, and the captured values (complex: interleaved re, im)
	n          int
	sIDs       []float32
	sCos, sSin []float32
}

// sampleTable keeps a table and its ids, with a sample of up to 512 rows.
func sampleTable(t tableSrc, ids []float32, axes int) posTable {
	pt := posTable{src: t, ids: ids}
	w := t.w
	if t.complex {
		w = 2 * t.w
	}
	for _, r := range attn.Spread(t.rows, 512) {
		pt.sIDs = append(pt.sIDs, ids[r*axes:(r+1)*axes]...)
		pt.sCos = append(pt.sCos, t.cos[r*w:(r+1)*w]...)
		if !t.complex {
			pt.sSin = append(pt.sSin, t.sin[r*w:(r+1)*w]...)
		}
		pt.n++
	}
	return pt
}

type posObjective struct {
	layout   string
	axes     int
	tables   []posTable
	boundary string
	memo     map[string]search.Score
}

func (p *posObjective) score(_ context.Context, _ string, a search.Assignment) (search.Score, error) {
	axes, _ := a["rope_axes"].([]int)
	theta, _ := a["rope_theta"].(float64)
	key := fmt.Sprintf("%v|%v|%v|%v", axes, theta, a[RopeFreqFormat], a[RopeAngleFormat])
	if s, ok := p.memo[key]; ok {
		return s, nil
	}
	ff, err1 := precision.ParseFormat(fmt.Sprint(a[RopeFreqFormat]))
	af, err2 := precision.ParseFormat(fmt.Sprint(a[RopeAngleFormat]))
	if err1 != nil || err2 != nil {
		return search.Score{}, fmt.Errorf("factors: positions: formats %v, %v", a[RopeFreqFormat], a[RopeAngleFormat])
	}
	lay := exec.RopeInterleaved
	if p.layout == attn.Half {
		lay = exec.RopeHalf
	}
	inf := search.Score{Err: math.Inf(1), Boundary: p.boundary, Metric: search.MetricRelRMS}
	var s fsums
	add := func(ours, ref []float32, f precision.Format) bool { return s.add(ours, len(ours), ref, len(ref), 0, f) }
	for _, t := range p.tables {
		rows := t.n
		cos, sin, err := exec.RopeTables(t.sIDs, rows, exec.RopeTableParams{Theta: theta, AxesDims: axes, Layout: lay, FreqFormat: ff, AngleFormat: af}, exec.MathPrecise)
		if err != nil {
			p.memo[key] = inf
			return inf, nil
		}
		f := t.src.f
		if t.src.complex {
			pairs := t.src.w
			ours := make([]float32, 0, 2*rows*pairs)
			for r := range rows {
				for j := range pairs {
					ours = append(ours, cos[r*2*pairs+2*j], sin[r*2*pairs+2*j])
				}
			}
			if !add(ours, t.sCos, f) {
				p.memo[key] = inf
				return inf, nil
			}
			continue
		}
		if !add(cos, t.sCos, f) || !add(sin, t.sSin, f) {
			p.memo[key] = inf
			return inf, nil
		}
	}
	sc := s.score(p.boundary)
	p.memo[key] = sc
	return sc, nil
}

// tableIDs returns the position ids [rows, axes] of a table of rows: the
// table producer's captured ids when the structure names that port and
// they cover the rows, else the streams' sources in joint order (all
// streams when rows is their total, else the stream of that many rows).
func tableIDs(cp *capture, st *semantics.Structure, jointOrder string, rows int) ([]float32, int, error) {
	pos := st.Positions
	axes := 0
	for _, src := range pos.Streams {
		n := len(src.Grid) + len(src.Start)
		if src.From == "input" {
			for _, in := range st.Inputs {
				if in.Role == src.Input && len(in.Shape) > 0 {
					n = in.Shape[len(in.Shape)-1]
				}
			}
		}
		if axes != 0 && n != axes {
			return nil, 0, fmt.Errorf("the streams' position sources disagree on the number of axes")
		}
		axes = n
	}
	if axes == 0 {
		return nil, 0, fmt.Errorf("no stream has a position source")
	}
	if bd := pos.Boundary; bd != nil && bd.Inputs["ids"] != "" {
		if t, err := cp.port(bd.Module, bd.Inputs["ids"]); err == nil && len(t.v) >= rows*axes {
			return t.v[:rows*axes], axes, nil
		}
	}
	tokens := map[string]int{}
	var names []string
	for _, s := range st.Streams {
		tokens[s.Name] = s.Tokens
		names = append(names, s.Name)
	}
	var ids []float32
	for _, i := range order(names, jointOrder) {
		s := names[i]
		total := 0
		for _, n := range tokens {
			total += n
		}
		if rows != total && tokens[s] != rows {
			continue
		}
		src, ok := pos.Streams[s]
		if !ok {
			return nil, 0, fmt.Errorf("stream %s has no position source", s)
		}
		v, err := streamIDs(cp, st, src, tokens[s], axes)
		if err != nil {
			return nil, 0, fmt.Errorf("stream %s: %w", s, err)
		}
		ids = append(ids, v...)
	}
	if len(ids) != rows*axes {
		return nil, 0, fmt.Errorf("the position sources give %d ids for a table of %d rows × %d axes", len(ids), rows, axes)
	}
	return ids, axes, nil
}

// streamIDs makes one stream's ids from its source (as the program
// builder does).
func streamIDs(cp *capture, st *semantics.Structure, src semantics.PositionSource, rows, axes int) ([]float32, error) {
	out := make([]float32, rows*axes)
	switch src.From {
	case "input":
		name := ""
		for _, in := range st.Inputs {
			if in.Role == src.Input {
				name = in.Name
			}
		}
		t, err := cp.key(cp.tr.Manifest.Inputs[name])
		if err != nil || len(t.v) < rows*axes {
			return nil, fmt.Errorf("input %q does not hold %d ids", name, rows*axes)
		}
		copy(out, t.v)
	case "grid":
		idx := make([]int, axes)
		for r := range rows {
			for a := range axes {
				out[r*axes+a] = float32(idx[a] + src.Origin[a])
			}
			for a := axes - 1; a >= 0; a-- {
				if idx[a]++; idx[a] < src.Grid[a] {
					break
				}
				idx[a] = 0
			}
		}
	case "sequence":
		for r := range rows {
			for a := range axes {
				out[r*axes+a] = float32(src.Start[a] + r*src.Step[a])
			}
		}
	default:
		return nil, fmt.Errorf("position source %q", src.From)
	}
	return out, nil
}

// angles reads a table's rotation angle per row and pair: a complex
// table's arguments, a real table's atan2(sin, cos) at the first element
// of each pair (adjacent elements; for half, the first half of one axis).
func (t posTable) angles(layout string) [][]float64 {
	pairs := t.src.w
	if !t.src.complex {
		pairs = t.src.w / 2
	}
	out := make([][]float64, t.src.rows)
	for r := range out {
		out[r] = make([]float64, pairs)
		for j := range pairs {
			switch {
			case t.src.complex:
				out[r][j] = math.Atan2(float64(t.src.cos[2*(r*pairs+j)+1]), float64(t.src.cos[2*(r*pairs+j)]))
			case layout == attn.Half:
				out[r][j] = math.Atan2(float64(t.src.sin[r*t.src.w+j]), float64(t.src.cos[r*t.src.w+j]))
			default:
				out[r][j] = math.Atan2(float64(t.src.sin[r*t.src.w+2*j]), float64(t.src.cos[r*t.src.w+2*j]))
			}
		}
	}
	return out
}

// readAxes reads the split into axes and each pair's frequency off the
// tables' angles [rows][pairs] and ids [rows·axes]. Every axis's first pair
// turns at frequency θ⁰ = 1: its angle is the axis's id itself (mod 2π);
// axis a starts at the first pair from the previous axis's start on whose
// angles are id_a at every row (an axis whose ids never change is found
// the same way: its pairs do not turn). A pair's frequency is the median
// |Δangle| between consecutive rows where its axis's id moves by 1 (+Inf
// when none does). It returns pairs per axis, nil when the starts do not
// read as one per axis from pair 0.
func readAxes(angles [][]float64, ids []float32, axes int) ([]int, []float64) {
	if len(angles) == 0 || axes == 0 || len(ids) < len(angles)*axes {
		return nil, nil
	}
	pairs := len(angles[0])
	const tol = 0.05 // rad: a bf16 table's cos and sin hold its angle to ~2⁻⁸
	matches := func(j, a int) bool {
		for r := range angles {
			if math.Abs(rotary.Wrap(angles[r][j]-float64(ids[r*axes+a]))) > tol {
				return false
			}
		}
		return true
	}
	starts := make([]int, 0, axes)
	for a, from := 0, 0; a < axes; a++ {
		j := from
		for j < pairs && !matches(j, a) {
			j++
		}
		if j == pairs || a == 0 && j != 0 {
			return nil, nil
		}
		starts, from = append(starts, j), j+1
	}
	split := make([]int, axes)
	axisOf := make([]int, pairs)
	for a := range axes {
		end := pairs
		if a+1 < axes {
			end = starts[a+1]
		}
		split[a] = end - starts[a]
		for j := starts[a]; j < end; j++ {
			axisOf[j] = a
		}
	}
	freq := make([]float64, pairs)
	for j := range pairs {
		a := axisOf[j]
		var steps []float64
		for r := 1; r < len(angles) && len(steps) < 256; r++ {
			if d := ids[r*axes+a] - ids[(r-1)*axes+a]; d == 1 || d == -1 {
				steps = append(steps, math.Abs(rotary.Wrap(angles[r][j]-angles[r-1][j])))
			}
		}
		freq[j] = math.Inf(1)
		if len(steps) > 0 {
			freq[j] = median(steps)
		}
	}
	return split, freq
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// axisSplits lists the splits of pairs into n axes (channels per axis,
// even): all of them when there are at most 24, else the read split, its
// permutations, its neighbours (one pair moved from one axis to another)
// and the equal split. The read split comes first.
func axisSplits(pairs, n int, read []int) [][]int {
	var out [][]int
	seen := map[string]bool{}
	add := func(p []int) {
		if len(p) != n || slices.Contains(p, 0) {
			return
		}
		sum := 0
		for _, v := range p {
			sum += v
		}
		if k := fmt.Sprint(p); sum == pairs && !seen[k] {
			seen[k] = true
			out = append(out, channels(p))
		}
	}
	add(read)
	if binom(pairs-1, n-1) <= 24 {
		compositions(pairs, n, nil, add)
		return out
	}
	if len(read) == n {
		permute(slices.Clone(read), 0, add)
		for i := range n {
			for j := range n {
				if i != j {
					nb := slices.Clone(read)
					nb[i]--
					nb[j]++
					add(nb)
				}
			}
		}
	}
	if pairs%n == 0 {
		eq := make([]int, n)
		for i := range eq {
			eq[i] = pairs / n
		}
		add(eq)
	}
	return out
}

// channels turns pairs per axis into channels per axis.
func channels(pairs []int) []int {
	out := make([]int, len(pairs))
	for i, p := range pairs {
		out[i] = 2 * p
	}
	return out
}

func compositions(total, parts int, prefix []int, fn func([]int)) {
	if parts == 1 {
		if total > 0 {
			fn(append(slices.Clone(prefix), total))
		}
		return
	}
	for v := 1; v <= total-(parts-1); v++ {
		compositions(total-v, parts-1, append(prefix, v), fn)
	}
}

func permute(p []int, k int, fn func([]int)) {
	if k == len(p) {
		fn(slices.Clone(p))
		return
	}
	for i := k; i < len(p); i++ {
		p[k], p[i] = p[i], p[k]
		permute(p, k+1, fn)
		p[k], p[i] = p[i], p[k]
	}
}

func binom(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > 1<<20 {
			return r
		}
	}
	return r
}
