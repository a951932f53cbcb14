package semantics

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Runs, stream names, embedder kinds and position sources.
var (
	runs            = []string{"flow_euler", "forward"}
	streamNames     = []string{"image", "text"}
	embedderKinds   = []string{"linear", "table"}
	positionSources = []string{"input", "grid", "sequence"}
	// inputRoles: what a request input is for. "positions.<stream>" holds a
	// stream's position ids ([rows, axes]).
	inputRoles = []string{"latents", "sigmas", "context", "pooled", "token_ids", "positions.image", "positions.text"}
	// outputRoles: the final x of a flow_euler run, or a forward's result.
	outputRoles = []string{"latents", "hidden"}
)

// RoleKind says what parameters a role carries.
type RoleKind uint8

const (
	RoleLinear RoleKind = iota + 1 // weight [out, in] required, bias optional
	RoleNorm                       // weight and bias optional (absent: not affine)
	RoleTable                      // weight [rows, width] required, no bias
	RolePoint                      // no parameters: a boundary only
)

func (k RoleKind) String() string {
	switch k {
	case RoleLinear:
		return "linear"
	case RoleNorm:
		return "norm"
	case RoleTable:
		return "table"
	case RolePoint:
		return "point"
	}
	return fmt.Sprintf("RoleKind(%d)", uint8(k))
}

// roleSpec is one role a component may have.
type roleSpec struct {
	kind     RoleKind
	required bool
}

// Roles of the other components.
var (
	embedderRoles = map[string]map[string]roleSpec{
		"linear": {"norm": {RoleNorm, false}, "proj": {RoleLinear, true}},
		"table":  {"table": {RoleTable, true}},
	}
	conditioningRoles = map[string]roleSpec{
		"sinusoid": {RolePoint, false},
		"time_in":  {RoleLinear, true}, "time_out": {RoleLinear, true},
		"pooled_in": {RoleLinear, false}, "pooled_out": {RoleLinear, false},
	}
)

// BlockKinds lists the block kinds (the recipes), sorted.
func BlockKinds() []string { return sortedKeys(recipes) }

// BlockRoles returns the roles of a block of kind with the given streams
// (prefixed per stream where each stream has its own weights) and their
// kinds, as the kind's recipe binds them.
func BlockRoles(kind string, streams []string) map[string]RoleKind {
	if _, ok := recipes[kind]; !ok {
		return nil
	}
	out := map[string]RoleKind{}
	for name, s := range blockRoleSpecs(kind, streams) {
		out[name] = s.kind
	}
	return out
}

// blockRoleSpecs is BlockRoles with the required flags.
func blockRoleSpecs(kind string, streams []string) map[string]roleSpec {
	out := map[string]roleSpec{}
	r, ok := recipes[kind]
	if !ok {
		return out
	}
	for name, s := range r.roleSpecs() {
		if r.Sets == SetsStreams {
			for _, st := range streams {
				out[st+"."+name] = s
			}
		} else {
			out[name] = s
		}
	}
	return out
}

// Activation names (the op vocabulary's, exec.ParseAct).
var acts = []string{"identity", "silu", "gelu_tanh", "gelu_erf", "tanh", "sigmoid", "relu", "hardswish", "hardsigmoid"}

// Value types of factors.
type valueType uint8

const (
	typeEnum    valueType = iota + 1 // one of Enum
	typeBool                         // true or false
	typeNumber                       // a finite number that Check accepts
	typeInts                         // a list of positive even integers
	typeOrder                        // comma-separated permutation of Chunks
	typeIndices                      // a list of distinct non-negative integers, increasing (may be empty)
	typeColumns                      // a list of non-negative integers (one column per entry)
	typeNumbers                      // a non-empty list of positive finite numbers
)

// FactorSpec is one entry of the factor catalogue.
type FactorSpec struct {
	Name   string
	Doc    string
	typ    valueType
	enum   []string
	chunks []string
	check  func(float64) error
}

func positive(v float64) error {
	if v <= 0 {
		return fmt.Errorf("must be > 0")
	}
	return nil
}

func nonNegative(v float64) error {
	if v < 0 {
		return fmt.Errorf("must be ≥ 0")
	}
	return nil
}

func anyFinite(float64) error { return nil }

func oneOf(vals ...float64) func(float64) error {
	return func(v float64) error {
		for _, w := range vals {
			if v == w {
				return nil
			}
		}
		return fmt.Errorf("must be one of %v", vals)
	}
}

// catalogue is the factor catalogue: canonical names and allowed values.
var catalogue = []FactorSpec{
	{Name: "gate_fn", Doc: "function applied to a residual gate: x + g(gate)·y", typ: typeEnum, enum: []string{"identity", "tanh", "sigmoid"}},
	{Name: "rope_layout", Doc: "which elements rotate together: adjacent pairs, the two halves, or no RoPE", typ: typeEnum, enum: []string{"interleaved", "half", "none"}},
	{Name: "rope_axes", Doc: "channels per position axis, summing to the rotary width", typ: typeInts},
	{Name: "rope_theta", Doc: "RoPE base θ", typ: typeNumber, check: positive},
	{Name: "rope_freq_axes", Doc: "the position column turning each frequency of one ladder (multi-axis RoPE: interleaved, sectioned or any map); absent where each axis has a band of its own", typ: typeColumns},
	{Name: "rope_position_max", Doc: "RoPE tables of float coordinates: per axis the maximum that maps a coordinate m to u = 2·m/max − 1 before the frequency ladder (a bound pair's midpoint as m)", typ: typeNumbers},
	{Name: "joint_order", Doc: "which stream's rows come first in a joined sequence", typ: typeEnum, enum: []string{"text_first", "image_first"}},
	{Name: "modulation_order", Doc: "chunk order of each modulation group (groups: attention, then MLP)", typ: typeOrder, chunks: []string{"shift", "scale", "gate"}},
	{Name: "modulation_plus_one", Doc: "norm(x)·(1 + scale) + shift rather than norm(x)·scale + shift", typ: typeBool},
	{Name: "modulation_act", Doc: "activation applied to the conditioning vector before a modulation linear", typ: typeEnum, enum: acts},
	{Name: "final_norm_order", Doc: "chunk order of the final adaptive norm's modulation", typ: typeOrder, chunks: []string{"shift", "scale"}},
	{Name: "timestep_flip_sin_to_cos", Doc: "sinusoid laid out [cos, sin] rather than [sin, cos]", typ: typeBool},
	{Name: "timestep_freq_shift", Doc: "downscale_freq_shift of the sinusoid frequencies", typ: typeNumber, check: anyFinite},
	{Name: "timestep_scale", Doc: "what the model multiplies the given timestep (σ) by", typ: typeNumber, check: positive},
	{Name: "timestep_scale_at", Doc: "where that multiply happens: on the input before the sinusoid (input) or inside it after the frequency product (sinusoid)", typ: typeEnum, enum: []string{"input", "sinusoid"}},
	{Name: "timestep_freq_overrides", Doc: "entries of the sinusoid frequency table the reference's exp gave off the computed exp(e_i) (the values are the timestep_embed node's attrs)", typ: typeIndices},
	{Name: "timestep_max_period", Doc: "max_period of the sinusoid frequencies", typ: typeNumber, check: positive},
	{Name: "position_offset", Doc: "a sinusoid table of positions output by a module of its own reads positions + offset (fairseq's past the padding index: 2; positions made from the request's shape running down, 0, −1, …, for a table of relative offsets); absent where there is none", typ: typeNumber, check: anyFinite},
	{Name: "embed_act", Doc: "activation between the two linears of a conditioning MLP", typ: typeEnum, enum: acts},
	{Name: "norm_kind", Doc: "layer or RMS normalisation", typ: typeEnum, enum: []string{"layer", "rms"}},
	{Name: "norm_eps", Doc: "ε added to the variance", typ: typeNumber, check: nonNegative},
	{Name: "norm_offset", Doc: "γ' = γ + offset: 0 (γ) or 1 (zero-centred weights)", typ: typeNumber, check: oneOf(0, 1)},
	{Name: "batch_norm_stats", Doc: "a batch norm in eval mode whose running statistics (buffers) the trace does not hold, read with these: initial (mean 0, variance 1)", typ: typeEnum, enum: []string{"initial"}},
	{Name: "qk_norm", Doc: "per-head normalisation of q and k (l2: divided by their L2 norm, cosine attention)", typ: typeEnum, enum: []string{"none", "rms", "layer", "l2"}},
	{Name: "mlp_act", Doc: "MLP activation (of the gate projection when gated)", typ: typeEnum, enum: acts},
	{Name: "mlp_squared", Doc: "the MLP activation is squared: f(x)·f(x) (squared ReLU)", typ: typeBool},
	{Name: "mlp_glu", Doc: "gated MLP: out(act(mlp_gate(x))·mlp_in(x))", typ: typeBool},
	{Name: "mlp_limit", Doc: "a gated unit's clamp: gate ≤ limit and up within ±limit before the unit; 0 means none", typ: typeNumber, check: nonNegative},
	{Name: "mlp_swish_beta", Doc: "the silu gate as Swish-β, gate·σ(β·gate) (1.702: the quick-GELU form); 0 means silu itself", typ: typeNumber, check: nonNegative},
	{Name: "mlp_up_offset", Doc: "a gated unit reads f(gate)·(up + offset); 0 means none", typ: typeNumber, check: anyFinite},
	{Name: "parallel_order", Doc: "order of [attention, MLP] rows of a parallel block's fused output projection", typ: typeEnum, enum: []string{"attention_first", "mlp_first"}},
	{Name: "attention_causal", Doc: "query i sees keys j ≤ i only", typ: typeBool},
	{Name: "attention_scale", Doc: "score scale; 0 means 1/√head_dim", typ: typeNumber, check: nonNegative},
	{Name: "attention_window", Doc: "sliding window of a causal attention: query i sees keys i − window < j ≤ i; 0 means none", typ: typeNumber, check: nonNegative},
	{Name: "attention_block", Doc: "block-local attention: queries in blocks of this size see their own block of keys, after the keys past the queries' count, which every query sees; 0 means none", typ: typeNumber, check: nonNegative},
	{Name: "attention_softcap", Doc: "attention-logit soft cap c: scores c·tanh(s/c); 0 means none", typ: typeNumber, check: nonNegative},
	{Name: "attention_alibi", Doc: "ALiBi: slope_h · key position added to head h's scores", typ: typeBool},
	{Name: "attention_clip", Doc: "q, k and v clamped to [−c, c] before RoPE (a clip of the projections); 0 means none", typ: typeNumber, check: nonNegative},
	{Name: "attention_segments", Doc: "attention within segments of the rows: the bounds [0, b_1, …, N] (a varlen attention's cu_seqlens) cut the sequence, a row attends to its own segment's keys alone; absent where none", typ: typeColumns},
	{Name: "attention_sinks", Doc: "attention sinks: a learned logit per query head joined to every row's scores before the softmax, its probability dropped after", typ: typeBool},
	{Name: "attention_qk_format", Doc: "q and k (after RoPE) rounded to this narrower format and read back before the scores (an f32 run that casts them to bf16); absent where they are not", typ: typeEnum, enum: []string{"bf16", "f16"}},
	{Name: "attention_relative_shift", Doc: "relative-position attention (Transformer-XL's): the position term (q + w)·Pᵀ over a table P of 2S − 1 relative offsets, shifted so that query i reads row S − 1 − i + j for key j (key_minus_query: P's rows run from offset S − 1 down) or S − 1 + i − j (query_minus_key), added to the scores and scaled as they are; absent for other attentions", typ: typeEnum, enum: []string{"key_minus_query", "query_minus_key"}},
	{Name: "attention_relative_biases", Doc: "the same attention: which terms add a parameter of their own to the queries (Transformer-XL's u to the content term, w to the position term): content_and_position, content, position, shared (one for both) or none", typ: typeEnum, enum: []string{"content_and_position", "content", "position", "shared", "none"}},
	{Name: "attention_position_terms", Doc: "disentangled attention (DeBERTa's): which position terms are added to the content scores q·kᵀ, each read off a projected table of relative buckets at clamped indices: c2p (q against the position keys at the query-to-key bucket), p2c (k against the position queries at the key-to-query bucket), both, or none; absent for other attentions", typ: typeEnum, enum: []string{"c2p+p2c", "c2p", "p2c", "none"}},
	{Name: "attention_scale_factor", Doc: "the same attention: f in its scale 1/√(D·f), one more than the position terms it sums in DeBERTa (each term scaled alike)", typ: typeNumber, check: positive},
	{Name: "attention_lambda", Doc: "differential attention (the first half of the heads' maps minus λ times the second half's, over values re-laid as [v_j, v_{j+H/2}]): λ computed from the attention's own vector parameters, Σ ± exp(x·y) + c with c = 1 − the scale the attention applies after (the pairing in the evidence), or a fitted number per call where they do not decide it", typ: typeEnum, enum: []string{"vectors", "fitted"}},
	{Name: "attention_temperature", Doc: "cosine attention (q and k L2-normalised per head): how each head's temperature, which alone scales the scores, is made from its parameter: exp(p) or p as it is", typ: typeEnum, enum: []string{"exp", "param"}},
	{Name: "attention_kernel", Doc: "kernelised (linear) attention: φ(q)·(φ(k)ᵀv) normalised by φ(q)·Σφ(k), φ this activation; absent for softmax attention", typ: typeEnum, enum: acts},
	{Name: "mix_sinkhorn_steps", Doc: "a doubly stochastic stream-mixing matrix (hyper-connections' sinkhorn node): the number of alternating column and row normalisations", typ: typeNumber, check: positive},
	{Name: "mix_sinkhorn_eps", Doc: "the same matrix: the ε added to the softmax and to every sum it is divided by", typ: typeNumber, check: nonNegative},
	{Name: "attention_angular_power", Doc: "YOSO's expected LSH attention (angular_attention): the power τ of (1 − acos(q̂·k̂)/π) weighting the values (hash_code_len); absent for other attentions", typ: typeNumber, check: positive},
	{Name: "ssm_skip", Doc: "a selective state-space scan (ssm_scan) adds the skip D·x (a [H] vector per head); absent where no scan was found", typ: typeBool},
	{Name: "recurrent_cell", Doc: "a recurrent layer (recurrence nodes): the cell, lstm (gates i, f, g, o), gru (r, z, n) or an RNN of tanh or relu; absent where none was found", typ: typeEnum, enum: []string{"lstm", "gru", "tanh", "relu"}},
	{Name: "recurrent_batch_first", Doc: "the same layer reads its input [B, L, I] (true) or [L, B, I] (false: torch's default)", typ: typeBool},
	{Name: "patch_layout", Doc: "how latents become tokens: none (already tokens) or patches with features (c, ph, pw)", typ: typeEnum, enum: []string{"none", "c_ph_pw"}},
	{Name: "euler_sign", Doc: "x ← x + sign·(σ[i+1] − σ[i])·v", typ: typeNumber, check: oneOf(1, -1)},
}

// Catalogue returns the factor catalogue.
func Catalogue() []FactorSpec { return append([]FactorSpec(nil), catalogue...) }

// LookupSpec returns the catalogue entry of a factor name.
func LookupSpec(name string) (FactorSpec, bool) {
	for _, s := range catalogue {
		if s.Name == name {
			return s, true
		}
	}
	return FactorSpec{}, false
}

// CheckValue returns an error if v is not an allowed value of the factor.
func (s FactorSpec) CheckValue(v any) error {
	switch s.typ {
	case typeEnum:
		str, ok := v.(string)
		if !ok || !contains(s.enum, str) {
			return fmt.Errorf("%v is not one of %s", jsonish(v), strings.Join(s.enum, ", "))
		}
	case typeBool:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%v is not true or false", jsonish(v))
		}
	case typeNumber:
		f, ok := number(v)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%v is not a finite number", jsonish(v))
		}
		if err := s.check(f); err != nil {
			return fmt.Errorf("%v %v", f, err)
		}
	case typeInts:
		if _, err := Ints(v); err != nil {
			return err
		}
	case typeIndices:
		if _, err := Indices(v); err != nil {
			return err
		}
	case typeColumns:
		if _, err := intList(v, false); err != nil {
			return err
		}
	case typeNumbers:
		if _, err := numberList(v); err != nil {
			return err
		}
	case typeOrder:
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%v is not a string", jsonish(v))
		}
		if _, err := Order(str, s.chunks); err != nil {
			return err
		}
	}
	return nil
}

// Ints reads a factor value that is a list of positive even integers.
func Ints(v any) ([]int, error) {
	list, ok := v.([]any)
	if !ok {
		if ints, ok := v.([]int); ok {
			list = make([]any, len(ints))
			for i, n := range ints {
				list[i] = float64(n)
			}
		} else {
			return nil, fmt.Errorf("%v is not a list of integers", jsonish(v))
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	out := make([]int, len(list))
	for i, e := range list {
		f, ok := number(e)
		if !ok || f != math.Trunc(f) || f <= 0 || int(f)%2 != 0 || f > 1<<20 {
			return nil, fmt.Errorf("element %d (%v) is not a positive even integer", i, jsonish(e))
		}
		out[i] = int(f)
	}
	return out, nil
}

// Indices reads a factor value that is an increasing list of
// non-negative integers (possibly empty).
func Indices(v any) ([]int, error) { return intList(v, true) }

// intList reads a list of non-negative integers, each above the one
// before where increasing.
func intList(v any, increasing bool) ([]int, error) {
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case []int:
		for _, n := range x {
			list = append(list, float64(n))
		}
	default:
		return nil, fmt.Errorf("%v is not a list of integers", jsonish(v))
	}
	out := make([]int, len(list))
	for i, e := range list {
		f, ok := number(e)
		if !ok || f != math.Trunc(f) || f < 0 || f > 1<<20 {
			return nil, fmt.Errorf("element %d (%v) is not a non-negative integer", i, jsonish(e))
		}
		if increasing && i > 0 && int(f) <= out[i-1] {
			return nil, fmt.Errorf("element %d (%v) is not above the one before", i, jsonish(e))
		}
		out[i] = int(f)
	}
	return out, nil
}

// Order reads a comma-separated permutation of chunks.
func Order(s string, chunks []string) ([]string, error) {
	parts := strings.Split(s, ",")
	seen := map[string]bool{}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		parts[i] = p
		if !contains(chunks, p) {
			return nil, fmt.Errorf("%q: %q is not one of %s", s, p, strings.Join(chunks, ", "))
		}
		if seen[p] {
			return nil, fmt.Errorf("%q names %q twice", s, p)
		}
		seen[p] = true
	}
	if len(parts) != len(chunks) {
		return nil, fmt.Errorf("%q must name each of %s once", s, strings.Join(chunks, ", "))
	}
	return parts, nil
}

// number reads a JSON number (float64) or a Go integer.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

func jsonish(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// sortedKeys lists a map's keys in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Values lists an enum factor's allowed values (nil for other types).
func (s FactorSpec) Values() []string { return append([]string(nil), s.enum...) }

// Chunks lists an order factor's chunk names in canonical order (nil for
// other types).
func (s FactorSpec) Chunks() []string { return append([]string(nil), s.chunks...) }

// LatentsRole is the role of a flow_euler run's k-th latents: "latents",
// then "latents.1", "latents.2", … (a model that denoises several latents
// together, each stepped by its own output of the one call).
func LatentsRole(k int) string {
	if k == 0 {
		return "latents"
	}
	return fmt.Sprintf("latents.%d", k)
}

// LatentsIndex is k for LatentsRole(k); ok false for any other role.
func LatentsIndex(role string) (k int, ok bool) {
	if role == "latents" {
		return 0, true
	}
	rest, found := strings.CutPrefix(role, "latents.")
	if !found {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 1 || LatentsRole(k) != role {
		return 0, false
	}
	return k, true
}

// numberList reads a non-empty list of positive finite numbers.
func numberList(v any) ([]float64, error) {
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case []float64:
		for _, f := range x {
			list = append(list, f)
		}
	default:
		return nil, fmt.Errorf("%v is not a list of numbers", jsonish(v))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	out := make([]float64, len(list))
	for i, e := range list {
		f, ok := number(e)
		if !ok || !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("element %d (%v) is not a positive finite number", i, jsonish(e))
		}
		out[i] = f
	}
	return out, nil
}
