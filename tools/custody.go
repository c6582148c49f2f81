package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Context-custody audit: context_custody_audit.
//
// Decisions taken where the CueCrux tool contract is silent:
//
//   - Every verdict is computed from the server's state when called: the
//     capability router, the signing key's class (receipts.KeyClassOf),
//     the flags, the sync remote, the caller's passport, the data
//     directory's permissions (when the server knows its directory) and
//     the tenant's change-log and receipt-chain heads. Each point cites
//     that evidence. Verdicts are strong, partial, weak or unknown;
//     unknown is given where crux cannot see the fact (the transport
//     carrying the call, a data directory it was not told of, where a
//     key handed to it is kept), never a guess.
//   - The scorecard is fixed-size (about 1,500 tokens). token_budget, when
//     smaller than the answer, drops the evidence texts and keeps the
//     verdicts (evidence_trimmed: true).
//   - lock_in_risk is 1 (minimal) to 5 (severe): 1 plus the exit test's
//     points weighed strong 0, partial or unknown 1, weak 2, scaled to 4.

type custodyArgs struct {
	TokenBudget int `json:"token_budget,omitempty" schema:"minimum=1" doc:"Below ~1500, evidence texts are dropped."`
}

// CustodyPoint is one point context_custody_audit scores, with its evidence.
type CustodyPoint struct {
	Axis     string `json:"axis"`
	Question string `json:"question"`
	Verdict  string `json:"verdict"`
	Evidence string `json:"evidence,omitempty"`
}

// Verdicts.
const (
	verdictStrong  = "strong"
	verdictPartial = "partial"
	verdictWeak    = "weak"
	verdictUnknown = "unknown"
)

// ContextCustodyOutput is what context_custody_audit returns.
type ContextCustodyOutput struct {
	Enabled         bool           `json:"enabled"`
	CruxVersion     string         `json:"crux_version"`
	CheckedAt       string         `json:"checked_at"`
	FourQuestions   []CustodyPoint `json:"four_questions"`
	ExitTest        []CustodyPoint `json:"exit_test"`
	LockInRisk      int            `json:"lock_in_risk"`
	LockInLabel     string         `json:"lock_in_label"`
	TrustPosture    TrustPosture   `json:"trust_posture"`
	Thesis          string         `json:"thesis"`
	Note            string         `json:"note"`
	EvidenceTrimmed bool           `json:"evidence_trimmed"`
}

// TrustPosture is what context_custody_audit recommends.
type TrustPosture struct {
	Recommendations []string `json:"recommendations"`
	StandingGap     string   `json:"standing_gap"`
}

// ContextCustodyOffOutput is what context_custody_audit returns while its
// flag is off: enabled false, and how to turn it on.
type ContextCustodyOffOutput struct {
	Enabled bool   `json:"enabled"`
	Note    string `json:"note"`
}

func (d *Deps) contextCustodyAudit() *toolkit.Tool {
	const name = "context_custody_audit"
	return &toolkit.Tool{
		Name:        name,
		Description: "Score this server's custody of your context (SEE, DO, REMEMBER, CHECK, exit test). Flag CRUX_CONTEXT_CUSTODY_AUDIT.",
		Annotations: toolkit.Annotations{Title: "Context custody audit", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[ContextCustodyOutput](),
		Alt:         toolkit.OutputOf[ContextCustodyOffOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *custodyArgs) (*toolkit.Result, error) {
			if !env.Flags.ContextCustodyAudit {
				return toolkit.JSONResult(ContextCustodyOffOutput{
					Note: "context_custody_audit is off: set " + feature.EnvContextCustodyAudit + "=1 to score this server"})
			}
			out, err := d.custodyScore(ctx, env, c)
			if err != nil {
				return nil, err
			}
			if in.TokenBudget > 0 && codec.MarshalledLen(out)/4 > in.TokenBudget {
				for _, ps := range [][]CustodyPoint{out.FourQuestions, out.ExitTest} {
					for i := range ps {
						ps[i].Evidence = ""
					}
				}
				out.EvidenceTrimmed = true
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// custodyFacts is what the score is computed from.
type custodyFacts struct {
	enforcing        bool
	tokenID, tier    string
	keyClass         string
	keyID, keyFile   string
	syncLogged       uint64
	chainHead        uint64
	passport         *store.Passport
	passportTier     string
	dataDir          string
	dataDirEvidence  string
	dataDirPrivate   *bool
	remoteConfigured bool
	remoteURL        string
}

func (d *Deps) custodyScore(ctx context.Context, env *toolkit.Env, c toolkit.Caller) (*ContextCustodyOutput, error) {
	var f custodyFacts
	f.enforcing = env.Router != nil
	if f.enforcing {
		info := env.Router.Info()
		f.tokenID, f.tier = info.TokenID, info.Tier
	}
	f.keyClass, f.keyID = receipts.KeyClassOf(env.Signer), env.Signer.KeyID()
	if s, ok := env.Signer.(*receipts.Ed25519Signer); ok {
		f.keyFile = s.KeyFile()
	}
	f.remoteConfigured = d.Remote != nil || env.Flags.SyncRemoteURL != ""
	f.remoteURL = redactURL(env.Flags.SyncRemoteURL)
	tenant := c.TenantID()
	err := env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		if f.syncLogged, err = store.SyncCount(tx, tenant); err != nil {
			return err
		}
		if f.chainHead, _, err = receipts.ChainHead(tx, tenant); err != nil {
			return err
		}
		if id := c.Identity(); id != "" {
			p, err := store.GetPassport(tx, tenant, id)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return err
			default:
				f.passport = p
				if f.passportTier, _, err = earnedTier(tx, tenant, id); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.dataDir = d.DataDir
	if f.dataDir != "" {
		f.dataDirEvidence, f.dataDirPrivate = dirPermissions(f.dataDir)
	}

	out := &ContextCustodyOutput{Enabled: true, CruxVersion: cruxVersion(), CheckedAt: env.Time().Format(time.RFC3339Nano),
		Thesis: "Your context is in your custody when you can see it, steer it, keep it, check it, and leave with it.",
		Note: "Each verdict is this server's state at checked_at, with the evidence it rests on; unknown means crux " +
			"cannot see it from inside the server."}
	out.FourQuestions = []CustodyPoint{custodySee(env, &f), custodyDo(env, &f), custodyRemember(&f), custodyCheck(env, &f)}
	out.ExitTest = []CustodyPoint{d.custodyExport(env, &f), custodyInspect(env), custodyRevoke(env, &f), custodyRoute(&f),
		custodyKeepLocal(&f), custodyProve(&f)}
	weight := 0
	for _, p := range out.ExitTest {
		switch p.Verdict {
		case verdictPartial, verdictUnknown:
			weight++
		case verdictWeak:
			weight += 2
		}
	}
	out.LockInRisk = 1 + (weight*4+len(out.ExitTest))/(2*len(out.ExitTest))
	out.LockInLabel = [...]string{"", "minimal", "low", "moderate", "high", "severe"}[out.LockInRisk]
	out.TrustPosture.Recommendations = custodyRecommendations(env, &f, out)
	for _, ps := range [][]CustodyPoint{out.FourQuestions, out.ExitTest} {
		for _, p := range ps {
			if p.Verdict == verdictWeak && out.TrustPosture.StandingGap == "" {
				out.TrustPosture.StandingGap = p.Axis + ": " + p.Evidence
			}
		}
	}
	return out, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func custodySee(env *toolkit.Env, f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "SEE", Question: "Can you see what the agent remembers?"}
	ev := fmt.Sprintf("query_facts and fact_history are always served; %d versions of shared facts are logged in your tenant; memory panel (%s) %s",
		f.syncLogged, feature.EnvMemoryPanel, onOff(env.Flags.MemoryPanel))
	p.Verdict = verdictStrong
	if !env.Flags.MemoryPanel {
		p.Verdict = verdictPartial
	}
	p.Evidence = ev
	return p
}

func custodyDo(env *toolkit.Env, f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "DO", Question: "Can you control what the agent does?"}
	pass := "no passport for the caller"
	if f.passport != nil {
		pass = fmt.Sprintf("the caller's passport %s is of tier %s", f.passport.PrincipalID, f.passportTier)
		if f.passport.Revoked() {
			pass += ", revoked"
		}
	}
	if f.enforcing {
		p.Verdict = verdictStrong
		p.Evidence = fmt.Sprintf("every call is checked against capability token %s (tier %s) before the tool runs; %s; agent passports %s",
			f.tokenID, f.tier, pass, onOff(env.Flags.AgentPassports))
		return p
	}
	p.Verdict = verdictWeak
	p.Evidence = fmt.Sprintf("no capability router: every call is allowed (fail-open); constraints are advisory; %s", pass)
	return p
}

func custodyRemember(f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "REMEMBER", Question: "Is the memory kept where only you control it?"}
	switch {
	case f.dataDir == "":
		p.Verdict = verdictUnknown
		p.Evidence = "the server was given its store, not a data directory: crux cannot see where or how the store is kept"
	case f.dataDirPrivate == nil:
		p.Verdict = verdictUnknown
		p.Evidence = f.dataDirEvidence
	case *f.dataDirPrivate:
		p.Verdict = verdictStrong
		p.Evidence = f.dataDirEvidence
	default:
		p.Verdict = verdictWeak
		p.Evidence = f.dataDirEvidence
	}
	return p
}

func custodyCheck(env *toolkit.Env, f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "CHECK", Question: "Can you check what happened?"}
	base := fmt.Sprintf("receipts are Ed25519-signed and chained (your tenant's chain: %d receipts) and verify offline with crux verify; receipt_verify (%s) %s; signing key %s is %s",
		f.chainHead, feature.EnvReceiptVerify, onOff(env.Flags.ReceiptVerify), f.keyID, keyClassText(f))
	switch f.keyClass {
	case receipts.KeyClassPersistent, receipts.KeyClassEnv:
		p.Verdict = verdictStrong
	case receipts.KeyClassEphemeral:
		p.Verdict = verdictWeak
	default:
		p.Verdict = verdictUnknown
	}
	p.Evidence = base
	return p
}

// keyClassText says where the signing key is kept.
func keyClassText(f *custodyFacts) string {
	switch f.keyClass {
	case receipts.KeyClassPersistent:
		if f.keyFile != "" {
			return "persistent (" + f.keyFile + ")"
		}
		return "persistent"
	case receipts.KeyClassEphemeral:
		return "ephemeral: held in memory only, so receipts cannot be verified once this process ends unless its public key was exported"
	case receipts.KeyClassEnv:
		return "read from the environment"
	}
	return "of a class crux was not told (the embedder's signer)"
}

func (d *Deps) custodyExport(env *toolkit.Env, f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "EXPORT", Question: "Can you take everything out in a verifiable form?"}
	dir, err := d.exportDir(env)
	switch {
	case !env.Flags.AuditExport:
		p.Verdict = verdictPartial
		p.Evidence = "audit_export_bundle is gated off (" + feature.EnvAuditExport + "); the store's own files remain yours"
	case err != nil:
		p.Verdict = verdictPartial
		p.Evidence = "audit_export_bundle is on but has no directory to write to (" + feature.EnvAuditExportDir + " unset, no data directory)"
	default:
		p.Verdict = verdictStrong
		p.Evidence = "audit_export_bundle writes signed, sealed tar.zst bundles to " + dir + "; crux verify bundle checks them offline"
	}
	return p
}

func custodyInspect(env *toolkit.Env) CustodyPoint {
	p := CustodyPoint{Axis: "INSPECT", Question: "Can you verify a receipt yourself?"}
	if env.Flags.ReceiptVerify {
		p.Verdict = verdictStrong
		p.Evidence = "receipt_verify is on, and crux verify receipt|chain|bundle works offline with the public keyring"
	} else {
		p.Verdict = verdictPartial
		p.Evidence = "receipt_verify is gated off (" + feature.EnvReceiptVerify + "); crux verify receipt|chain|bundle still works offline"
	}
	return p
}

func custodyRevoke(env *toolkit.Env, f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "REVOKE", Question: "Can you cut an agent off?"}
	if env.Flags.PassportRevocation {
		p.Verdict = verdictStrong
		p.Evidence = "revocation is enforced (" + feature.EnvPassportRevocation + "): a revoked passport may call only get_passport and get_agent_identity"
	} else {
		p.Verdict = verdictWeak
		p.Evidence = "revoke_passport records revocations but they are not enforced (" + feature.EnvPassportRevocation + " off)"
	}
	return p
}

func custodyRoute(f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "ROUTE", Question: "Does every call go through a gate you set?"}
	if f.enforcing {
		p.Verdict = verdictStrong
		p.Evidence = "capability token " + f.tokenID + " routes and refuses calls; refusals mint signed receipts"
	} else {
		p.Verdict = verdictWeak
		p.Evidence = "no capability router: calls are not routed through a token (fail-open)"
	}
	return p
}

func custodyKeepLocal(f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "KEEP-LOCAL", Question: "Does your context stay on machines you choose?"}
	if !f.remoteConfigured {
		p.Verdict = verdictStrong
		p.Evidence = "no sync remote is configured: nothing leaves this store through crux; which transport carries calls is not known to the server"
		return p
	}
	p.Verdict = verdictPartial
	where := "a sync remote"
	if f.remoteURL != "" {
		where = f.remoteURL
	}
	p.Evidence = "shared facts go to " + where + " when sync_push is confirmed; private facts and reserved entities never do"
	return p
}

func custodyProve(f *custodyFacts) CustodyPoint {
	p := CustodyPoint{Axis: "PROVE", Question: "Can you prove to a third party what the agent was told and did?"}
	switch f.keyClass {
	case receipts.KeyClassPersistent, receipts.KeyClassEnv:
		p.Verdict = verdictStrong
		p.Evidence = fmt.Sprintf("%d chained receipts signed by %s, a key that survives restarts; crux keys export gives the public keyring", f.chainHead, f.keyID)
	case receipts.KeyClassEphemeral:
		p.Verdict = verdictWeak
		p.Evidence = "the signing key is ephemeral: proofs last only as long as this process or an exported keyring"
	default:
		p.Verdict = verdictUnknown
		p.Evidence = "receipts are signed by " + f.keyID + ", a key crux was handed: whether it is kept is not known to crux"
	}
	return p
}

func custodyRecommendations(env *toolkit.Env, f *custodyFacts, out *ContextCustodyOutput) []string {
	recs := []string{}
	if !f.enforcing {
		recs = append(recs, "wire a capability router (Options.Router; the crux command always does) so calls are checked against a token")
	}
	if f.keyClass == receipts.KeyClassEphemeral {
		recs = append(recs, "sign receipts with a persistent key (receipts.LoadOrCreateKey) so they verify after a restart")
	}
	if !env.Flags.PassportRevocation {
		recs = append(recs, "set "+feature.EnvPassportRevocation+"=1 so revoked passports are refused")
	}
	if !env.Flags.AuditExport {
		recs = append(recs, "set "+feature.EnvAuditExport+"=1 so audit bundles can be exported")
	}
	if f.dataDirPrivate != nil && !*f.dataDirPrivate {
		recs = append(recs, "chmod 700 "+f.dataDir+" and 600 the files in it")
	}
	return recs
}

// dirPermissions describes the permissions of dir and of the store and key
// files in it, and whether none of them lets group or others in (nil when
// that cannot be told: the directory cannot be read, or on Windows).
func dirPermissions(dir string) (string, *bool) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "the data directory " + dir + " cannot be read: " + err.Error(), nil
	}
	if runtime.GOOS == "windows" {
		return "the data directory is " + dir + "; Unix permissions do not apply on Windows", nil
	}
	private := fi.Mode().Perm()&0o077 == 0
	ev := fmt.Sprintf("data directory %s is mode %#o", dir, fi.Mode().Perm())
	for _, name := range []string{"crux.db", receipts.KeyFileName, "crux.sock"} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		ev += fmt.Sprintf(", %s %#o", name, fi.Mode().Perm())
		if fi.Mode().Perm()&0o077 != 0 {
			private = false
		}
	}
	if private {
		ev += ": no access for group or others"
	} else {
		ev += ": group or others may read it"
	}
	return ev, &private
}

// cruxVersion is the module version of the running binary, or "(devel)".
func cruxVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
