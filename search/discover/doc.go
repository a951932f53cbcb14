// Package discover turns one reference trace into a semantics document
// (DESIGN.md, Discovery; issue 6): structure from the call tree, shapes
// and values (search/structure), then every factor of the catalogue the
// trace shows, each scored teacher-forced at the boundary where it is
// first observable and decided by search.Run with its margin:
//
//   - the sampler: euler_sign (sampler.EulerFactors) and the timestep
//     sinusoid's factors (sampler.TimestepFactors), flow_euler runs only;
//   - per block: factors.Block (attention, modulation, gate, MLP, q/k
//     norm factors);
//   - outside the blocks: factors.Model (final norm order and plus-one,
//     its modulation_act, embed_act of the timestep and pooled paths,
//     joint_order where the streams are joined before the blocks,
//     patch_layout);
//   - per norm role: factors.Norms (norm_kind, norm_eps, norm_offset; one
//     search per role; q/k norms take their kind from qk_norm);
//   - the RoPE tables: factors.Positions (rope_axes, rope_theta, and the
//     tables' formats, which go to precision.rope_table).
//
// # Merging
//
// A factor measured at several addresses (every block, every norm role,
// each block's view of joint_order) is written once per scope. For each
// factor name, the entries are grouped under the coarsest glob whose
// entries agree and whose addresses no other entry of the name shares:
// "*" when every entry agrees and they span more than one component,
// then "blocks.*.<role suffix>" from the shortest suffix, "blocks.*", and
// finally the literal address. Entries agree on a value v when every
// decisive one chose v and every other one scores v within the decisive
// margin of its own winner (the trace does not tell them apart there). A
// merged factor carries the smallest margin of its entries (each taken
// against v) and that entry's candidates and boundary, and its evidence
// note says so; it is decisive only when that smallest margin is.
//
// Facts the structure forces (no mlp_gate role: mlp_glu false; no q/k
// norm roles: qk_norm none; a norm without γ: norm_offset 0) are written
// as declared (metric "declared", margin 0) with the reason. A factor with
// a single candidate is written with margin 1, not decisive, and a note
// giving the error it reproduces its boundary with.
//
// # Partial documents
//
// A part of the structure outside what search/structure reads (no block
// holds an attention, a block whose attention it cannot reproduce, a
// stream without an embedder) is left out of the document and named in
// undetermined (a structure entry at its address); the document is then
// incomplete and every factor that could still be observed is written,
// with its margin. Blocks left undetermined are not searched for factors;
// a reading at an address the structure lacks is not written (placed).
//
// # Precision
//
// The document's precision is a placeholder a generator can run with
// (issue 7's search refines it): activations in the format the model's
// output is stored in; the timestep multiply kept in f32 when
// timestep_scale_rounded (found with the sinusoid's factors) says the
// reference does not round it; the sinusoid stored in its captured
// format; the RoPE tables' formats from the table search.
package discover
