package semantics

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
)

// Program is a model's dataflow in the op vocabulary (DESIGN.md, "The op
// vocabulary"), as discovery recovered it from the trace: named values
// (parameters bound by path, request inputs by role, constants the trace
// shows, intermediates), nodes in execution order, and the reference
// boundary each value corresponds to. A document that carries a program is
// run by interpreting it; its structure then says only how the model is
// driven (run, inputs, outputs).
type Program struct {
	Values  []ProgramValue `json:"values"`
	Nodes   []ProgramNode  `json:"nodes"`
	Outputs []string       `json:"outputs"`
	// Segments are the reference calls the nodes compute, in entry order
	// (a parent before its children): what teacher forcing and precision
	// rules address.
	Segments []ProgramSegment `json:"segments,omitempty"`
}

// ProgramValue is one named tensor of a program.
type ProgramValue struct {
	Name string `json:"name"`
	// Kind: weight (Source: parameter path), input (Source: input role),
	// step_input (Source: latents | timestep | next_timestep | index: σ_i, σ_{i+1}, i), const (Data), temp.
	Kind   string       `json:"kind"`
	Source string       `json:"source,omitempty"`
	Shape  []int        `json:"shape"`
	Format string       `json:"format,omitempty"` // const: the format Data is uploaded in
	Data   Float32s     `json:"data,omitempty"`   // const
	Taps   []ProgramTap `json:"taps,omitempty"`
	// Note says where a constant came from (a table the trace shows, equal
	// at every step; a position index).
	Note string `json:"note,omitempty"`
	// FromTrace marks a constant the program takes from the trace because
	// no expression of the vocabulary makes it from the request: a
	// document with one is incomplete (it reproduces only the captured
	// run).
	FromTrace bool `json:"from_trace,omitempty"`
}

// FromTrace lists the values the program takes from the trace.
func (pg *Program) FromTrace() []string {
	var out []string
	for _, v := range pg.Values {
		if v.FromTrace {
			out = append(out, v.Name)
		}
	}
	return out
}

// ProgramTap says the value is the reference's tensor at a module's port.
type ProgramTap struct {
	Module string `json:"module"`
	Port   string `json:"port"`
	In     bool   `json:"in,omitempty"` // an input port: forced when the module's segment starts
}

// ProgramNode is one op. Its precision spec comes from the document's
// precision rules by Op and Role.
type ProgramNode struct {
	Op    string    `json:"op"`
	In    []string  `json:"in"`
	Out   []string  `json:"out"`
	Role  string    `json:"role,omitempty"`
	Attrs NodeAttrs `json:"attrs,omitzero"`
}

// ProgramSegment is the run of nodes [Start, End) that computes one call.
type ProgramSegment struct {
	Address string `json:"address"`
	Module  string `json:"module"`
	Start   int    `json:"start"`
	End     int    `json:"end"`
}

// NodeAttrs are an op's parameters; each op reads the fields it needs
// (exec/program's Op constants say which).
type NodeAttrs struct {
	Act       string          `json:"act,omitempty"`
	Norm      *NormAttrs      `json:"norm,omitempty"`
	PlusOne   bool            `json:"plus_one,omitempty"`
	Rope      *RopeAttrs      `json:"rope,omitempty"`
	Attention *AttentionAttrs `json:"attention,omitempty"`
	Timestep  *TimestepAttrs  `json:"timestep,omitempty"`
	RopeTable *RopeTableAttrs `json:"rope_table,omitempty"`
	Patch     *PatchAttrs     `json:"patch,omitempty"`
	Format    string          `json:"format,omitempty"`
	Shape     []int           `json:"shape,omitempty"`
	Perm      []int           `json:"perm,omitempty"`
	Axis      int             `json:"axis,omitempty"`
	Start     int             `json:"start,omitempty"`
	End       int             `json:"end,omitempty"`
	N         int             `json:"n,omitempty"`
	Route     *RouteAttrs     `json:"route,omitempty"`
	UpFirst   bool            `json:"up_first,omitempty"`
	Experts   *ExpertsAttrs   `json:"experts,omitempty"`
	Conv      *ConvAttrs      `json:"conv,omitempty"`
	// LinearAttention configures a linear_attention node.
	LinearAttention *LinearAttentionAttrs `json:"linear_attention,omitempty"`
	// Bucket configures a rel_bucket node.
	Bucket *BucketAttrs `json:"bucket,omitempty"`
	// Angular configures an angular_attention node.
	Angular *AngularAttrs `json:"angular,omitempty"`
	// Memory configures a memory_scan node.
	Memory *MemoryAttrs `json:"memory,omitempty"`
	// Sinkhorn configures a sinkhorn node.
	Sinkhorn *SinkhornAttrs `json:"sinkhorn,omitempty"`
	// Recurrence configures a recurrence node.
	Recurrence *RecurrenceAttrs `json:"recurrence,omitempty"`
}

// MemoryAttrs configure a memory_scan node (the gated matrix-memory scan,
// mLSTM's): the eps added to the normaliser max(|q·n|, exp(−m)).
type MemoryAttrs struct {
	Eps float64 `json:"eps"`
}

// RecurrenceAttrs configure a recurrence node (one direction of a
// recurrent layer): the cell (lstm, gru, tanh or relu) and whether it
// runs from the last position to the first.
type RecurrenceAttrs struct {
	Cell    string `json:"cell"`
	Reverse bool   `json:"reverse,omitempty"`
}

// SinkhornAttrs configure a sinkhorn node: steps alternating
// normalisations by the column sums (first, unless rows_first) and the
// row sums, each sum plus eps.
type SinkhornAttrs struct {
	Steps     int     `json:"steps"`
	Eps       float64 `json:"eps"`
	RowsFirst bool    `json:"rows_first,omitempty"`
}

// AngularAttrs configure an angular_attention node (YOSO's expected LSH
// attention): per head, Σ_j (1 − acos(q̂·k̂_j)/π)^power · v_j, L2-normalised.
type AngularAttrs struct {
	Heads int `json:"heads"`
	Power int `json:"power"`
}

// BucketAttrs configure a rel_bucket node: T5's relative position
// buckets of query and key positions (n = q − k; bidirectional: half the
// buckets for keys after the query), exact below half a side's buckets,
// log-spaced up to max_distance; or, signed_log, DeBERTa's: n itself up
// to half the buckets, then log-spaced with n's sign.
type BucketAttrs struct {
	NumBuckets    int  `json:"num_buckets"`
	MaxDistance   int  `json:"max_distance"`
	Bidirectional bool `json:"bidirectional,omitempty"`
	SignedLog     bool `json:"signed_log,omitempty"`
}

// ConvAttrs configure a conv2d node: pad zeros on each side of H and W;
// groups any count dividing the channels and the filters (1, or the
// channel count: depthwise); stride the step between output positions
// (absent or 1: every position); seq a conv1d of x [B, C, 1, L], the pad
// and stride along L alone; kernel and ceil are a max_pool2d node's: the
// window's side, and whether a last partial window is kept (ceil_mode);
// dilation the spacing of a convolution's taps (absent or 1: adjacent).
type ConvAttrs struct {
	Pad      int  `json:"pad,omitempty"`
	Groups   int  `json:"groups,omitempty"`
	Stride   int  `json:"stride,omitempty"`
	Seq      bool `json:"seq,omitempty"`
	Kernel   int  `json:"kernel,omitempty"`
	Ceil     bool `json:"ceil,omitempty"`
	Dilation int  `json:"dilation,omitempty"`
}

// LinearAttentionAttrs configure kernelised attention: per head,
// out_n = Σ_j v_j (φ(k_j)·φ(q_n)) / (Σ_j φ(k_j)·φ(q_n) + eps), φ the kernel
// (an activation name), keys and values summed first, in f32; a node
// given two more inputs (qn, kn) reads them in the numerator in place of
// φ(q) and φ(k), the normaliser unchanged.
type LinearAttentionAttrs struct {
	Heads  int     `json:"heads"`
	Kernel string  `json:"kernel"`
	Eps    float64 `json:"eps"`
}

// RouteAttrs configure a top-k router: the K largest of each row after
// the score function (softmax, sigmoid, or none), renormalised to sum to
// one when Normalize, times Scale (absent: 1).
type RouteAttrs struct {
	K         int     `json:"k"`
	Score     string  `json:"score,omitempty"`
	Normalize bool    `json:"normalize,omitempty"`
	Scale     float64 `json:"scale,omitempty"`
	TiesHigh  bool    `json:"ties_high,omitempty"` // of equal scores, the higher index first
	Chosen    bool    `json:"chosen,omitempty"`    // the score function over the K chosen logits only
	Dense     bool    `json:"dense,omitempty"`     // weights [.., E], zero where not chosen
	// Stepwise: picks one at a time, each weighted by the softmax over the
	// logits left within Margin of it, relatively (see exec/program).
	Stepwise bool    `json:"stepwise,omitempty"`
	Margin   float64 `json:"margin,omitempty"`
}

// ExpertsAttrs configure an experts node's gated unit: gate ≤ limit and
// |up| ≤ limit (absent: no clamp), gate·σ(beta·gate) for silu (absent:
// silu itself), and the unit f(gate)·(up + up_offset); ungated: no up,
// w1 [E, I, D] and the unit f(x·w1ᵀ + b1).
type ExpertsAttrs struct {
	Beta     float64 `json:"beta,omitempty"`
	Limit    float64 `json:"limit,omitempty"`
	UpOffset float64 `json:"up_offset,omitempty"`
	Ungated  bool    `json:"ungated,omitempty"`
	Squared  bool    `json:"squared,omitempty"` // ungated only: f(·)·f(·)
}

// NormAttrs configure a norm: y = x̂·(γ + offset) + β over groups.
type NormAttrs struct {
	Kind   string  `json:"kind"` // layer | rms
	Eps    float64 `json:"eps"`
	Offset float64 `json:"offset,omitempty"`
	Group  int     `json:"group,omitempty"`
}

// RopeAttrs configure a rotation of each head's first RotaryDim elements.
type RopeAttrs struct {
	Heads     int    `json:"heads"`
	Layout    string `json:"layout"` // interleaved | half
	RotaryDim int    `json:"rotary_dim,omitempty"`
}

// AttentionAttrs configure scaled dot-product attention.
type AttentionAttrs struct {
	Heads   int     `json:"heads"`
	KVHeads int     `json:"kv_heads,omitempty"`
	Mask    string  `json:"mask,omitempty"` // none | causal | explicit
	Scale   float64 `json:"scale,omitempty"`
	Window  int     `json:"window,omitempty"`
	// Block: block-local attention (exec.AttentionParams.Block).
	Block   int     `json:"block,omitempty"`
	Softcap float64 `json:"softcap,omitempty"`
	ALiBi   bool    `json:"alibi,omitempty"`
	// ALiBiScale multiplies the slopes (absent: 1): ALiBi added before the
	// scores are scaled.
	ALiBiScale float64 `json:"alibi_scale,omitempty"`
}

// TimestepAttrs configure a sinusoidal timestep embedding.
type TimestepAttrs struct {
	Dim          int     `json:"dim"`
	FlipSinToCos bool    `json:"flip_sin_to_cos,omitempty"`
	FreqShift    float64 `json:"freq_shift,omitempty"`
	Scale        float64 `json:"scale"`
	MaxPeriod    float64 `json:"max_period"`
	// FreqOverrides: frequencies the reference's exp did not round
	// correctly, read off its captured embeddings (index into the half
	// table, the f32 value it used).
	FreqOverrides []FreqOverride `json:"freq_overrides,omitempty"`
}

// FreqOverride is one entry of a timestep frequency table.
type FreqOverride struct {
	Index int     `json:"index"`
	Value float64 `json:"value"`
}

// RopeTableAttrs configure RoPE tables from position ids.
type RopeTableAttrs struct {
	Theta       float64 `json:"theta"`
	AxesDims    []int   `json:"axes_dims"`
	Layout      string  `json:"layout"`
	FreqFormat  string  `json:"freq_format"`
	AngleFormat string  `json:"angle_format"`
	// Rotated: the leading frequencies of each axis that turn (the rest
	// are 0); absent, every one turns
	Rotated []int `json:"rotated,omitempty"`
	// FreqAxes: the position column turning each frequency of the one
	// axis (multi-axis RoPE over one frequency ladder); absent, axis a
	// reads column a
	FreqAxes []int `json:"freq_axes,omitempty"`
	// Joined: the axes' frequencies joined, then laid out once (half:
	// [a… b… a… b…]); absent, each axis laid out by itself
	Joined bool `json:"joined,omitempty"`
}

// PatchAttrs configure (un)patchify.
type PatchAttrs struct {
	Patch  int `json:"patch"`
	Height int `json:"height,omitempty"`
	Width  int `json:"width,omitempty"`
}

// Float32s is constant data, written as base64 of little-endian f32 (a
// RoPE table of a real model is megabytes as JSON numbers).
type Float32s []float32

// MarshalJSON writes the base64 form.
func (f Float32s) MarshalJSON() ([]byte, error) {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}

// UnmarshalJSON reads the base64 form.
func (f *Float32s) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if len(b)%4 != 0 {
		return fmt.Errorf("data: %d bytes is not a whole number of f32 values", len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	*f = out
	return nil
}

var (
	valueKinds = []string{"weight", "input", "step_input", "const", "temp"}
	// stepSources are what a step input may be: the latents, σ_i, σ_{i+1}.
	stepSources = []string{"latents", "timestep", "next_timestep", "index"}
	// ProgramOps are the op names a program node may use (exec/program's
	// Op names).
	ProgramOps = []string{"linear", "norm", "modulate", "gated_residual", "rope", "attention",
		"act", "glu", "add", "mul", "sub", "div", "cast", "reshape", "permute", "slice", "concat", "repeat", "chunk",
		"timestep_embed", "rope_table", "gather", "patchify", "unpatchify", "round", "mean", "route", "experts", "softmax", "minimum", "maximum", "conv2d", "linear_attention", "where", "ssm_scan", "rel_bucket", "angular_attention", "delta_scan", "memory_scan", "fft2_real", "sinkhorn", "matmul", "segment_mask", "max_pool2d", "recurrence", "argmin", "qr"}
	valueName = regexp.MustCompile(`^[^\s]+$`)
)

// validate checks what the program says on its own: names, kinds, that
// every node reads values that exist and writes temps once, in order.
func (pg *Program) validate(p *problems) {
	const f = "program"
	kind := map[string]string{}
	for i, v := range pg.Values {
		fv := fmt.Sprintf("%s.values[%d]", f, i)
		if !valueName.MatchString(v.Name) {
			p.add(fv+".name", "%q is not a value name", v.Name)
		}
		if _, dup := kind[v.Name]; dup {
			p.add(fv+".name", "%q declared twice", v.Name)
		}
		kind[v.Name] = v.Kind
		if !slices.Contains(valueKinds, v.Kind) {
			p.add(fv+".kind", "%q is not one of %v", v.Kind, valueKinds)
		}
		n := 1
		for _, d := range v.Shape {
			if d < 0 {
				p.add(fv+".shape", "%v has a negative dimension", v.Shape)
			}
			n *= d
		}
		switch v.Kind {
		case "const":
			if len(v.Data) != n {
				p.add(fv+".data", "%d values for shape %v", len(v.Data), v.Shape)
			}
			if !contains(formats, v.Format) {
				p.add(fv+".format", "%q is not a format", v.Format)
			}
		case "weight", "input", "step_input":
			if v.Source == "" {
				p.add(fv+".source", "empty")
			}
			if _, lat := LatentsIndex(v.Source); v.Kind == "step_input" && !slices.Contains(stepSources, v.Source) && !lat {
				p.add(fv+".source", "%q is not a step input (%v)", v.Source, stepSources)
			}
		}
	}
	made := map[string]bool{}
	for name, k := range kind {
		made[name] = k != "temp"
	}
	for i, n := range pg.Nodes {
		fn := fmt.Sprintf("%s.nodes[%d]", f, i)
		if !slices.Contains(ProgramOps, n.Op) {
			p.add(fn+".op", "%q is not an op of the vocabulary", n.Op)
		}
		for _, in := range n.In {
			if in != "" && !made[in] {
				p.add(fn+".in", "%q is read before it is made (or never declared)", in)
			}
		}
		for _, out := range n.Out {
			if kind[out] != "temp" {
				p.add(fn+".out", "%q is not a declared temp", out)
			} else if made[out] {
				p.add(fn+".out", "%q is written twice", out)
			}
			made[out] = true
		}
	}
	if len(pg.Outputs) == 0 {
		p.add(f+".outputs", "empty")
	}
	for _, o := range pg.Outputs {
		if !made[o] {
			p.add(f+".outputs", "%q is never made", o)
		}
	}
	for i, s := range pg.Segments {
		if s.Start < 0 || s.End < s.Start || s.End > len(pg.Nodes) {
			p.add(fmt.Sprintf("%s.segments[%d]", f, i), "nodes [%d, %d) outside the program's %d", s.Start, s.End, len(pg.Nodes))
		}
	}
}

// ParamPaths lists the parameter paths a program reads, sorted.
func (pg *Program) ParamPaths() []string {
	var out []string
	for _, v := range pg.Values {
		if v.Kind == "weight" {
			out = append(out, v.Source)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
