// Package factors scores the factors of a discovered structure
// (search/structure) against the trace it came from, teacher-forced: each
// factor is scored at the boundary where it is first observable, on the
// reference's own tensors entering that boundary, so one wrong factor
// cannot hide another. Block and Model return search.Factor lists in
// stages and a search.Objective; search.Run decides them with margins.
//
// Per block (scope blocks.<i> unless noted), in stages:
//
//  1. rope_layout (scope positions), attention_causal, attention_scale
//     (0 = 1/√head_dim, 1/head_dim, 1) and, with two weight sets,
//     joint_order (scope model): a float64 attention of the
//     captured q and k (after their captured per-head norms) and v, with
//     RoPE from the tables the block reads (real pairs or complex), the
//     sets joined in joint order, at up to 32 rows per set and 4 heads,
//     against each out projection's argument (a parallel block's: the
//     better of its first and last q-width columns);
//  2. modulation_order × modulation_plus_one: each set's norm result
//     modulated by its modulation's chunks, against q's argument (group 0)
//     and mlp_in's (group 1); modulation_act: act(cond) against each
//     modulation linear's argument;
//  3. gate_fn (and, for one weight set over streams the block receives
//     apart, joint_order): x + g(gate)·out against norm2's argument, or a
//     parallel block's result;
//  4. mlp_act × mlp_glu (× parallel_order): act(mlp_in), or
//     act(mlp_gate)·mlp_in, against the MLP's output projection's argument
//     (a parallel block's out: its MLP columns);
//  5. qk_norm: RMS or layer normalisation (eps 1e-6) times the weight,
//     against the per-head norms' results.
//
// The pointwise scores (stages 2 to 4, the final norm) read every row up
// to 1024 rows, and 1024 rows spread over the sequence beyond (a real
// width's 4608 rows): a sample tells pointwise candidates apart as well as
// every row does, and keeps the cost of a candidate independent of the
// sequence length. Nothing here runs a linear layer: every projection's
// result is read from the trace, so the number of full-size GEMMs a
// search makes is zero whatever the number of candidates.
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
// the first block reads, computed by exec.RopeTables from the producer's
// captured ids (or the structure's position sources in joint order) at up
// to 512 rows.
//
// Every computation is float64 rounded once to the captured format: these
// are semantic factors, scored by rel-RMS; precision is another search.
package factors
