// Package search finds the facts the weights cannot show by scoring
// candidates against a reference trace (DESIGN.md, Discovery).
//
// A Factor is one unknown with a finite list of candidate values. An
// Objective scores an Assignment (a value for every factor) at the
// boundary where a given factor is first observable, teacher-forced on the
// reference's own inputs to that boundary, so that one wrong factor cannot
// hide another. Lower scores are better: rel-RMS for semantic factors,
// 1 − (fraction bit-exact) for precision factors, with rel-RMS as the tie
// breaker.
//
// Factors are grouped in stages, run in order. Within a stage the factors
// may interact (modulation order × plus-one × shift present): when the
// product of their candidate counts is at most Options.MaxJoint the stage
// is searched exhaustively, otherwise by coordinate descent (change one
// factor at a time to its best value until no single change improves the
// stage's total error).
//
// Every candidate's score is kept. For each factor, a candidate's score is
// the best the stage reaches with the factor held at that value. The margin
// is runner-up error / winner error (+Inf when the winner is exact). A
// factor is decisive when its margin is at least Options.DecisiveMargin;
// otherwise the trace does not tell the candidates apart and the factor is
// reported as not mattering, never as found. When even the winner's error
// is above Options.Unexplained, no candidate reproduces the boundary and
// the factor goes to undetermined with that reason.
//
// Scores are memoised by (factor, assignment), so the number of objective
// evaluations is reported separately from the number of lookups.
package search
