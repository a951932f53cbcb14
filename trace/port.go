package trace

// FormatDoc is where the trace format is written down, named by every
// error about a missing manifest.
const FormatDoc = "docs/trace-format.md"

// noManifestHint ends the error about a missing manifest.
const noManifestHint = "a reference trace needs one: see " + FormatDoc

// OpenPort opens a port's trace: like Open, except that a file without a
// manifest (an .npz without __zflow__, a .safetensors without zflow
// metadata, as np.savez, safetensors.numpy or any language's safetensors
// writer make them) is accepted. Such a trace has no call tree: Bare
// reports true, its Manifest is empty, and its tensor names are its keys.
// So is a file whose manifest names no calls, inputs or outputs (only
// dtypes, say): its manifest is kept.
// A file that has a manifest is read and validated exactly as Open does.
func OpenPort(path string) (*Trace, error) { return open(path, true, Options{}) }

// OpenPortWith is OpenPort with the limits of o.
func OpenPortWith(path string, o Options) (*Trace, error) { return open(path, true, o) }

// Bare reports whether the trace was read without a manifest (OpenPort):
// its keys are its boundaries and it has no call tree.
func (t *Trace) Bare() bool { return t.bare }

// noCallTree reports whether a manifest names no calls, inputs or
// outputs (zflow_capture.save_trace writes one to name bf16 entries): a
// port trace with such a manifest is bare, its keys its boundaries.
func (m *Manifest) noCallTree() bool {
	return len(m.Calls) == 0 && len(m.Inputs) == 0 && len(m.Outputs) == 0
}

// HasManifest reports whether the file held a manifest (a bare trace may
// hold one that names no calls).
func (t *Trace) HasManifest() bool { return !t.bare || t.treeless }

// bareManifest stands in for the manifest of a trace that has none, so
// that readers of Manifest's maps need no nil checks.
func bareManifest() *Manifest {
	return &Manifest{Format: FormatName, Version: Version, Producer: map[string]any{},
		DTypes: map[string]string{}, Params: map[string]string{}, Inputs: map[string]string{}, Outputs: map[string]string{}}
}

// AdoptBF16 reads, in a bare trace, each uint16 entry whose key ref
// stores as bfloat16 as bfloat16 (an npz has no bf16 dtype, and a port
// without a manifest cannot say it), and returns those keys. A trace with
// a manifest is left alone: its dtypes say what it stores.
func (t *Trace) AdoptBF16(ref *Trace) []string {
	if !t.bare {
		return nil
	}
	var keys []string
	for _, k := range t.order {
		e := t.entries[k]
		if r, ok := ref.entries[k]; ok && e.DType == Uint16 && r.DType == BFloat16 {
			e.DType = BFloat16
			keys = append(keys, k)
		}
	}
	return keys
}
