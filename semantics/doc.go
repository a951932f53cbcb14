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
// Read validates everything a document can be checked for on its own:
// version, required fields, every role a block kind needs, factor names and
// values against the catalogue (catalogue.go), factor scopes against the
// structure's addresses (address.go). Checks that need the weights (shapes)
// belong to whoever loads them.
package semantics
