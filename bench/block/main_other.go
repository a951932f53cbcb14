//go:build !linux

// Command block times one real-width DiT block on the CUDA backend; it
// runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "block: the CUDA backend runs on Linux only")
	os.Exit(2)
}
