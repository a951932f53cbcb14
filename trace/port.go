package trace

// FormatDoc is where the trace format is written down, named by every
// error about a missing manifest.
const FormatDoc = "docs/trace-format.md"

// noManifestHint ends the error about a missing manifest.
const noManifestHint = "a reference trace needs one: see " + FormatDoc
