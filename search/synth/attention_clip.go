package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// clipReading is one way a clip [B, C, T, H, W] laid out channels first
// is read as attention rows: its axes moved channels last (perm), then
// the moved clip's leading axes folded into the batch and the rest into
// the rows.
type clipReading struct {
	perm   []int // onto [B, …, C]
	batch  int   // how many of the moved axes make the batch
	what   string
	frames bool // the rows are every frame's cells in frame order: a frame-causal mask may apply
}

// clipReadings are the three layouts video VAEs attend in: every cell of
// every frame one sequence (HunyuanVideo 1.5's), each frame's cells apart
// (a spatial attention), each cell's frames apart (a temporal one).
var clipReadings = []clipReading{
	{perm: []int{0, 2, 3, 4, 1}, batch: 1, what: "every frame's cells as one sequence", frames: true},
	{perm: []int{0, 2, 3, 4, 1}, batch: 2, what: "each frame's cells as a sequence"},
	{perm: []int{0, 3, 4, 2, 1}, batch: 3, what: "each cell's frames as a sequence"},
}

// rows is the shape a clip of shape reads as: [batch, rows, C].
func (r clipReading) rows(shape []int) []int {
	moved := permuteShape(shape, r.perm)
	return []int{prod(moved[:r.batch]), prod(moved[r.batch : len(moved)-1]), moved[len(moved)-1]}
}

// clipMapsAttention explains t [B, C, T, H, W], a clip laid out channels
// first, as attention over rows read off the scope's own clips of t's
// batch, frames and cells (q, k and v made by 1×1×1 convolutions) the
// same way (clipReadings), the result laid back out as a clip; read as
// one sequence, a frame-causal mask (each cell sees the cells of its own
// frame and of the frames before: a causal video VAE's) is offered
// beside the scope's masks.
func (s *synth) clipMapsAttention(t *val, sc *scope) *val {
	if len(t.shape) != 5 || t.integral() {
		return nil
	}
	isClip := func(v *val) bool {
		return !v.opaque && !v.integral() && len(v.shape) == 5 && v.shape[0] == t.shape[0] && slices.Equal(v.shape[2:], t.shape[2:])
	}
	if !slices.ContainsFunc(sc.vals, func(v *val) bool { return sc.own[v] && isClip(v) }) {
		return nil
	}
	for _, rd := range clipReadings {
		rows := rd.rows(t.shape)
		if rows[0] == t.shape[0] && rd.batch > 1 || rows[1] == 1 {
			continue // an axis of one: the same rows as a reading before, or no sequence
		}
		read := func(v *val) *val {
			if !isClip(v) {
				return nil
			}
			moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: rd.perm}, args: []*val{v}, out: v.format, label: "a clip's channels last"})
			return s.reshape(moved, rd.rows(v.shape))
		}
		mapped := sc.mapped(read)
		if rd.frames && t.shape[2] > 1 {
			mapped.vals = append(mapped.vals, s.frameCausalMask(t.shape[2], t.shape[3]*t.shape[4]))
		}
		proxy := s.readAs(t, rows, func(d []float32) []float32 { return permuteData(&val{shape: t.shape, data: d}, rd.perm) })
		proxy.reshapedFrom = true
		r := s.attentionOf(proxy, mapped, false)
		if r == nil {
			continue
		}
		moved := permuteShape(t.shape, rd.perm)
		back := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: inversePerm(rd.perm)}, args: []*val{s.reshape(r, moved)}, out: r.format, label: "rows laid out as a clip (" + rd.what + ")"})
		if back != nil {
			return back
		}
	}
	return nil
}

// frameCausalMask is the additive mask [1, T·n, T·n] under which a row of
// frame f (n rows a frame) sees the rows of frames 0…f: 0 there, −∞
// elsewhere; made from the request's shape.
func (s *synth) frameCausalMask(frames, n int) *val {
	N := frames * n
	m := &val{shape: []int{1, N, N}, data: make([]float32, N*N), format: precision.F32, origin: fmt.Sprintf("frame-causal mask %d×%d", frames, n)}
	inf := float32(math.Inf(-1))
	for i := range N {
		for j := (i/n + 1) * n; j < N; j++ {
			m.data[i*N+j] = inf
		}
	}
	s.em.constant(m, fmt.Sprintf("a frame-causal attention mask over %d frames of %d cells (made from the request's shape)", frames, n))
	return m
}

// frameBlockedAttention explains t [B, S, C] as attention within frames:
// its S rows cut into T runs, run f attending to the N rows of frame f
// of a value [B, T, N, …] of the scope (Wan Animate's face adapter: the
// video's rows per latent frame against that frame's face tokens). The
// scope's values of t's rows are read [B·T, S/T, …], those of T frames
// [B·T, N, …], t likewise, and the result laid back as [B, S, C].
func (s *synth) frameBlockedAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.integral() {
		return nil
	}
	b, rowsN := t.shape[0], t.shape[1]
	var frames []int
	for _, v := range sc.vals {
		// (a value holding t's rows on a later axis is per head, [B, H, S, D]: no frames)
		if len(v.shape) >= 4 && v.shape[0] == b && v.shape[1] > 1 && v.shape[1] != rowsN && rowsN%v.shape[1] == 0 && !slices.Contains(v.shape[2:], rowsN) && !v.opaque && !v.integral() && !slices.Contains(frames, v.shape[1]) {
			frames = append(frames, v.shape[1])
		}
	}
	for _, T := range frames {
		read := func(v *val) *val {
			if v.opaque || len(v.shape) < 3 || v.shape[0] != b {
				return nil
			}
			switch {
			case v.shape[1] == rowsN:
				return s.reshape(v, []int{b * T, rowsN / T, v.numel() / (b * rowsN)})
			case v.shape[1] == T && len(v.shape) >= 4:
				return s.reshape(v, []int{b * T, v.shape[2], v.numel() / (b * T * v.shape[2])})
			}
			return nil
		}
		proxy := s.readAs(t, []int{b * T, rowsN / T, t.shape[2]}, slices.Clone)
		proxy.reshapedFrom = true
		if r := s.attentionOf(proxy, sc.mapped(read), false); r != nil {
			if back := s.reshape(r, t.shape); back != nil {
				return back
			}
		}
	}
	return nil
}
