package discover

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/zflow/zflow/semantics"
)

// labels are the factors' names in words, for tables.
var labels = map[string]string{
	"gate_fn":                  "gate function",
	"rope_layout":              "RoPE layout",
	"rope_axes":                "RoPE channels per axis",
	"rope_theta":               "RoPE θ",
	"rope_freq_axes":           "RoPE axis per frequency",
	"rope_position_max":        "RoPE coordinate maxima",
	"joint_order":              "joint sequence order",
	"modulation_order":         "modulation chunk order",
	"modulation_plus_one":      "modulation scale",
	"modulation_act":           "modulation activation",
	"final_norm_order":         "final norm chunk order",
	"timestep_flip_sin_to_cos": "timestep sinusoid layout",
	"timestep_freq_shift":      "timestep frequency shift",
	"timestep_freq_overrides":  "timestep frequencies read",
	"timestep_scale":           "timestep scale",
	"timestep_scale_at":        "timestep scale applied",
	"timestep_max_period":      "timestep max period",
	"embed_act":                "conditioning MLP activation",
	"norm_kind":                "norm kind",
	"norm_eps":                 "norm ε",
	"norm_offset":              "norm γ offset",
	"qk_norm":                  "q/k norm",
	"mlp_act":                  "MLP activation",
	"mlp_glu":                  "MLP gated",
	"parallel_order":           "parallel block columns",
	"attention_causal":         "attention mask",
	"attention_scale":          "attention scale",
	"patch_layout":             "latents to tokens",
	"euler_sign":               "Euler sign",
}

// Describe returns a factor's name and value in words: ("joint sequence
// order", "text rows first").
func Describe(f semantics.Factor) (label, value string) {
	label = labels[f.Name]
	if label == "" {
		label = f.Name
	}
	v := f.Value
	s, _ := v.(string)
	b, isBool := v.(bool)
	n, isNum := number(v)
	switch f.Name {
	case "joint_order":
		value = map[string]string{"text_first": "text rows first", "image_first": "image rows first"}[s]
	case "euler_sign":
		value = fmt.Sprintf("x ← x %s Δσ·v", map[bool]string{true: "+", false: "−"}[n > 0])
	case "gate_fn":
		value = map[string]string{"identity": "x + gate·y", "tanh": "x + tanh(gate)·y", "sigmoid": "x + sigmoid(gate)·y"}[s]
	case "rope_layout":
		value = map[string]string{"interleaved": "interleaved pairs", "half": "halves (rotate half)", "none": "no RoPE"}[s]
	case "modulation_plus_one":
		value = map[bool]string{true: "norm(x)·(1 + scale) + shift", false: "norm(x)·scale + shift"}[b]
	case "modulation_order", "final_norm_order":
		value = strings.ReplaceAll(s, ",", ", ")
	case "timestep_flip_sin_to_cos":
		value = map[bool]string{true: "[cos, sin]", false: "[sin, cos]"}[b]
	case "timestep_scale":
		value = "σ × " + num(n)
	case "timestep_scale_at":
		value = map[string]string{"input": "before the sinusoid", "sinusoid": "inside the sinusoid"}[s]
	case "norm_offset":
		value = map[bool]string{true: "γ", false: "1 + γ"}[n == 0]
	case "qk_norm":
		value = map[string]string{"none": "none", "rms": "RMS per head", "layer": "layer norm per head"}[s]
	case "mlp_glu":
		value = map[bool]string{true: "act(gate)·in", false: "not gated"}[b]
	case "parallel_order":
		value = map[string]string{"attention_first": "[attention, MLP]", "mlp_first": "[MLP, attention]"}[s]
	case "attention_causal":
		value = map[bool]string{true: "causal", false: "none (all rows)"}[b]
	case "attention_scale":
		if n == 0 {
			value = "1/√head_dim"
		} else {
			value = num(n)
		}
	case "patch_layout":
		value = map[string]string{"none": "already tokens", "c_ph_pw": "patches (c, ph, pw)"}[s]
	}
	if value != "" {
		return label, value
	}
	switch {
	case isBool:
		return label, strconv.FormatBool(b)
	case isNum:
		return label, num(n)
	case s != "":
		return label, s
	}
	if ints, err := semantics.Ints(v); err == nil {
		parts := make([]string, len(ints))
		for i, n := range ints {
			parts[i] = strconv.Itoa(n)
		}
		return label, strings.Join(parts, ", ")
	}
	return label, fmt.Sprint(v)
}

// Margin renders a margin the way tables show it: "×18,834", "×2.24",
// "×∞" for an exact winner.
func Margin(m float64) string {
	switch {
	case math.IsInf(m, 1):
		return "×∞"
	case m >= 100:
		return "×" + thousands(int64(math.Round(m)))
	}
	return "×" + strconv.FormatFloat(m, 'g', 3, 64)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func num(n float64) string { return strconv.FormatFloat(n, 'g', -1, 64) }

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}
