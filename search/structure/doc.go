// Package structure reads a model's structure (semantics.Structure) off
// one reference trace: DESIGN.md, Discovery, step 1.
//
// Nothing here decides what something is by a module path, a class name,
// a parameter name or a keyword name: those are copied into the structure
// as addresses only. Structure comes from the call tree (parents, entry
// order), tensor and parameter shapes; meaning comes from captured values.
// The test suite proves it on copies of the traces whose every name is
// replaced by an opaque one (renamed_test.go).
//
// # How each part is found
//
//   - Run: a flow-matching loop found by sampler.FindLoop (flow_euler), else
//     the root call of the first step holding the most parameters (forward).
//   - Linears: calls with one 2-D parameter [out, in] (and a 1-D bias of
//     out), reading a width-in argument and returning width-out rows.
//   - Values tie ports together: two ports hold the same tensor when their
//     bytes hash equal; a reshaped or transposed copy when their sorted
//     elements do; a cast copy when they agree after rounding the wider to
//     the narrower format.
//   - Blocks: the children of one call (the model's or a descendant's) that
//     each hold an attention, three or more linears reading the same rows;
//     the call with the most such children wins. Blocks with one
//     parameter-shape signature (depth and shapes of their sub-tree, no
//     names) must read as one kind.
//   - Embedders and streams: the linear reading the latents unchanged (or
//     rearranged: the same values in another order) makes the image rows;
//     when the latents are [B, C, H, W] and that linear reads C·p·p
//     features, its patch is p (the layout is the factor patch_layout); a linear reading another request input's rows (after
//     an optional norm whose argument is that input) makes the text rows; a
//     table read by integer ids makes a language model's text rows. The
//     hidden width is what they return; a stream's tokens are its rows.
//   - Conditioning: the hidden-width vector the first block reads such that
//     every modulation linear's argument is act(vector) for one activation
//     (tried: exec's activations); time_out makes it (or time_out +
//     pooled_out sum to it); each one's feeder linear through an activation;
//     the sinusoid is the parameter-free call whose result feeds time_in and
//     whose halves (or pairs) satisfy a² + b² = 1; the pooled path is the
//     one whose first linear reads a request input.
//   - Positions: the blocks' other arguments are RoPE tables (real pairs
//     with cos² + sin² = 1, cos the one of larger mean; or complex); their
//     producer's integer-valued argument is the ids. A request input found
//     inside the ids is a stream's source; otherwise a stream's slice of the
//     ids is a row-major grid or a sequence, in the order of the streams
//     that makes both read so. Without ids, the ids are read back from the
//     tables' angles (frequencies from angle steps, axes where frequencies
//     jump back up, each axis's ids from its slowest pair).
//   - q, k, v: per weight set, q and k are the projections whose results
//     per-head norms read (when two do); otherwise every assignment with k
//     and v of one width dividing q's is tried. Each assignment, head width
//     (the norm's width, else divisors of the widths that hold the tables'
//     rotary width), RoPE layout, joint order and causality is a
//     teacher-forced attention on the captured projections (after their
//     captured norms), at a sample of rows and heads, compared with every
//     captured tensor of the block of the output's shape; the best wins,
//     and the runner-up with other roles gives the margin.
//   - out: the linear whose argument (or its first or last q-width
//     columns: a parallel block's fused projection) is that attention.
//   - MLP: a linear whose argument is act(another's result) (or
//     act(gate)·in of two projections of one argument: gated); in a
//     parallel block, the weight set's other projections, act()-ed, fill
//     the out linear's other columns.
//   - Norms: leaf calls that keep the shape, with 1-D parameters or with
//     normalised rows (mean 0 and variance 1, or mean square 1); the one
//     whose result becomes the attention's (or MLP's) argument unchanged or
//     through a per-channel affine map (the modulation) is the recipe's norm
//     feeding q (mlp_in).
//     Two 1-D parameters are γ and β by the fitted slope and intercept.
//   - Modulation: linears reading act(cond) with k × hidden results; with
//     two weight sets, each is matched to the set whose post-norm shift is
//     one of its chunks (correlation).
//   - Kind: the recipe (semantics.Recipes) left when the recipes are
//     narrowed by what the block shows, fact by fact: weight sets per
//     stream (two) or joined (one); a modulation role or none; an out
//     linear reading a concat (one weight set whose MLP projections read
//     the attention's rows and whose out linear is wider than q) or not.
//     The recipe names the roles: its role prefix, the norms it feeds into
//     q and mlp_in, its modulation's chunk count.
//   - Final: after the last block, the head is the linear whose result is
//     the model's; the norm's result is the head's argument (through a
//     per-channel map) or the model's result; a modulation linear of
//     2 × hidden makes it adaptive, and the call holding both is the
//     boundary.
//
// Whatever cannot be decided is returned as semantics.Undetermined with
// the reason; Discover fails only when there is no model call, no embedder
// or no block.
package structure
