package main

import (
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
)

// TestFusionReportPrint: the summary counts each kind of decision once,
// and every region gets its own line saying what ran and why.
func TestFusionReportPrint(t *testing.T) {
	f := &fusionReport{Mode: "auto", Regions: []exec.FusionDecision{
		{Region: "linear→act", UnfusedMs: 0.2, FusedMs: 0.1, Fused: true},
		{Region: "norm→modulate", UnfusedMs: 0.1, FusedMs: 0.3},
		{Region: "linear→glu", Declined: "operands of two formats"},
	}}
	var sb strings.Builder
	f.print(&sb)
	got := sb.String()
	for _, want := range []string{
		"fusion auto: 3 region kinds: 1 fused, 1 faster unfused, 1 not fusable",
		"fused        linear→act: fused 0.100 ms, unfused 0.200 ms",
		"unfused      norm→modulate: fused 0.300 ms, unfused 0.100 ms",
		"not fusable  linear→glu: operands of two formats",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	forced := &fusionReport{Mode: "on", Regions: []exec.FusionDecision{{Region: "linear→act", Fused: true}}}
	sb.Reset()
	forced.print(&sb)
	if !strings.Contains(sb.String(), "fused        linear→act (not measured)") {
		t.Errorf("forced fusion not reported as unmeasured:\n%s", sb.String())
	}
}
