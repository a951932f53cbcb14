package program

import (
	"fmt"

	"github.com/zflow/zflow/semantics"
)

// final emits the final stage on its stream by its recipe (the stage
// "final", semantics.LookupStage): an adaptive norm (modulation of 2
// chunks in final_norm_order) or a plain norm, then the head linear, each
// part only when the structure has its role. Its boundary reads the rows
// and the conditioning vector and outputs the rows before the head (the
// recipe's taps.out): the segment ends there.
func (b *builder) final() (string, error) {
	f := &b.st.Final
	const addr = "final"
	x, ok := b.stream[f.Stream]
	if !ok {
		return "", fmt.Errorf("%s: no stream %q", addr, f.Stream)
	}
	r, ok := semantics.LookupStage(addr)
	if !ok {
		return "", fmt.Errorf("%s: no recipe", addr)
	}
	seg := -1
	if bd := f.Boundary; bd != nil {
		seg = b.begin(addr, bd.Module)
		b.tap(x, bd.Module, bd.Inputs["x"], true)
		b.tap(b.cond, bd.Module, bd.Inputs["cond"], true)
	}
	y, err := b.recipeStage(addr, f.Roles, r, x, func(port, v string) {
		if bd := f.Boundary; bd != nil {
			b.tap(v, bd.Module, bd.Outputs[port], false)
			b.end(seg)
		}
	})
	if err != nil {
		return "", err
	}
	if p := b.patch; p != nil {
		if y, err = b.emit1(OpUnpatchify, addr+".unpatchify", []string{y}, Attrs{Patch: *p}); err != nil {
			return "", err
		}
	}
	if b.st.Run == "flow_euler" && !b.alone {
		if want := b.shape(stepLatents); fmt.Sprint(b.shape(y)) != fmt.Sprint(want) {
			return "", fmt.Errorf("%s: the model predicts %v for latents %v", addr, b.shape(y), want)
		}
	}
	return y, nil
}
