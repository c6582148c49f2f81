package tools

import (
	"github.com/crux-go/crux/c2pa"
	"github.com/crux-go/crux/toolkit"
)

// Deps are what some tool groups need beyond what every handler gets from
// the pipeline: directories and services of the server that runs them.
// [All] hands them to the tools that use them, which close over their own
// copy; the zero Deps (or nil) gives a server without any of them.
type Deps struct {
	// EngramDir is the directory of engram files engram_resolve reads
	// (see engrams.go); "" for none.
	EngramDir string
	// AttestCA issues the certificate that signs output_attest's
	// manifests (see attest.go). Nil means a CA made in memory on first
	// use, for the lifetime of the tools All returned.
	AttestCA *c2pa.CA
	// AttestRoot is the directory output_attest's content_path is
	// confined to; "" refuses content_path.
	AttestRoot string
	// DataDir is the server's data directory, "" when it has none (see
	// audit_bundle.go and custody.go).
	DataDir string
	// Remote is the sync remote, nil when sync is not configured (see
	// sync.go).
	Remote Remote
	// Checkout is the source checkout update_status reads, "" for none.
	Checkout string

	// memCA is the CA made in memory when AttestCA is nil.
	memCA *memoryCA
	// segments caches the document segments the retrieval tools read.
	segments *segmentCache
}

// All returns every tool crux implements, in catalogue order: the order
// tools/list shows them in, cuecrux_session first. It is the one list of
// tools; a test checks that it follows the tier table's order. The tools
// that need them close over a copy of deps (nil for none) and share a
// CA made in memory and a cache of document segments of their own.
func All(deps *Deps) []*toolkit.Tool {
	d := new(Deps)
	if deps != nil {
		*d = *deps
	}
	d.memCA, d.segments = new(memoryCA), newSegmentCache()
	return []*toolkit.Tool{
		cuecruxSession(), autonomyContract(), // handshake.go
		d.reuseCheck(),                          // reuse.go
		d.engramResolve(),                       // engrams.go
		d.query(), d.queryScan(), queryExpand(), // query.go
		storeFact(), queryFacts(), deleteFact(), listEntities(), getBootstrap(), factHistory(), // facts.go, bootstrap.go
		memoryAcknowledgeUse(),               // memory_use.go
		d.outputAttest(),                     // attest.go
		memoryForget(), memoryForgetDryRun(), // forget.go
		memoryView(), memoryEdit(), memoryPin(), memoryHistory(), // memory.go
		memoryFreshness(), memorySweepCandidates(), // freshness.go
		memoryContradictions(), memoryConsolidate(), // consolidation.go
		memorySetHorizon(), memoryReverify(), // freshness.go
		artefactPut(), artefactGet(), artefactList(), // artefacts.go
		getSession(), saveSession(), sessionCheckpoint(), listSessions(), deleteSession(), archiveSession(), unarchiveSession(), // sessions.go
		routeAccessMatrix(), execplanGate(), d.authPostureAudit(), egressPolicyCheck(), // posture.go, egress.go
		getGaps(),                                                 // gaps.go
		listObservations(), getObservation(), verifyObservation(), // observations.go
		receiptVerify(),                        // receipt_verify.go
		getAgentIdentity(), resolvePrincipal(), // identity.go
		createHandoff(), acceptHandoff(), // handoff.go
		recordDecision(),                                                                                             // decisions.go
		declareConstraint(), getConstraints(), checkConstraints(), auditConfig(), checkConfigAudit(), enrichAction(), // constraints.go
		d.auditExportBundle(),                                                   // audit_bundle.go
		issuePassport(), requestPassportMint(), getPassport(), revokePassport(), // passport.go
		passportSplit(), passportMerge(), passportLinkDevice(), // identity.go
		d.syncPull(), d.syncPush(), d.syncStatus(), // sync.go
		d.updateStatusTool(),    // update_status.go
		d.contextCustodyAudit(), // custody.go
	}
}
