package tools

import (
	"fmt"
)

// Hooks for the tests of package tools_test, which see the tools through
// crux.Server as an embedder does. Each wraps a function those tests check
// results against but that is no API of its own, so that when such a name
// changes (or stops being exported) only this file follows it.

// ExportHandoffCanonical is handoffCanonical: the canonical content of a
// handoff package given as JSON.
var ExportHandoffCanonical = handoffCanonical

// ExportPlanHash is planHash of the session plan that a cuecrux_session
// result carries as its structured content; a non-empty intent replaces the
// plan's own first.
func ExportPlanHash(structured any, intent string) ([32]byte, error) {
	p, ok := structured.(sessionPlan)
	if !ok {
		return [32]byte{}, fmt.Errorf("structured content is %T, not a session plan", structured)
	}
	if intent != "" {
		p.Intent = intent
	}
	return planHash(p)
}

// ExportCheckEgress is checkEgress, the policy egress_policy_check applies.
var ExportCheckEgress = checkEgress

// ExportLaneDepth is laneDepth: how many results each lane of query ranks
// before fusion.
const ExportLaneDepth = laneDepth
