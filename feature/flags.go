// Package feature holds crux's feature flags and settings: the typed
// [Flags] value a server runs with, its [Defaults], and [FromEnv], which
// reads them from the environment and reports values and names that look
// like mistakes. It imports nothing else of crux; package crux re-exports
// [Flags] as crux.Flags.
package feature

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Flags are the feature switches and settings of a crux server: one field for
// every environment variable of the CueCrux tool contract, plus the
// tool-surface mode and the decay thresholds.
//
// [Defaults] returns the defaults, and [FromEnv] reads the environment.
// Flags is a plain comparable value. Nothing in crux reads the environment
// by itself: the embedder calls FromEnv (normally once, at start-up) or
// fills the struct in code, and a server reads its Flags once, when it is
// created, so a running server cannot change behaviour halfway through a
// request. To change a flag, build new Flags.
//
// # The flags
//
// Each variable keeps the parsing rule ("dialect") it has in the CueCrux
// tool contract, so FLAG=yes switches some features on and others off;
// [FromEnv] warns when a value is read in a way its spelling does not
// suggest. The third column gives the dialect's letter (see [Dialect])
// and how a non-empty value is read.
//
//	Variable                                 Field                    Dialect and rule                                      Default
//	CORECRUXD_FEATURE_AUTONOMY_CONTRACT      AutonomyContract         F  on unless trim+lower is 0, false or off (no: on)   off
//	CORECRUXD_FEATURE_REUSE_CHECK            ReuseCheck               F  on unless trim+lower is 0, false or off (no: on)   off
//	CORECRUXD_FEATURE_ENGRAM_MCP             EngramMCP                F  on unless trim+lower is 0, false or off (no: on)   off
//	CORECRUXD_FEATURE_AUDIT_ENVELOPE         AuditEnvelope            D  on unless trim+lower is 0, false, off or no        off
//	CORECRUXD_FEATURE_MEMORY_ACK             MemoryAck                D  on unless trim+lower is 0, false, off or no        off
//	CORECRUXD_FEATURE_C2PA_OUTPUT            C2PAOutput               D  on unless trim+lower is 0, false, off or no        off
//	CORECRUXD_FEATURE_C2PA_X509_SIGNER       C2PAX509Signer           D  on unless trim+lower is 0, false, off or no        off
//	CORECRUXD_C2PA_SIGNER_BACKEND            C2PASignerBackend        J  any non-blank value, trimmed                       unset
//	CORECRUXD_C2PA_KEY_ID                    C2PAKeyID                J  any non-blank value, trimmed                       unset
//	CORECRUXD_C2PA_SIGNING_KEY_B64           C2PASigningKeyB64        J  any non-blank value, trimmed; secret               unset
//	CORECRUXD_FEATURE_SCOPED_FORGET          ScopedForget             B  on only if exactly 1 or true (any case)            on
//	CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS    ForgetRecoveryWindowDays I  trimmed integer; below 1 gives 1; invalid gives 7  7
//	CORECRUXD_FEATURE_MEMORY_PANEL           MemoryPanel              E  on unless trim+lower is 0, false, off or no        on
//	CORECRUXD_FEATURE_FRESHNESS              Freshness                E  on unless trim+lower is 0, false, off or no        on
//	CORECRUXD_DECAY_VOLATILE_HOURS           DecayVolatileHours       I  trimmed integer above 0, otherwise 24              24
//	CORECRUXD_DECAY_MEDIUM_DAYS              DecayMediumDays          I  trimmed integer above 0, otherwise 35              35
//	CORECRUXD_DECAY_STABLE_DAYS              DecayStableDays          I  trimmed integer above 0, otherwise 365             365
//	CORECRUXD_FEATURE_CONSOLIDATION          Consolidation            E  on unless trim+lower is 0, false, off or no        on
//	CORECRUXD_FEATURE_ARTEFACTS              Artefacts                D  on unless trim+lower is 0, false, off or no        off
//	CORECRUXD_OBSERVE                        Observe                  C  on only if trimmed is 1, true, TRUE, yes or YES    off
//	CORECRUXD_FEATURE_RECEIPT_VERIFY         ReceiptVerify            D  on unless trim+lower is 0, false, off or no        off
//	CORECRUXD_HANDOFF_OBSERVATIONS           HandoffObservations      D  on unless trim+lower is 0, false, off or no        off
//	CRUX_MCP_HANDOFF_SECRET                  HandoffSecret            J  any non-blank value, trimmed; secret               unset
//	CORECRUXD_FEATURE_AUDIT_EXPORT           AuditExport              D  on unless trim+lower is 0, false, off or no        off
//	CORECRUXD_AUDIT_EXPORT_DIR               AuditExportDir           J  any non-blank value, trimmed                       unset
//	CORECRUXD_AGENT_PASSPORTS                AgentPassports           C  on only if trimmed is 1, true, TRUE, yes or YES    off
//	CORECRUXD_FEATURE_PASSPORT_MINT_REQUESTS PassportMintRequests     C  on only if trimmed is 1, true, TRUE, yes or YES    off
//	CRUX_PASSPORT_REVOCATION                 PassportRevocation       A  on only if exactly 1 or true (any case)            off
//	CORECRUXD_FEATURE_IDENTITY_CONTINUITY    IdentityContinuity       A  on only if exactly 1 or true (any case)            off
//	CORECRUXD_SYNC_REMOTE_URL                SyncRemoteURL            J  any non-blank value, trimmed                       unset
//	CORECRUXD_SYNC_API_KEY                   SyncAPIKey               J  any non-blank value, trimmed; secret               unset
//	CRUX_CONTEXT_CUSTODY_AUDIT               ContextCustodyAudit      C  on only if trimmed is 1, true, TRUE, yes or YES    off
//	CRUX_AGENT_CARD                          AgentCard                B  on only if exactly 1 or true (any case)            on
//	CORECRUXD_TOOL_SURFACE                   ToolSurface              H  trim+lower: minimal or dynamic, else full          full
//
// [Table] returns the same table as data, and a test checks that this
// comment matches it row for row.
//
// # Unset and empty
//
// An empty value counts as unset, because FromEnv sees the environment
// through a getenv function and os.Getenv returns "" in both cases. For the
// default-on flags this differs from other implementations of the
// contract, which turn a flag off when it is set to the empty string: in crux, FLAG= leaves a
// dialect B or E flag on. Write FLAG=0 to turn it off. A value of only
// spaces is not empty: it is read by the flag's rule (and turns a dialect B,
// D, E or F flag off).
//
// # Secrets
//
// SyncAPIKey, C2PASigningKeyB64 and HandoffSecret have type [Secret]. The fmt
// verbs, encoding/json and log/slog print a placeholder instead of the value,
// so printing Flags with %v or %+v shows no credential. Call [Secret.Reveal]
// for the value itself.
type Flags struct {
	// AutonomyContract gates autonomy_contract
	// (CORECRUXD_FEATURE_AUTONOMY_CONTRACT). When off, the tool answers with
	// feature_enabled false and an empty capability list.
	AutonomyContract bool

	// ReuseCheck gates reuse_check (CORECRUXD_FEATURE_REUSE_CHECK). When off,
	// the tool answers CAPABILITY_DENIED.
	ReuseCheck bool

	// EngramMCP gates engram_resolve (CORECRUXD_FEATURE_ENGRAM_MCP). When off,
	// the tool answers CAPABILITY_DENIED.
	EngramMCP bool

	// AuditEnvelope makes query_facts, artefact_list, memory_freshness and
	// memory_acknowledge_use emit the audit envelope
	// (CORECRUXD_FEATURE_AUDIT_ENVELOPE).
	AuditEnvelope bool

	// MemoryAck gates memory_acknowledge_use (CORECRUXD_FEATURE_MEMORY_ACK).
	// When off, the tool succeeds with feature_enabled false and records
	// nothing.
	MemoryAck bool

	// C2PAOutput gates output_attest (CORECRUXD_FEATURE_C2PA_OUTPUT).
	C2PAOutput bool

	// C2PAX509Signer switches output_attest to the X.509 signer
	// (CORECRUXD_FEATURE_C2PA_X509_SIGNER), configured by C2PASignerBackend,
	// C2PAKeyID and C2PASigningKeyB64. When off, manifests are signed with
	// the server's Ed25519 receipt signer.
	C2PAX509Signer bool

	// C2PASignerBackend names the X.509 signer backend
	// (CORECRUXD_C2PA_SIGNER_BACKEND), for example vault-pki-p256. Empty
	// means unset.
	C2PASignerBackend string

	// C2PAKeyID is the key id output manifests carry
	// (CORECRUXD_C2PA_KEY_ID). Empty means unset.
	C2PAKeyID string

	// C2PASigningKeyB64 is the base64 signing key for output manifests
	// (CORECRUXD_C2PA_SIGNING_KEY_B64). It is kept encoded, as read.
	C2PASigningKeyB64 Secret

	// ScopedForget gates memory_forget (CORECRUXD_FEATURE_SCOPED_FORGET).
	// When off, the tool answers -32601. memory_forget_dry_run is never
	// gated. The default is on, and the strict dialect B means that
	// FLAG=yes and FLAG=on turn it off; FLAG=0 is the way to disable it.
	ScopedForget bool

	// ForgetRecoveryWindowDays is how long memory_forget keeps forgotten
	// facts recoverable, in days (CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS).
	// Default 7, minimum 1.
	ForgetRecoveryWindowDays int

	// MemoryPanel gates memory_view, memory_edit, memory_pin and
	// memory_history (CORECRUXD_FEATURE_MEMORY_PANEL). When off, they
	// answer -32601.
	MemoryPanel bool

	// Freshness gates memory_freshness, memory_sweep_candidates,
	// memory_set_horizon and memory_reverify (CORECRUXD_FEATURE_FRESHNESS).
	// When off, all four answer CAPABILITY_DENIED.
	Freshness bool

	// DecayVolatileHours is the age in hours past which a volatile fact is
	// stale (CORECRUXD_DECAY_VOLATILE_HOURS).
	DecayVolatileHours int

	// DecayMediumDays is the age in days past which a medium fact is stale
	// (CORECRUXD_DECAY_MEDIUM_DAYS).
	DecayMediumDays int

	// DecayStableDays is the age in days past which a stable fact is stale
	// (CORECRUXD_DECAY_STABLE_DAYS).
	DecayStableDays int

	// Consolidation gates memory_contradictions and memory_consolidate
	// (CORECRUXD_FEATURE_CONSOLIDATION). When off, both answer
	// CAPABILITY_DENIED.
	Consolidation bool

	// Artefacts gates artefact_put, artefact_get and artefact_list
	// (CORECRUXD_FEATURE_ARTEFACTS). When off, they succeed with a result
	// that says feature_enabled false.
	Artefacts bool

	// Observe gates list_observations, get_observation and
	// verify_observation (CORECRUXD_OBSERVE).
	Observe bool

	// ReceiptVerify gates receipt_verify (CORECRUXD_FEATURE_RECEIPT_VERIFY).
	// When off, the tool reports errors ["FEATURE_DISABLED"].
	// context_custody_audit reports this same field.
	ReceiptVerify bool

	// HandoffObservations makes create_handoff and accept_handoff record
	// observations (CORECRUXD_HANDOFF_OBSERVATIONS).
	HandoffObservations bool

	// HandoffSecret is the key material for handoff package signatures
	// (CRUX_MCP_HANDOFF_SECRET). Packages stay verifiable across restarts
	// only when it is set. crux signs handoff packages with the server's
	// Ed25519 receipt key instead, so it does not need this setting.
	HandoffSecret Secret

	// AuditExport gates audit_export_bundle (CORECRUXD_FEATURE_AUDIT_EXPORT).
	AuditExport bool

	// AuditExportDir is where audit_export_bundle writes bundles
	// (CORECRUXD_AUDIT_EXPORT_DIR). Empty means unset.
	AuditExportDir string

	// AgentPassports turns on passport auto-issue and moves issue_passport
	// from the hosted tier to the local tier (CORECRUXD_AGENT_PASSPORTS).
	// It is the only flag that moves a tool between tiers.
	AgentPassports bool

	// PassportMintRequests controls whether request_passport_mint exists at
	// all (CORECRUXD_FEATURE_PASSPORT_MINT_REQUESTS). When off, the tool is
	// absent from tools/list and calls to it answer -32601 unknown tool.
	PassportMintRequests bool

	// PassportRevocation makes the server refuse calls from a revoked
	// passport, except a small read-only allowlist
	// (CRUX_PASSPORT_REVOCATION). It gates enforcement, not revoke_passport
	// itself.
	PassportRevocation bool

	// IdentityContinuity gates passport_split, passport_merge and
	// passport_link_device (CORECRUXD_FEATURE_IDENTITY_CONTINUITY). When off,
	// they answer -32601.
	IdentityContinuity bool

	// SyncRemoteURL is the remote that sync_pull and sync_push talk to
	// (CORECRUXD_SYNC_REMOTE_URL). Empty means sync is not configured.
	SyncRemoteURL string

	// SyncAPIKey authenticates sync with the remote (CORECRUXD_SYNC_API_KEY).
	SyncAPIKey Secret

	// ContextCustodyAudit gates context_custody_audit
	// (CRUX_CONTEXT_CUSTODY_AUDIT). When off, the tool succeeds with
	// enabled false and a note. Its dialect C counts yes as on.
	ContextCustodyAudit bool

	// AgentCard publishes the agent card (CRUX_AGENT_CARD).
	// context_custody_audit reports it.
	AgentCard bool

	// ToolSurface shapes tools/list (CORECRUXD_TOOL_SURFACE). Tools shaped
	// out of the list can still be called by name.
	ToolSurface Surface
}

// The environment variables, one per field of [Flags]: EnvX sets field X.
const (
	EnvAutonomyContract         = "CORECRUXD_FEATURE_AUTONOMY_CONTRACT"
	EnvReuseCheck               = "CORECRUXD_FEATURE_REUSE_CHECK"
	EnvEngramMCP                = "CORECRUXD_FEATURE_ENGRAM_MCP"
	EnvAuditEnvelope            = "CORECRUXD_FEATURE_AUDIT_ENVELOPE"
	EnvMemoryAck                = "CORECRUXD_FEATURE_MEMORY_ACK"
	EnvC2PAOutput               = "CORECRUXD_FEATURE_C2PA_OUTPUT"
	EnvC2PAX509Signer           = "CORECRUXD_FEATURE_C2PA_X509_SIGNER"
	EnvC2PASignerBackend        = "CORECRUXD_C2PA_SIGNER_BACKEND"
	EnvC2PAKeyID                = "CORECRUXD_C2PA_KEY_ID"
	EnvC2PASigningKeyB64        = "CORECRUXD_C2PA_SIGNING_KEY_B64"
	EnvScopedForget             = "CORECRUXD_FEATURE_SCOPED_FORGET"
	EnvForgetRecoveryWindowDays = "CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS"
	EnvMemoryPanel              = "CORECRUXD_FEATURE_MEMORY_PANEL"
	EnvFreshness                = "CORECRUXD_FEATURE_FRESHNESS"
	EnvDecayVolatileHours       = "CORECRUXD_DECAY_VOLATILE_HOURS"
	EnvDecayMediumDays          = "CORECRUXD_DECAY_MEDIUM_DAYS"
	EnvDecayStableDays          = "CORECRUXD_DECAY_STABLE_DAYS"
	EnvConsolidation            = "CORECRUXD_FEATURE_CONSOLIDATION"
	EnvArtefacts                = "CORECRUXD_FEATURE_ARTEFACTS"
	EnvObserve                  = "CORECRUXD_OBSERVE"
	EnvReceiptVerify            = "CORECRUXD_FEATURE_RECEIPT_VERIFY"
	EnvHandoffObservations      = "CORECRUXD_HANDOFF_OBSERVATIONS"
	EnvHandoffSecret            = "CRUX_MCP_HANDOFF_SECRET"
	EnvAuditExport              = "CORECRUXD_FEATURE_AUDIT_EXPORT"
	EnvAuditExportDir           = "CORECRUXD_AUDIT_EXPORT_DIR"
	EnvAgentPassports           = "CORECRUXD_AGENT_PASSPORTS"
	EnvPassportMintRequests     = "CORECRUXD_FEATURE_PASSPORT_MINT_REQUESTS"
	EnvPassportRevocation       = "CRUX_PASSPORT_REVOCATION"
	EnvIdentityContinuity       = "CORECRUXD_FEATURE_IDENTITY_CONTINUITY"
	EnvSyncRemoteURL            = "CORECRUXD_SYNC_REMOTE_URL"
	EnvSyncAPIKey               = "CORECRUXD_SYNC_API_KEY"
	EnvContextCustodyAudit      = "CRUX_CONTEXT_CUSTODY_AUDIT"
	EnvAgentCard                = "CRUX_AGENT_CARD"
	EnvToolSurface              = "CORECRUXD_TOOL_SURFACE"
)

// Defaults returns the defaults. Scoped forget, the memory panel,
// freshness, consolidation and the agent card are on. Every other switch is
// off. The recovery window is 7 days, the decay thresholds are 24 hours, 35
// days and 365 days, the tool surface is [SurfaceFull], and every string
// and secret is unset. It equals FromEnv applied to an empty
// environment.
func Defaults() Flags {
	return Flags{
		ScopedForget:             true,
		ForgetRecoveryWindowDays: 7,
		MemoryPanel:              true,
		Freshness:                true,
		DecayVolatileHours:       24,
		DecayMediumDays:          35,
		DecayStableDays:          365,
		Consolidation:            true,
		AgentCard:                true,
		ToolSurface:              SurfaceFull,
	}
}

// FromEnv reads every flag in the [Flags] table from environ, a list of
// NAME=value entries as [os.Environ] returns it (the first entry of a name
// wins, as with [os.Getenv]). Each variable is read with its own dialect;
// variables that are unset or empty keep their [Defaults] value.
//
// No value is an error: a value a flag cannot use falls back as its rule
// says. But a value that looks like a mistake is reported in the warnings,
// once, so that a typo never goes unnoticed: a switch set to a word that is
// not a switch value (banana) or to one its dialect reads the other way
// (yes on a flag that is on only for 1 or true), an integer that is not one
// or is out of range, a tool surface that is not full, minimal or dynamic,
// and any CORECRUXD_* or CRUX_* variable that is not a flag. alsoKnown names
// other variables of those prefixes the caller reads itself (the crux
// command passes CRUX_DATA_DIR and CRUX_AGENT), which are not reported.
func FromEnv(environ []string, alsoKnown ...string) (Flags, []Warning) {
	values := make(map[string]string, len(flagSpecs))
	var warnings []Warning
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if _, seen := values[name]; seen {
			continue
		}
		values[name] = value
		if (strings.HasPrefix(name, "CORECRUXD_") || strings.HasPrefix(name, "CRUX_")) &&
			specIndex(name) < 0 && !slices.Contains(alsoKnown, name) {
			problem := "not a crux setting"
			if near := nearestName(name); near != "" {
				problem += "; did you mean " + near + "?"
			}
			warnings = append(warnings, Warning{Name: name, Value: value, Problem: problem})
		}
	}
	f := Defaults()
	for i := range flagSpecs {
		s := &flagSpecs[i]
		v := values[s.env]
		if v == "" {
			continue
		}
		s.set(&f, v)
		if s.check != nil {
			if problem := s.check(&f, v); problem != "" {
				warnings = append(warnings, Warning{Name: s.env, Value: v, Problem: problem})
			}
		}
	}
	slices.SortStableFunc(warnings, func(a, b Warning) int { return strings.Compare(a.Name, b.Name) })
	return f, warnings
}

// Warning reports an environment variable whose value or name looks like a
// mistake; see [FromEnv].
type Warning struct {
	Name    string // the variable
	Value   string // its value as set
	Problem string // what is wrong and how it was read
}

// String returns "NAME=value: problem". The value of a secret setting is not
// shown.
func (w Warning) String() string {
	v := strconv.Quote(w.Value)
	if i := specIndex(w.Name); i >= 0 && flagSpecs[i].rule == ruleSecret {
		v = redacted
	}
	return w.Name + "=" + v + ": " + w.Problem
}

// specIndex returns the index of the flag named env in flagSpecs, or -1.
func specIndex(env string) int {
	for i := range flagSpecs {
		if flagSpecs[i].env == env {
			return i
		}
	}
	return -1
}

// nearestName returns the flag whose name is within three edits of name,
// the closest first, or "" when none is.
func nearestName(name string) string {
	best, bestDist := "", 4
	for i := range flagSpecs {
		if d := editDistance(name, flagSpecs[i].env); d < bestDist {
			best, bestDist = flagSpecs[i].env, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Enabled reports whether the switch named by the environment variable env
// is on. known is false for a name that is not in the table, and for
// CORECRUXD_TOOL_SURFACE and the numeric settings, which are not switches.
// The string and secret settings (dialect J) count as on when set. A nil f
// reads [Defaults].
func (f *Flags) Enabled(env string) (on, known bool) {
	if f == nil {
		d := Defaults()
		f = &d
	}
	for i := range flagSpecs {
		if s := &flagSpecs[i]; s.env == env {
			if s.on == nil {
				return false, false
			}
			return s.on(f), true
		}
	}
	return false, false
}

// Info describes one row of the [Flags] table.
type Info struct {
	Env     string  // environment variable, such as CORECRUXD_FEATURE_FRESHNESS
	Field   string  // name of the Flags field it sets
	Dialect Dialect // parsing rule family
	Rule    string  // how a non-empty value is read, in words
	Default string  // the Defaults value: on, off, a number, a surface, or unset
	Switch  bool    // whether [Flags.Enabled] answers for it (known is true)
}

// Table returns every flag crux reads, in the order of the [Flags]
// table. The result is a new slice on each call.
func Table() []Info {
	def := Defaults()
	out := make([]Info, len(flagSpecs))
	for i := range flagSpecs {
		s := &flagSpecs[i]
		out[i] = Info{
			Env:     s.env,
			Field:   s.field,
			Dialect: s.dialect,
			Rule:    s.rule,
			Default: s.text(&def),
			Switch:  s.on != nil,
		}
	}
	return out
}

// Names returns the environment variable of every flag, in the order of
// [Table].
func Names() []string {
	out := make([]string, len(flagSpecs))
	for i := range flagSpecs {
		out[i] = flagSpecs[i].env
	}
	return out
}

// Dialect is one of the rules for reading an environment variable that the
// CueCrux tool contract uses; the letters name them. Every rule
// counts an empty value as unset (see [Flags]).
//
//   - A, strict opt-in: on only if the value is exactly 1, or true in any
//     ASCII case. There is no trimming, so " 1", yes and on are off. Unset is
//     off.
//   - B, strict, default on: the test of A, but unset is on, so any other
//     value (yes, on, 0) turns the flag off.
//   - C, yes-list: on only if the trimmed value is one of 1, true, TRUE, yes,
//     YES, spelled exactly. Unset is off, and True, Yes and on are off.
//   - D, deny-list, default off: trimmed and lower-cased, the value is off
//     only if it is 0, false, off or no (or blank). Anything else is on,
//     even banana. Unset is off.
//   - E, deny-list, default on: the test of D, but unset is on.
//   - F, short deny-list, default off: like D without no, so no is on.
//     Unset is off.
//   - G, deny-list, blank on: like E, but a blank value is on. No crux
//     flag uses it today.
//   - H, lenient enum: trimmed and lower-cased, minimal or dynamic select
//     that surface. Anything else selects full, the default.
//   - I, integer: trimmed decimal integer, with a per-flag default and
//     minimum given in the table. A value that is not an integer, or is too
//     large to express as a [time.Duration], gives the default.
//   - J, presence: any value with a non-space character is set and is kept
//     trimmed. Unset is the empty string.
type Dialect byte

// The dialects, by their letters.
const (
	DialectStrict            Dialect = 'A'
	DialectStrictDefaultOn   Dialect = 'B'
	DialectYesList           Dialect = 'C'
	DialectDenyList          Dialect = 'D'
	DialectDenyListDefaultOn Dialect = 'E'
	DialectShortDenyList     Dialect = 'F'
	DialectDenyListBlankOn   Dialect = 'G'
	DialectEnum              Dialect = 'H'
	DialectInteger           Dialect = 'I'
	DialectPresence          Dialect = 'J'
)

// String returns the dialect's letter.
func (d Dialect) String() string {
	if d < 'A' || d > 'J' {
		return "Dialect(" + strconv.Itoa(int(d)) + ")"
	}
	return string(rune(d))
}

// on reads v by a switch dialect (A to G and J). An empty v is unset.
func (d Dialect) on(v string) bool {
	if v == "" {
		return d == DialectStrictDefaultOn || d == DialectDenyListDefaultOn || d == DialectDenyListBlankOn
	}
	switch d {
	case DialectStrict, DialectStrictDefaultOn:
		return v == "1" || asciiEqualFold(v, "true")
	case DialectYesList:
		switch strings.TrimSpace(v) {
		case "1", "true", "TRUE", "yes", "YES":
			return true
		}
		return false
	case DialectDenyList, DialectDenyListDefaultOn:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "", "0", "false", "off", "no":
			return false
		}
		return true
	case DialectShortDenyList:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "", "0", "false", "off":
			return false
		}
		return true
	case DialectDenyListBlankOn:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "0", "false", "off", "no":
			return false
		}
		return true
	case DialectPresence:
		return strings.TrimSpace(v) != ""
	}
	panic("feature: dialect " + d.String() + " is not a switch")
}

// asciiEqualFold is Rust's eq_ignore_ascii_case: s equals t when ASCII
// letters are compared without case. Unlike [strings.EqualFold], it does not
// fold non-ASCII runes.
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// Surface is the mode tools/list is shaped with (CORECRUXD_TOOL_SURFACE).
type Surface string

// The surface modes.
const (
	// SurfaceFull lists every tool. It is the default.
	SurfaceFull Surface = "full"
	// SurfaceMinimal lists a small fixed floor of tools.
	SurfaceMinimal Surface = "minimal"
	// SurfaceDynamic lists the floor plus the tools that rank highest for
	// the caller's declared intent.
	SurfaceDynamic Surface = "dynamic"
)

// ParseSurface reads s by dialect H: trimmed and lower-cased, "minimal" and
// "dynamic" select those modes. Anything else, including "", gives
// [SurfaceFull].
func ParseSurface(s string) Surface {
	switch v := Surface(strings.ToLower(strings.TrimSpace(s))); v {
	case SurfaceMinimal, SurfaceDynamic:
		return v
	}
	return SurfaceFull
}

// Secret is a credential read from the environment. Its fmt, encoding/json
// and log/slog forms are "[REDACTED]" when it is set and empty when it is
// not, so the value cannot leak by printing a struct that holds it. JSON
// therefore does not round-trip a Secret. [Secret.Reveal] returns the value.
type Secret string

const redacted = "[REDACTED]"

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s != "" }

// String returns "[REDACTED]", or "" when the secret is unset.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// Format writes [Secret.String] for every verb, including %#v, %q and %x.
func (s Secret) Format(st fmt.State, verb rune) {
	out := s.String()
	if verb == 'q' || (verb == 'v' && st.Flag('#')) {
		out = strconv.Quote(out)
	}
	_, _ = io.WriteString(st, out)
}

// GoString returns the quoted [Secret.String], so %#v shows no value.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// MarshalJSON encodes [Secret.String], never the value.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }

// LogValue makes log/slog print [Secret.String], never the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// flagSpec is one row of the table: how to read a variable into Flags and
// how to show it.
type flagSpec struct {
	env, field string
	dialect    Dialect
	rule       string
	set        func(f *Flags, v string) // v is non-empty
	text       func(f *Flags) string    // the field's value as the table shows it
	on         func(f *Flags) bool      // nil when the flag is not a switch
	// check returns what looks wrong with v, which set has just read into
	// f, or "" (see FromEnv). Nil means no value looks wrong.
	check func(f *Flags, v string) string
}

// Rule texts, as tabulated in the Flags documentation.
const (
	ruleStrict    = "on only if exactly 1 or true (any case)"
	ruleYesList   = "on only if trimmed is 1, true, TRUE, yes or YES"
	ruleDeny      = "on unless trim+lower is 0, false, off or no"
	ruleShortDeny = "on unless trim+lower is 0, false or off (no: on)"
	ruleBlankOn   = "on unless trim+lower is 0, false, off or no; blank on"
	rulePresence  = "any non-blank value, trimmed"
	ruleSecret    = "any non-blank value, trimmed; secret"
	ruleEnum      = "trim+lower: minimal or dynamic, else full"
)

func switchRule(d Dialect) string {
	switch d {
	case DialectStrict, DialectStrictDefaultOn:
		return ruleStrict
	case DialectYesList:
		return ruleYesList
	case DialectDenyList, DialectDenyListDefaultOn:
		return ruleDeny
	case DialectShortDenyList:
		return ruleShortDeny
	case DialectDenyListBlankOn:
		return ruleBlankOn
	}
	panic("feature: dialect " + d.String() + " is not a boolean switch")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

func switchFlag(env, field string, d Dialect, p func(*Flags) *bool) flagSpec {
	return flagSpec{
		env: env, field: field, dialect: d, rule: switchRule(d),
		set:  func(f *Flags, v string) { *p(f) = d.on(v) },
		text: func(f *Flags) string { return onOff(*p(f)) },
		on:   func(f *Flags) bool { return *p(f) },
		check: func(f *Flags, v string) string {
			got := *p(f)
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "1", "true", "yes", "on", "y", "enable", "enabled":
				if got {
					return ""
				}
			case "0", "false", "no", "off", "n", "disable", "disabled":
				if !got {
					return ""
				}
			default:
				return "not a switch value; read as " + onOff(got) + " (" + switchRule(d) + ")"
			}
			return "read as " + onOff(got) + " (" + switchRule(d) + ")"
		},
	}
}

func stringSetting(env, field string, p func(*Flags) *string) flagSpec {
	return flagSpec{
		env: env, field: field, dialect: DialectPresence, rule: rulePresence,
		set:  func(f *Flags, v string) { *p(f) = strings.TrimSpace(v) },
		text: func(f *Flags) string { return orUnset(*p(f)) },
		on:   func(f *Flags) bool { return *p(f) != "" },
	}
}

func secretSetting(env, field string, p func(*Flags) *Secret) flagSpec {
	return flagSpec{
		env: env, field: field, dialect: DialectPresence, rule: ruleSecret,
		set: func(f *Flags, v string) { *p(f) = Secret(strings.TrimSpace(v)) },
		text: func(f *Flags) string {
			if p(f).IsSet() {
				return redacted
			}
			return "unset"
		},
		on: func(f *Flags) bool { return p(f).IsSet() },
	}
}

// intSetting reads a dialect I integer. A value below minimum gives minimum
// when clamp is set and def otherwise; a value that is not an integer, or
// whose count of unit does not fit a time.Duration, gives def.
func intSetting(env, field string, p func(*Flags) *int, def, minimum int, clamp bool, unit time.Duration) flagSpec {
	rule := "trimmed integer above " + strconv.Itoa(minimum-1) + ", otherwise " + strconv.Itoa(def)
	if clamp {
		rule = "trimmed integer; below " + strconv.Itoa(minimum) + " gives " + strconv.Itoa(minimum) +
			"; invalid gives " + strconv.Itoa(def)
	}
	limit := int64(math.MaxInt64 / unit)
	return flagSpec{
		env: env, field: field, dialect: DialectInteger, rule: rule,
		set: func(f *Flags, v string) {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch {
			case err != nil || n > limit:
				*p(f) = def
			case n < int64(minimum) && clamp:
				*p(f) = minimum
			case n < int64(minimum):
				*p(f) = def
			default:
				*p(f) = int(n)
			}
		},
		text: func(f *Flags) string { return strconv.Itoa(*p(f)) },
		check: func(f *Flags, v string) string {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch {
			case err != nil:
				return "not an integer; read as " + strconv.Itoa(*p(f))
			case n > limit:
				return "too large; read as " + strconv.Itoa(*p(f))
			case n < int64(minimum):
				return "below the minimum of " + strconv.Itoa(minimum) + "; read as " + strconv.Itoa(*p(f))
			}
			return ""
		},
	}
}

const day = 24 * time.Hour

// flagSpecs is the table, in the order of the Flags documentation. It is
// never modified.
var flagSpecs = [...]flagSpec{
	switchFlag(EnvAutonomyContract, "AutonomyContract", DialectShortDenyList, func(f *Flags) *bool { return &f.AutonomyContract }),
	switchFlag(EnvReuseCheck, "ReuseCheck", DialectShortDenyList, func(f *Flags) *bool { return &f.ReuseCheck }),
	switchFlag(EnvEngramMCP, "EngramMCP", DialectShortDenyList, func(f *Flags) *bool { return &f.EngramMCP }),
	switchFlag(EnvAuditEnvelope, "AuditEnvelope", DialectDenyList, func(f *Flags) *bool { return &f.AuditEnvelope }),
	switchFlag(EnvMemoryAck, "MemoryAck", DialectDenyList, func(f *Flags) *bool { return &f.MemoryAck }),
	switchFlag(EnvC2PAOutput, "C2PAOutput", DialectDenyList, func(f *Flags) *bool { return &f.C2PAOutput }),
	switchFlag(EnvC2PAX509Signer, "C2PAX509Signer", DialectDenyList, func(f *Flags) *bool { return &f.C2PAX509Signer }),
	stringSetting(EnvC2PASignerBackend, "C2PASignerBackend", func(f *Flags) *string { return &f.C2PASignerBackend }),
	stringSetting(EnvC2PAKeyID, "C2PAKeyID", func(f *Flags) *string { return &f.C2PAKeyID }),
	secretSetting(EnvC2PASigningKeyB64, "C2PASigningKeyB64", func(f *Flags) *Secret { return &f.C2PASigningKeyB64 }),
	switchFlag(EnvScopedForget, "ScopedForget", DialectStrictDefaultOn, func(f *Flags) *bool { return &f.ScopedForget }),
	intSetting(EnvForgetRecoveryWindowDays, "ForgetRecoveryWindowDays", func(f *Flags) *int { return &f.ForgetRecoveryWindowDays }, 7, 1, true, day),
	switchFlag(EnvMemoryPanel, "MemoryPanel", DialectDenyListDefaultOn, func(f *Flags) *bool { return &f.MemoryPanel }),
	switchFlag(EnvFreshness, "Freshness", DialectDenyListDefaultOn, func(f *Flags) *bool { return &f.Freshness }),
	intSetting(EnvDecayVolatileHours, "DecayVolatileHours", func(f *Flags) *int { return &f.DecayVolatileHours }, 24, 1, false, time.Hour),
	intSetting(EnvDecayMediumDays, "DecayMediumDays", func(f *Flags) *int { return &f.DecayMediumDays }, 35, 1, false, day),
	intSetting(EnvDecayStableDays, "DecayStableDays", func(f *Flags) *int { return &f.DecayStableDays }, 365, 1, false, day),
	switchFlag(EnvConsolidation, "Consolidation", DialectDenyListDefaultOn, func(f *Flags) *bool { return &f.Consolidation }),
	switchFlag(EnvArtefacts, "Artefacts", DialectDenyList, func(f *Flags) *bool { return &f.Artefacts }),
	switchFlag(EnvObserve, "Observe", DialectYesList, func(f *Flags) *bool { return &f.Observe }),
	switchFlag(EnvReceiptVerify, "ReceiptVerify", DialectDenyList, func(f *Flags) *bool { return &f.ReceiptVerify }),
	switchFlag(EnvHandoffObservations, "HandoffObservations", DialectDenyList, func(f *Flags) *bool { return &f.HandoffObservations }),
	secretSetting(EnvHandoffSecret, "HandoffSecret", func(f *Flags) *Secret { return &f.HandoffSecret }),
	switchFlag(EnvAuditExport, "AuditExport", DialectDenyList, func(f *Flags) *bool { return &f.AuditExport }),
	stringSetting(EnvAuditExportDir, "AuditExportDir", func(f *Flags) *string { return &f.AuditExportDir }),
	switchFlag(EnvAgentPassports, "AgentPassports", DialectYesList, func(f *Flags) *bool { return &f.AgentPassports }),
	switchFlag(EnvPassportMintRequests, "PassportMintRequests", DialectYesList, func(f *Flags) *bool { return &f.PassportMintRequests }),
	switchFlag(EnvPassportRevocation, "PassportRevocation", DialectStrict, func(f *Flags) *bool { return &f.PassportRevocation }),
	switchFlag(EnvIdentityContinuity, "IdentityContinuity", DialectStrict, func(f *Flags) *bool { return &f.IdentityContinuity }),
	stringSetting(EnvSyncRemoteURL, "SyncRemoteURL", func(f *Flags) *string { return &f.SyncRemoteURL }),
	secretSetting(EnvSyncAPIKey, "SyncAPIKey", func(f *Flags) *Secret { return &f.SyncAPIKey }),
	switchFlag(EnvContextCustodyAudit, "ContextCustodyAudit", DialectYesList, func(f *Flags) *bool { return &f.ContextCustodyAudit }),
	switchFlag(EnvAgentCard, "AgentCard", DialectStrictDefaultOn, func(f *Flags) *bool { return &f.AgentCard }),
	{
		env: EnvToolSurface, field: "ToolSurface", dialect: DialectEnum, rule: ruleEnum,
		set:  func(f *Flags, v string) { f.ToolSurface = ParseSurface(v) },
		text: func(f *Flags) string { return string(f.ToolSurface) },
		check: func(f *Flags, v string) string {
			if Surface(strings.ToLower(strings.TrimSpace(v))) == f.ToolSurface {
				return ""
			}
			return "not full, minimal or dynamic; read as " + string(f.ToolSurface)
		},
	},
}
