package trace

// Release hands the whole pages of a view's data back to the kernel: they
// leave the resident set (the page cache keeps them; a later read faults
// them back, unchanged). A reader that visits a large trace once, tensor by
// tensor, calls it when it is done with one so that its RSS stays the size
// of what it holds, not of the trace. A decoded copy (not a view) is
// ordinary memory and is left alone. Advice only: nothing fails.
func (t *Tensor) Release() {
	if t != nil && t.view {
		releaseMapped(t.data)
	}
}
