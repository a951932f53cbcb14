// Package readoff reads the catalogue's factors off a discovered program:
// what a node's attributes say (a sinusoid's layout, a gate's function,
// an attention's mask) and what the values between nodes say (which chunk
// of which projection a shift, scale or gate is; which activation an MLP's
// down projection reads).
//
// The program search records most factors where it fits them, with every
// candidate's score. Forms it added later (per-token modulation, a
// sinusoid of a rescaled timestep, a convolutional MLP, …) make the same
// facts without recording them; this package reads them from the program
// itself, so a document names every catalogue fact its program shows. A
// factor read here is declared: the program that shows it reproduces the
// trace, but no alternative was scored, so it is never decisive.
package readoff
