// Package program is zflow's program IR, its generic builder and its
// interpreter.
//
// A Program is a list of nodes in execution order, each one call on
// exec.Backend (or one host step, such as gathering rows of an embedding
// table), over named values: weights by parameter path, request inputs by
// role, per-step inputs (latents, timestep), constants the builder makes
// (position ids) and intermediates. Build makes one from a semantics
// document and the shapes of the weights and inputs, knowing no model: the
// block kinds, roles and factors of the document are the whole recipe.
//
// Values carry taps: the reference's trace boundaries (module path and
// port) they correspond to. The interpreter reports every tapped value as
// it is made (so a run can be written as a trace named like the
// reference's) and, on request, replaces the value at a module's input
// port with the reference's own tensor when that module's segment starts
// (teacher forcing). It frees every intermediate after its last use.
//
// Runner drives a program: one forward, or a flow-matching Euler loop over
// the sigmas with the document's sign and timestep transform.
package program
