//go:build !unix

package reports

// releasePages is advice the platform does not take.
func releasePages([]byte) {}
