package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// positions emits the RoPE tables of the joined sequence: each stream's
// position ids (from an input, a grid or a sequence), joined in joint
// order, turned into cos and sin tables.
func (b *builder) positions() error {
	pos := b.st.Positions
	if pos == nil {
		return nil
	}
	const addr = "positions"
	layoutName, err := b.doc.String("rope_layout", addr)
	if err != nil {
		return err
	}
	if layoutName == "none" {
		return nil
	}
	layout, err := ropeLayout(b.doc)
	if err != nil {
		return err
	}
	axes, err := b.doc.IntList("rope_axes", addr)
	if err != nil {
		return err
	}
	theta, err := b.doc.Number("rope_theta", addr)
	if err != nil {
		return err
	}
	tf := b.doc.Precision.RopeTable
	if tf == nil {
		return fmt.Errorf("%s: RoPE tables need precision.rope_table", addr)
	}
	var formats [3]precision.Format
	for i, s := range []string{tf.Freq, tf.Angle, tf.Out} {
		if formats[i], err = precision.ParseFormat(s); err != nil {
			return fmt.Errorf("precision.rope_table: %w", err)
		}
	}
	var ids []string
	for _, s := range b.joint {
		src, ok := pos.Streams[s]
		if !ok {
			return fmt.Errorf("%s: stream %q has no position source", addr, s)
		}
		id, err := b.positionIDs(s, src, len(axes))
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	all := ids[0]
	if len(ids) > 1 {
		if all, err = b.emit1(OpConcat, addr+".ids", ids, Attrs{Axis: 0}); err != nil {
			return err
		}
	}
	seg := -1
	if bd := pos.Boundary; bd != nil {
		seg = b.begin(addr, bd.Module)
		b.tap(all, bd.Module, bd.Inputs["ids"], true)
	}
	rp := exec.RopeTableParams{Theta: theta, AxesDims: axes, Layout: layout, FreqFormat: formats[0], AngleFormat: formats[1]}
	outs, err := b.emit(OpRopeTable, addr+".table", []string{all}, Attrs{RopeTable: rp})
	if err != nil {
		return err
	}
	b.p.Nodes[len(b.p.Nodes)-1].Spec = exec.Spec{Out: formats[2]}
	b.cos, b.sin = outs[0], outs[1]
	for _, a := range axes {
		b.rotary += a
	}
	if bd := pos.Boundary; bd != nil {
		b.tap(b.cos, bd.Module, bd.Outputs["cos"], false)
		b.tap(b.sin, bd.Module, bd.Outputs["sin"], false)
		b.end(seg)
	}
	return nil
}

// positionIDs makes one stream's ids, [rows, axes] in f32.
func (b *builder) positionIDs(stream string, src semantics.PositionSource, naxes int) (string, error) {
	rows := b.tokens[stream]
	where := fmt.Sprintf("positions.streams[%s]", stream)
	switch src.From {
	case "input":
		x, err := b.inputValue(src.Input)
		if err != nil {
			return "", fmt.Errorf("%s: %w", where, err)
		}
		s := b.shape(x)
		if exec.Numel(s) != rows*naxes || s[len(s)-1] != naxes {
			return "", fmt.Errorf("%s: input %v does not hold %d rows of %d axes", where, s, rows, naxes)
		}
		if len(s) == 2 {
			return x, nil
		}
		return b.emit1(OpReshape, "positions."+stream+".ids", []string{x}, Attrs{Shape: []int{rows, naxes}})
	case "grid":
		if len(src.Grid) != naxes || len(src.Origin) != naxes {
			return "", fmt.Errorf("%s: grid %v / origin %v for %d axes", where, src.Grid, src.Origin, naxes)
		}
		if n := exec.Numel(src.Grid); n != rows {
			return "", fmt.Errorf("%s: grid %v holds %d rows, the stream has %d", where, src.Grid, n, rows)
		}
		data := make([]float32, rows*naxes)
		idx := make([]int, naxes)
		for r := range rows {
			for a := range naxes {
				data[r*naxes+a] = float32(idx[a] + src.Origin[a])
			}
			for a := naxes - 1; a >= 0; a-- { // row-major: the last axis fastest
				if idx[a]++; idx[a] < src.Grid[a] {
					break
				}
				idx[a] = 0
			}
		}
		return b.constant("positions."+stream, data, []int{rows, naxes}, precision.F32), nil
	case "sequence":
		if len(src.Start) != naxes || len(src.Step) != naxes {
			return "", fmt.Errorf("%s: start %v / step %v for %d axes", where, src.Start, src.Step, naxes)
		}
		data := make([]float32, rows*naxes)
		for r := range rows {
			for a := range naxes {
				data[r*naxes+a] = float32(src.Start[a] + r*src.Step[a])
			}
		}
		return b.constant("positions."+stream, data, []int{rows, naxes}, precision.F32), nil
	}
	return "", fmt.Errorf("%s: source %q is not supported", where, src.From)
}
