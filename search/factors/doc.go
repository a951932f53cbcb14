// Package factors scores the factors of a discovered structure
// (search/structure) against the trace it came from, teacher-forced: each
// factor is scored at the boundary where it is first observable, on the
// reference's own tensors entering that boundary, so one wrong factor
// cannot hide another. Block and Model return search.Factor lists in
// stages and a search.Objective; search.Run decides them with margins.
//
// # One evaluator
//
// A candidate is scored by its program: the part of the model it acts in
// is built alone by the builder generate uses (program.BuildBlock from
// the block's recipe; BuildFinal, BuildConditioning, BuildEmbedder and
// BuildNorm for the parts outside the blocks) with the candidate's values
// bound, and run by plan.Fragment, teacher forced: every value the trace
// holds at one of the part's taps is the reference's tensor, so only the
// nodes between those captured boundaries and the compared value run. A
// linear layer's result is always in the trace, so no score runs one
// (plan.Fragment.Ran counts them: 0), whatever the number of candidates.
// Nothing here restates what a recipe computes.
//
// The nodes run in f32 on the CPU backend, each rounded once to f32 (the
// backend's arithmetic; its tensors hold float32), and the value is
// compared with the reference's rounded once to the reference's stored
// format, by rel-RMS: these are semantic factors, and the f32 result
// tells them apart as the float64 re-statements did (their margins moved
// by the difference, BENCHMARKS.md); the rounding plan is another search
// (search/plan).
//
// Sampled rows: a pointwise score reads every row up to 1024 tokens (per
// sample of a batch), and 1024 spread over the sequence beyond (a real
// width's 4608 rows); an attention score 32 query rows per weight set,
// with every key (the fragment runs the attention on those rows only, a
// causal one through an explicit mask of their positions); a norm 512
// rows. A sample tells candidates apart as well as every row does and
// keeps a candidate's cost independent of the sequence length.
//
// Placeholders: a part's fragment reads factors its search does not
// decide (the norms', searched later; the timestep's); none of them is in
// a score's cone, whose inputs are captured values.
//
// # Factors
//
// Per block (scope blocks.<i> unless noted), in stages:
//
//  1. rope_layout (scope positions), attention_causal, attention_scale
//     (0 = 1/√head_dim, 1/head_dim, 1) and, with two weight sets,
//     joint_order (scope model): each set's rows of the block's attention
//     (q and k after their captured per-head norms, v, the RoPE tables the
//     block reads, laid out for the layout and joined in joint order)
//     against each out projection's argument (a parallel block's: the
//     better of its first and last q-width columns);
//  2. modulation_order × modulation_plus_one: each set's modulated norms
//     against q's argument (group 0) and mlp_in's (group 1);
//     modulation_act: act(cond) against each modulation linear's argument;
//  3. gate_fn (and, for one weight set over streams the block receives
//     apart, joint_order): the gated residual after the attention against
//     norm2's argument, or a parallel block's result;
//  4. mlp_act × mlp_glu (× parallel_order): the MLP's activation against
//     the MLP's output projection's argument (a parallel block's out: the
//     columns the fragment's join puts the MLP in);
//  5. qk_norm: the per-head norms (ε 1e-6, no offset) against their
//     results.
//
// A block whose recipe the builder cannot make from the structure (a
// modulation of another chunk count, an out projection wider than the
// recipe's) has no factor scored: Block says why.
//
// Model, each in its own stage: final_norm_order × modulation_plus_one
// (scope final) at the head's argument; the final stage's modulation_act
// at its modulation linear's argument; embed_act (scope conditioning) at
// time_out's argument and PooledAct, the pooled path's, at pooled_out's;
// joint_order where the streams are joined before the first block, at its
// joined argument; patch_layout (scope embed.image) at the image
// embedder's argument, from the model's latents.
//
// Norms: per norm role (embedders, blocks, final) norm_kind, norm_eps and,
// with a γ, norm_offset, jointly, at the norm's result from its argument
// and parameters (up to 512 rows); a q/k norm is marked PerHead (its kind
// is qk_norm's).
//
// Positions: rope_axes, rope_theta and the tables' formats
// (RopeFreqFormat, RopeAngleFormat: precision factors), at the RoPE tables
// the first block reads, computed by exec.RopeTables (the op the
// program's rope_table node runs) from the producer's captured ids (or
// the structure's position sources in joint order) at up to 512 rows.
package factors
