// Package plan finds a reference's rounding plan — where it stores to the
// activations' format and which arithmetic variants it uses — and measures
// how bit-exact a plan makes a program (DESIGN.md, Discovery step 4
// "Precision", and "Reports").
//
// # Units, classes, candidates
//
// A plan (semantics.Precision) gives every unit of a program its exec.Spec:
// each node that takes a precision (by op and role: "norm"
// "blocks.0.image.q_norm") and the sampler's operations (the timestep cast,
// the Euler update). Units are grouped in op classes: the node's op
// (norm, modulate, gated_residual, act, glu, linear, attention, rope,
// rope_table, timestep_embed, add, mul), or euler_step and timestep_cast
// for the sampler. Each class has a short list of candidate precisions,
// each one arithmetic a reference is known to use (classCandidates lists
// them with their sources: rounding after every primitive or once, norm
// statistics in f32, in the storage format or in CUDA's Welford order,
// fast or precise exp, a GEMM's bias before or after rounding, flash or
// math attention, a residual stream in f32 or not). A candidate that only
// fits some units (layer-norm kernels' statistics) is offered only to
// factors whose units it fits.
//
// # Score
//
// An Evaluator runs the program teacher forced at every boundary: each
// value the trace holds (a module's output, or the input a linear or norm
// module was called with) is compared with the reference's tensor and
// then replaced by it, so every boundary is computed from the reference's
// own values at the boundaries before it, and a plan's choice for one class
// is scored only where it acts. A boundary's cone is the set of units its
// value depends on back to those replaced values. A factor's score is
// pooled over the boundaries whose cone holds one of its units:
//
//	Err      = 1 − (values bit-exact) / (values)   in the reference's stored format
//	TieBreak = sqrt(Σ(ours − ref)² / Σref²)          (rel-RMS)
//
// "Bit-exact" is precision.BitExact in the reference's format (±0 equal,
// NaN never), as zflow diff measures it.
//
// # What a candidate costs
//
// The Evaluator walks the program as the interpreter does but runs a node
// only when a comparison that is not known yet needs its value (forward.go).
// Every value has a version — how it was computed: a node's spec and its
// inputs' versions, or which reference tensor forcing put there — and a
// comparison is kept by boundary and version. Teacher forced, a rule on one
// class changes only that class's nodes, each from the reference's own
// inputs, so a candidate runs those nodes (and the unforced ones after
// them) once, and nothing else; a boundary none of them reaches is not even
// read. The tensors a re-run node reads (the reference's, uploaded, and the
// results of unforced nodes) stay on the backend from one run to the next
// within a budget (Options.CacheBytes); only what a comparison needs is
// downloaded, and the trace's mapped pages are handed back once read.
//
// The candidates are scored on sampled rows where that decides alike
// (sample.go): a linear computes each row of its result from one row, an
// attention each query row on its own, so where the backend's rows do not
// depend on how many it is given (exec.RowIndependent) and the boundary is
// forced as it is made, their candidates run on DefaultSampleRows rows in
// spread blocks (the first rows of a causal attention). The plan found is
// then measured on every row (precision.exact), and precision.scoring says
// which boundaries the candidates were scored whole and which on how many
// rows.
//
// A candidate's run stops once its plan cannot win: the search gives the
// total error of the best plan so far (search.BoundedObjective), each
// record adds its inexact values times their weight in the total, a
// comparison on sampled rows adds block by block, and an exact fraction
// only falls with the values seen. Its score is then a bound (a
// candidate's at_least); a bound that leaves a margin's reading open (not
// above the winner's error, or a runner-up's not decisive by itself) is
// scored whole before the margin is read, so stopping changes no decision,
// only makes some margins lower bounds (margin_at_least).
//
// A costly candidate (a tensor core's sums, which the CPU forms at about
// 2 ns a product, many times its class's other arithmetic) is not run at
// all where every value its factor's ops can change is bit-exact under the
// plan in hand, rel-RMS 0: another rounding of those ops could only make
// some worse (Prune, search.Pruner). Its evidence lists it unscored, with
// that reason (a candidate's pruned) and the winner's score as its bound,
// outside margins and equivalences; Exhaustive runs it.
//
// # Fragments: a search of factors
//
// A Fragment is the same teacher forcing for a part of a program built
// alone (program.BuildBlock and the other Build… of parts): it makes one
// value from the values the trace holds before it, running only the nodes
// between them (a linear's result is the trace's, so none runs; Ran
// counts), each in one Spec (a semantic search's own arithmetic, not a
// plan), and at the rows of the value a search compares: a pointwise or
// row-wise node reads those rows of its inputs, a slice or join of rows
// maps them, an attention reads those query rows and every key (a causal
// one through an explicit mask of their positions), any other op runs
// whole and is cut. Nodes that candidates share are kept by version.
// search/factors scores every factor candidate with it.
//
// # Search
//
// Discover runs search.Run twice. First one factor per op class (every
// class at once, by coordinate descent from the document's plan); a class
// no boundary depends on is not searched and keeps the document's rules.
// Then, for each class whose plan leaves some role group's boundaries
// inexact ("blocks.*.q_norm" apart from "blocks.*.norm1", RoleGroup), one
// factor per such group, starting from the class's winner; a per-role rule
// is kept only when the group's error under the class's plan is at least
// search's DecisiveMargin times its error under the role's winner (the
// trace shows a difference). Each class's margin is the error of the best
// candidate that scores differently over the winner's (+Inf when the
// winner is exact); candidates that score exactly as the winner are
// reported as equivalent on this trace, and the simplest (first) one is
// kept.
//
// The plan found has the role rules first, then the class rules, then the
// document's rules for classes not searched; a rule that changes no unit's
// spec is dropped. Every searched rule carries its evidence
// (semantics.RuleEvidence), and precision.exact holds each boundary's
// exact fraction pooled over the steps.
//
// # What cannot be bit-exact, and why
//
// A plan fixes where values are rounded; it cannot change the order in
// which a library sums. Boundaries after a GEMM or attention (cuBLAS,
// flash attention and MKL sum in other orders than k order, with FMAs)
// are exact only where the different f32 sums round to the same stored
// value; tables of transcendental functions (timestep sinusoids, RoPE
// cos/sin in f32) differ where the reference's sin, cos or exp are not
// correctly rounded (Sleef, CUDA's libdevice: ≤ 1–2 ulp). Record.Elementwise
// tells the boundaries that depend on neither.
package plan
