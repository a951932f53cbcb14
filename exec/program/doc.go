// Package program is zflow's program IR, its generic builder and its
// interpreter.
//
// A Program is a list of nodes in execution order, each one call on
// exec.Backend (or one host step, such as gathering rows of an embedding
// table), over named values: weights by parameter path, request inputs by
// role, per-step inputs (latents, timestep), constants the builder makes
// (position ids) and intermediates. Build makes one from a semantics
// document and the shapes of the weights and inputs, knowing no model: a
// version 1 block is its kind's recipe (semantics.Recipe, run by
// build_recipe.go), its roles and the document's factors; a version 2
// document carries its program.
// Latents given as an image [B, C, H, W] (patch_layout c_ph_pw) are cut
// into the embedder's patches by a Patchify node before the image embedder
// and put back by Unpatchify after the head.
//
// Values carry taps: the reference's trace boundaries (module path and
// port) they correspond to — a role's output, the value a linear or norm
// role's module was called with (its arg0: a modulated norm, an attention
// output, a residual), a segment's inputs and outputs. The interpreter
// reports every tapped value as it is made (so a run can be written as a
// trace named like the reference's) and, on request, replaces the value at
// a module's input port with the reference's own tensor when that module's
// segment starts (teacher forcing), or, with Hooks.OverrideOutputs, every
// tapped value once observed (teacher forcing at every boundary, which
// search/plan scores with). Hooks.Run may take over node execution (a
// memo). The interpreter frees every intermediate after its last use.
// Relayout reads a reference tensor held heads first ([B, H, S, D]) in the
// program's [B, S, H·D] order.
//
// A few nodes are compositions of backend ops rather than one call
// (experts, conv2d, linear_attention): they run on every backend, and
// round where their parts do.
// ssm_scan, a selective state-space scan, delta_scan, a gated delta-rule
// scan, memory_scan, a gated matrix-memory scan, fft2_real, a 2-D
// Fourier transform's real part, sinkhorn, a doubly stochastic
// normalisation, matmul, a batched product, and recurrence, one direction
// of a recurrent layer, are one backend call each (exec.Extended's
// SSMScan, DeltaScan, MemoryScan, FFT2Real, Sinkhorn, MatMul and
// Recurrence) with no composition: the
// CPU backend runs them, a backend without its own kernel refuses them
// (exec.ErrUnsupported).
//
// When the backend implements exec.Fuser, the interpreter offers it each
// region of nodes a linear or a norm heads (fuse.go): it may run them as
// one fused call, with the same bits as running them one by one. A concat
// of linears' or norms' results that nothing else reads (and the rope
// that alone reads the join) is offered as a join region at the concat,
// those nodes run there rather than where they stand.
//
// Runner drives a program: one forward, or a flow-matching Euler loop over
// the sigmas with the document's sign and timestep transform (Forward and
// Update run one model call and one update for callers that steer the
// loop); SetPrecision rebuilds it under another precision plan.
package program
