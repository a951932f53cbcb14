// Package semantics is the semantics document, schema version 1
// (DESIGN.md, "Semantics document"; every field is described in SCHEMA.md).
//
// A document says what one reference model does, in a vocabulary that
// names no model: its structure (streams, blocks by kind, the role of every
// parameter by path), the factors the weights cannot show (gate function,
// RoPE layout, modulation chunk order, ...) each with its evidence, the
// rounding plan, and what the trace could not decide. Discovery writes it;
// `zflow generate` and any other generator read it.
//
// Block kinds are recipes (recipe.go, recipes/<kind>.json): a block's
// dataflow as data, in the op vocabulary over named values, parameters bound
// by role and attributes bound to factors. The builder (exec/program), the
// structure reader (search/structure) and validation read the same file;
// SCHEMA.md, "Recipe format", describes it.
//
// Read validates everything a document can be checked for on its own:
// version, required fields, every role a block kind needs, factor names and
// values against the catalogue (catalogue.go), factor scopes against the
// structure's addresses (address.go). Checks that need the weights (shapes)
// belong to whoever loads them.
package semantics
