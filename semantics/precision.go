package semantics

// Precision is the rounding plan: the format activations are stored in,
// rules that give an op (by node op and role) other rounding points, the
// RoPE tables' formats, and, once measured, each boundary's fraction of
// bit-exact values.
type Precision struct {
	// Status: "declared" (written from the reference's source),
	// "searched" (found by the precision search), "partial" (the precision
	// search's best plan when its time ran out) or "placeholder".
	Status      string `json:"status"`
	Activations string `json:"activations"` // f32 | bf16 | f16
	// Rules apply to a program node when Op equals the node's op and Role
	// (a glob, as scopes; empty matches all) matches the node's role; the
	// first matching rule wins; a node no rule matches stores in
	// Activations and rounds nowhere else.
	Rules     []PrecisionRule   `json:"rules,omitempty"`
	RopeTable *RopeTableFormats `json:"rope_table,omitempty"`
	// Exact: boundary ("<module>/<port>") → fraction bit-exact.
	Exact map[string]float64 `json:"exact,omitempty"`
	// Scoring: boundary → the rows the search scored its candidates on
	// there, of how many; Rows == Of where it scored every row. Exact
	// always holds every row.
	Scoring map[string]Scored `json:"scoring,omitempty"`
}

// Scored is how much of one boundary the precision search scored its
// candidates on: Rows of its Of rows (rows: every element but the last
// axis; a sample is taken where an op computes each row on its own).
type Scored struct {
	Rows int `json:"rows"`
	Of   int `json:"of"`
}

// PrecisionRule is one op's precision spec.
type PrecisionRule struct {
	Op    string `json:"op"`              // node op (precisionOps)
	Role  string `json:"role,omitempty"`  // node role glob
	Out   string `json:"out,omitempty"`   // storage format; empty: Activations
	Round string `json:"round,omitempty"` // rounding points joined by "|"
	Math  string `json:"math,omitempty"`  // variants joined by "|": precise, fast_exp, recip_div, welford
	// Pinned: a storage format the trace shows (the captured dtype of the
	// node's boundary), declared by discovery; the rounding search keeps
	// it ahead of what it searches.
	Pinned bool `json:"pinned,omitempty"`
	// Evidence: how the precision search decided the rule (absent for a
	// declared rule).
	Evidence *RuleEvidence `json:"evidence,omitempty"`
}

// RuleEvidence is a searched rule's evidence: the rule's candidates scored
// teacher-forced at the boundaries whose value depends on the ops it
// covers.
type RuleEvidence struct {
	Metric     string  `json:"metric"`     // exact_fraction
	Boundaries int     `json:"boundaries"` // boundary values scored (over every step)
	Exact      float64 `json:"exact"`      // pooled fraction bit-exact under the rule
	// Margin: error of the best candidate that scores differently / the
	// winner's error ("inf" when the winner is exact).
	Margin Margin `json:"margin"`
	// MarginAtLeast: the runner-up was scored only until it could not
	// win (its candidate's at_least), so the margin is a lower bound.
	MarginAtLeast bool `json:"margin_at_least,omitempty"`
	Decisive      bool `json:"decisive"`
	// Equivalent: candidates that score exactly as the winner here (the
	// trace does not tell them apart).
	Equivalent []string    `json:"equivalent,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"` // label → 1 − exact fraction
}

// RopeTableFormats are the formats RoPE tables are computed in.
type RopeTableFormats struct {
	Freq  string `json:"freq"`  // the inverse frequencies: f64, f32 or bf16
	Angle string `json:"angle"` // position·frequency and cos/sin: f64 or f32
	Out   string `json:"out"`   // the tables' storage format
}

// Precision vocabulary.
var (
	precisionStatuses = []string{"declared", "searched", "partial", "placeholder"}
	formats           = []string{"f32", "bf16", "f16", "f64"}
	precisionOps      = []string{"linear", "norm", "modulate", "rope", "attention", "act", "glu", "gated_residual", "add", "mul", "sub", "div", "timestep_embed", "cast", "rope_table", "round", "mean", "route", "experts", "softmax", "minimum", "maximum", "conv2d", "linear_attention", "where", "ssm_scan", "angular_attention", "delta_scan", "memory_scan", "fft2_real", "sinkhorn", "matmul", "recurrence", "qr"}
	roundPoints       = []string{"each", "normalized", "scale", "product", "gate", "before_bias", "scores", "probs", "weights", "stats", "accum", "query", "moments"}
	mathVariants      = []string{"precise", "fast_exp", "recip_div", "welford", "tensor_core", "cuda_sincos", "scalar_f32", "gelu_factored", "f64_sincos", "online_softmax", "l2", "normalize_f32", "sqrt_div"}
)

// RoundPoints lists the rounding point names a rule may use.
func RoundPoints() []string { return append([]string(nil), roundPoints...) }

// MathVariants lists the math variant names a rule may use.
func MathVariants() []string { return append([]string(nil), mathVariants...) }

// PrecisionOps lists the node ops a rule may name.
func PrecisionOps() []string { return append([]string(nil), precisionOps...) }

// Rule returns the first rule for op whose role glob matches role.
func (p *Precision) Rule(op, role string) (PrecisionRule, bool) {
	for _, r := range p.Rules {
		if r.Op == op && (r.Role == "" || MatchScope(r.Role, role)) {
			return r, true
		}
	}
	return PrecisionRule{}, false
}
