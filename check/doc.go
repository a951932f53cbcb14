// Package check runs a semantics document's program against the trace it
// describes and compares every captured boundary (DESIGN.md, Discovery
// step 6 "Self-check"): the engine of `zflow verify` and of `zflow
// discover`'s self-check.
//
// Run is the engine: the program built from the document with the trace's
// weights and request, run teacher forced (each boundary the trace holds
// is compared with the reference's tensor, then replaced by it, so every
// boundary is computed from the reference's own values at the boundaries
// before it and an error shows where it arises) or free running, over the
// steps of a flow_euler run; every compared boundary is a record
// (search/plan.Record) with both sides' values.
//
// Self is the self-check: Run teacher forced, every boundary gated at its
// format's tolerance (Tolerance) on the rel-RMS of its ordinary values,
// mask-sized ones (precision's doc) compared apart and exactly, each one beyond it diagnosed with the
// signature `zflow diff` reads (reports.DiagnoseRows) and reported once,
// at the first step it fails, in execution order. Apply writes the result
// into the document: its status, its check, and an undetermined entry per
// boundary not reproduced.
//
// A document with holes (semantics.Hole: a block whose dataflow discovery
// could not read) is checked around them where the builder can:
// exec/program.BuildPartial passes an undetermined block's captured
// inputs to its captured outputs, which teacher forcing then replaces by
// the reference's; the block's own boundaries are skipped, not compared.
// A hole the partial program cannot pass (a missing embedder or final
// stage) stops the check: the result says why it did not run.
package check
