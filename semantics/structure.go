package semantics

// Structure is what the call tree and the shapes show: the streams of
// tokens, the request inputs by role, the embedders, the conditioning
// vector, the positions, the blocks in execution order and the final
// stage. Every part binds roles (catalogue.go) to parameter paths and to
// trace boundaries; nothing in it names a model.
type Structure struct {
	// Run is how the model is driven: "flow_euler" (the model predicts a
	// velocity once per step of a flow-matching Euler loop over the
	// sigmas input) or "forward" (one call).
	Run string `json:"run"`
	// Model is the model's own call: its module and its ports by value
	// role (inputs: the input roles and "timestep"; outputs: "velocity"
	// for flow_euler, "hidden" for forward).
	Model   Boundary `json:"model"`
	Hidden  int      `json:"hidden"` // residual-stream width
	Streams []Stream `json:"streams"`
	Inputs  []Input  `json:"inputs"`
	Outputs []Output `json:"outputs"`

	Embedders    []Embedder    `json:"embedders"`
	Conditioning *Conditioning `json:"conditioning,omitempty"`
	Positions    *Positions    `json:"positions,omitempty"`
	Blocks       []Block       `json:"blocks"`
	Final        Final         `json:"final"`
}

// Stream is a sequence of token rows with its own embedder: "image" (the
// rows the sampler integrates, or the only rows of a forward model's
// output) and "text" (conditioning rows, or a language model's tokens).
type Stream struct {
	Name   string `json:"name"`
	Tokens int    `json:"tokens"` // rows in the source run
}

// Input is one request input by role (catalogue.go, inputRoles).
type Input struct {
	Role  string `json:"role"`
	Name  string `json:"name"`  // the trace's input name: input/<name>
	Shape []int  `json:"shape"` // in the source run
}

// Output is one result by role ("latents" or "hidden").
type Output struct {
	Role string `json:"role"`
	Name string `json:"name"` // output/<name>
}

// Role binds one part of a component to the trace: the module whose call
// computes it (a boundary: its output port, "out" when empty) and its
// parameters. Which roles need a weight is the role's kind (catalogue.go).
type Role struct {
	Module string `json:"module,omitempty"`
	Port   string `json:"port,omitempty"`
	Weight string `json:"weight,omitempty"`
	Bias   string `json:"bias,omitempty"`
}

// OutPort is the role's output port ("out" by default).
func (r Role) OutPort() string {
	if r.Port == "" {
		return "out"
	}
	return r.Port
}

// Boundary is a module call of the reference and its ports by value role:
// where the reference's own tensors for a component's inputs and outputs
// live (a trace key is "<scope>/<module>/<port>").
type Boundary struct {
	Module  string            `json:"module"`
	Inputs  map[string]string `json:"inputs,omitempty"`
	Outputs map[string]string `json:"outputs,omitempty"`
}

// Embedder turns one request input into a stream's rows.
type Embedder struct {
	Stream string `json:"stream"`
	Input  string `json:"input"` // the input role it reads
	// Kind: "linear" (features → hidden by a linear, after an optional
	// norm) or "table" (integer ids → rows of an embedding table).
	Kind    string          `json:"kind"`
	InWidth int             `json:"in_width"` // features in (linear) or table rows (table)
	Patch   int             `json:"patch,omitempty"`
	Roles   map[string]Role `json:"roles"`
}

// Conditioning is the per-sample vector that modulates the blocks: a
// sinusoidal timestep embedding through a two-linear MLP, plus (when
// present) a pooled input through another, summed.
type Conditioning struct {
	TimestepDim int             `json:"timestep_dim"` // sinusoid channels
	Roles       map[string]Role `json:"roles"`
	Boundary    *Boundary       `json:"boundary,omitempty"` // inputs timestep/pooled, output cond
}

// Positions says where each stream's position ids come from; the RoPE
// layout, axes and theta are factors.
type Positions struct {
	Streams  map[string]PositionSource `json:"streams"`
	Boundary *Boundary                 `json:"boundary,omitempty"` // inputs ids, outputs cos/sin
}

// PositionSource makes one stream's ids, one column per RoPE axis.
type PositionSource struct {
	// From: "input" (the request input with role Input), "grid" (row-major
	// over Grid, id = index + Origin per axis) or "sequence" (row i has
	// id Start + i·Step per axis).
	From   string `json:"from"`
	Input  string `json:"input,omitempty"`
	Grid   []int  `json:"grid,omitempty"`
	Origin []int  `json:"origin,omitempty"`
	Start  []int  `json:"start,omitempty"`
	Step   []int  `json:"step,omitempty"`
}

// Block is one transformer block. Kind names its recipe (recipe.go), which
// fixes its dataflow and the roles it has; Streams lists the streams it
// reads and writes (a recipe with sets "streams": one weight set each;
// "joined": one weight set for all, the streams joined in joint order).
type Block struct {
	Kind     string          `json:"kind"`
	Streams  []string        `json:"streams"`
	Heads    int             `json:"heads"`
	KVHeads  int             `json:"kv_heads"`
	HeadDim  int             `json:"head_dim"`
	MLPWidth int             `json:"mlp_width"`
	Roles    map[string]Role `json:"roles"`
	// Boundary: inputs by stream name (or "joint" for a joined sequence)
	// and "cond"; outputs by stream name or "joint".
	Boundary *Boundary `json:"boundary,omitempty"`
}

// Final is what follows the blocks, on one stream: an optional adaptive
// or plain norm and an optional head linear.
type Final struct {
	Stream   string          `json:"stream"`
	Roles    map[string]Role `json:"roles"`
	Boundary *Boundary       `json:"boundary,omitempty"` // the norm stage: inputs x, cond; output out
}

// ParamPaths lists every parameter path the structure's roles name,
// sorted, each once.
func (s *Structure) ParamPaths() []string {
	seen := map[string]bool{}
	add := func(roles map[string]Role) {
		for _, r := range roles {
			for _, p := range []string{r.Weight, r.Bias} {
				if p != "" {
					seen[p] = true
				}
			}
		}
	}
	for _, e := range s.Embedders {
		add(e.Roles)
	}
	if s.Conditioning != nil {
		add(s.Conditioning.Roles)
	}
	for _, b := range s.Blocks {
		add(b.Roles)
	}
	add(s.Final.Roles)
	return sortedKeys(seen)
}
