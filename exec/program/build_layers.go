package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// The layers the embedders, conditioning and final stage are made of
// (blocks run their recipes, build_recipe.go): linear, norm, activation,
// modulation. Each takes the address its factors are read at and the node
// role its precision rules match.

// linear emits x·Wᵀ + b for role r.
func (b *builder) linear(x, role string, r semantics.Role) (string, error) {
	w, err := b.weight(r.Weight)
	if err != nil {
		return "", fmt.Errorf("%s: %w", role, err)
	}
	bias, err := b.optWeight(r.Bias)
	if err != nil {
		return "", fmt.Errorf("%s: %w", role, err)
	}
	out, err := b.emit1(OpLinear, role, []string{x, w, bias}, Attrs{})
	if err != nil {
		return "", err
	}
	b.tapRoleInput(x, r)
	b.tapRole(out, r)
	return out, nil
}

// norm emits a norm at address addr (its factors: norm_kind unless kind is
// given, norm_eps, norm_offset) over groups of group elements (0: all).
func (b *builder) norm(x, addr string, r semantics.Role, group int, kind string) (string, error) {
	var err error
	if kind == "" {
		if kind, err = b.doc.String("norm_kind", addr); err != nil {
			return "", err
		}
	}
	eps, err := b.doc.Number("norm_eps", addr)
	if err != nil {
		return "", err
	}
	offset, err := b.doc.Number("norm_offset", addr)
	if err != nil {
		return "", err
	}
	return b.normWith(x, addr, r, kind, eps, offset, group)
}

// normWith emits a norm of the given kind (layer, rms), eps and offset.
func (b *builder) normWith(x, addr string, r semantics.Role, kind string, eps, offset float64, group int) (string, error) {
	var nk exec.NormKind
	switch kind {
	case "layer":
		nk = exec.NormLayer
	case "rms":
		nk = exec.NormRMS
	default:
		return "", fmt.Errorf("%s: norm kind %q is not supported", addr, kind)
	}
	gamma, err := b.optWeight(r.Weight)
	if err != nil {
		return "", fmt.Errorf("%s: %w", addr, err)
	}
	beta, err := b.optWeight(r.Bias)
	if err != nil {
		return "", fmt.Errorf("%s: %w", addr, err)
	}
	p := exec.NormParams{Kind: nk, Eps: float32(eps), Offset: float32(offset), Group: group}
	out, err := b.emit1(OpNorm, addr, []string{x, gamma, beta}, Attrs{Norm: p})
	if err != nil {
		return "", err
	}
	b.tapRoleInput(x, r)
	b.tapRole(out, r)
	return out, nil
}

// actKind reads an activation factor.
func (b *builder) actKind(factor, addr string) (exec.ActKind, error) {
	s, err := b.doc.String(factor, addr)
	if err != nil {
		return 0, err
	}
	a, err := exec.ParseAct(s)
	if err != nil {
		return 0, fmt.Errorf("factor %s at %s: %w", factor, addr, err)
	}
	return a, nil
}

// act emits f(x), or returns x for the identity.
func (b *builder) act(x, role string, f exec.ActKind) (string, error) {
	if f == exec.ActIdentity {
		return x, nil
	}
	return b.emit1(OpAct, role, []string{x}, Attrs{Act: f})
}

// modulation emits act(cond) → linear → chunks and returns groups of
// chunks by name (order: the chunk names of one group, in order).
func (b *builder) modulation(addr, prefix string, r semantics.Role, order []string, groups int) ([]map[string]string, error) {
	if b.cond == "" {
		return nil, fmt.Errorf("%s: modulation needs the conditioning vector, and the structure has no conditioning", addr)
	}
	f, err := b.actKind("modulation_act", addr)
	if err != nil {
		return nil, err
	}
	m, err := b.act(b.cond, addr+"."+prefix+"modulation_act", f)
	if err != nil {
		return nil, err
	}
	mod, err := b.linear(m, addr+"."+prefix+"modulation", r)
	if err != nil {
		return nil, err
	}
	n := len(order) * groups
	if w := b.shape(mod)[len(b.shape(mod))-1]; w != n*b.st.Hidden {
		return nil, fmt.Errorf("%s.%smodulation: width %d is not %d chunks of the hidden width %d", addr, prefix, w, n, b.st.Hidden)
	}
	chunks, err := b.emit(OpChunk, addr+"."+prefix+"chunks", []string{mod}, Attrs{N: n, Axis: -1})
	if err != nil {
		return nil, err
	}
	out := make([]map[string]string, groups)
	for g := range out {
		out[g] = map[string]string{}
		for i, name := range order {
			out[g][name] = chunks[g*len(order)+i]
		}
	}
	return out, nil
}

// modulate emits x·(1 + scale) + shift (or x·scale + shift) by the
// modulation_plus_one factor at addr.
func (b *builder) modulate(x string, chunk map[string]string, addr, name string) (string, error) {
	plus, err := b.doc.Bool("modulation_plus_one", addr)
	if err != nil {
		return "", err
	}
	return b.emit1(OpModulate, addr+"."+name, []string{x, chunk["shift"], chunk["scale"]},
		Attrs{Modulate: exec.ModulateParams{PlusOne: plus}})
}
