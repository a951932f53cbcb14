package program

import "fmt"

// final emits the final stage on its stream: an adaptive norm (modulation
// of 2 chunks in final_norm_order) or a plain norm, then the head linear;
// each part only when the structure has its role.
func (b *builder) final() (string, error) {
	f := &b.st.Final
	const addr = "final"
	x, ok := b.stream[f.Stream]
	if !ok {
		return "", fmt.Errorf("%s: no stream %q", addr, f.Stream)
	}
	seg := -1
	if bd := f.Boundary; bd != nil {
		seg = b.begin(addr, bd.Module)
		b.tap(x, bd.Module, bd.Inputs["x"], true)
		b.tap(b.cond, bd.Module, bd.Inputs["cond"], true)
	}
	y := x
	var err error
	if r, ok := f.Roles["modulation"]; ok {
		order, err := b.doc.OrderAt("final_norm_order", addr)
		if err != nil {
			return "", err
		}
		mods, err := b.modulation(addr, "", r, order, 1)
		if err != nil {
			return "", err
		}
		n, err := b.norm(x, addr+".norm", f.Roles["norm"], 0, "")
		if err != nil {
			return "", err
		}
		if y, err = b.modulate(n, mods[0], addr, "modulate"); err != nil {
			return "", err
		}
	} else if r, ok := f.Roles["norm"]; ok {
		if y, err = b.norm(x, addr+".norm", r, 0, ""); err != nil {
			return "", err
		}
	}
	if bd := f.Boundary; bd != nil {
		b.tap(y, bd.Module, bd.Outputs["out"], false)
		b.end(seg)
	}
	if r, ok := f.Roles["head"]; ok {
		if y, err = b.linear(y, addr+".head", r); err != nil {
			return "", err
		}
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
