package tools

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Handoffs pass one agent's working session to another.
//
// create_handoff builds a package: a JSON object {schema, handoff_id,
// tenant_id, from_agent, target_agent, created_at, session {session_id,
// state}, facts [{entity, key, value, confidence}], message, task_record,
// key_id, content_hash, signature}. Its canonical content
// (handoffCanonical) is the package without content_hash and signature,
// re-encoded with every object's keys sorted, no insignificant whitespace
// and no HTML escaping; content_hash is the hex BLAKE3-256 of it, and
// signature the hex Ed25519 signature by the server's receipt key
// (env.Signer, key_id naming it) of handoffSigningPrefix + content_hash.
// The prefix keeps handoff signatures apart from receipt signatures made
// with the same key. The package is recorded in the store (content hash,
// target, creator) with a "handoff" receipt, in one transaction.
//
// Relevant facts (include_facts): the current shared facts of the tenant
// that the session state cites by fact id (a string value f_<32 hex>), then
// those whose entity name equals the session id or occurs, as a whole
// string, among the string values or object keys of the state (compared
// case-insensitively; entities in name order, best ranked first), at most
// maxHandoffFacts in all. Private and reserved facts (decisions included)
// are never carried.
//
// accept_handoff takes package_json verbatim. It recomputes the canonical
// content and its hash, compares it with content_hash in constant time,
// checks key_id and the signature against the server's public key, and
// checks that the package is one this store recorded with that hash. Any
// failure is a -32602 naming package, with the reason, and loads nothing.
// A package for another tenant or one already accepted is refused the same
// way; a caller other than the set target_agent gets -32030. On success,
// in one transaction with a "handoff_accept" receipt: the session state is
// saved as the acceptor's session of the same id (replacing any), each
// fact is verified present (a current shared fact with the same entity,
// key and value) or, when the (entity, key) has no current shared fact,
// written anew as a shared fact owned by the acceptor; a fact whose shared
// value changed since the handoff is left alone (the newer value wins) and
// counted in facts_stale. facts_loaded counts facts verified present plus
// facts written. A package is accepted at most once.

// Handoff limits and names.
const (
	// handoffSchema names the package format.
	handoffSchema = "crux.handoff.v1"
	// handoffSigningPrefix is prepended to the hex content hash before
	// signing.
	handoffSigningPrefix = "crux.handoff.v1:"
	// maxHandoffFacts caps the relevant facts a package carries.
	maxHandoffFacts = 100
	// maxHandoffPackageBytes caps a package: accept_handoff takes it as a
	// string argument, which is at most MaxValueBytes, so create_handoff
	// makes none larger.
	maxHandoffPackageBytes = toolkit.MaxValueBytes
	// maxHandoffListItems caps each list of task_record.
	maxHandoffListItems = 100
)

// handoffFact is a fact carried in a handoff package.
type handoffFact struct {
	Entity     string  `json:"entity"`
	Key        string  `json:"key"`
	Value      string  `json:"value"`
	Confidence float64 `json:"confidence"`
}

// handoffSession is the session carried in a handoff package.
type handoffSession struct {
	SessionID string          `json:"session_id"`
	State     json.RawMessage `json:"state"`
}

// TaskRecord is the structured statement of intent of a handoff.
type TaskRecord struct {
	Requester          string   `json:"requester,omitempty"`
	DesiredOutcome     string   `json:"desired_outcome,omitempty"`
	Sources            []string `json:"sources,omitempty" schema:"maxItems=100"`
	AcceptanceCriteria []string `json:"acceptance_criteria,omitempty" schema:"maxItems=100"`
	Boundaries         []string `json:"boundaries,omitempty" schema:"maxItems=100"`
	BlockerRule        string   `json:"blocker_rule,omitempty"`
}

// handoffPackage is the package create_handoff returns as package_json.
type handoffPackage struct {
	Schema      string         `json:"schema"`
	HandoffID   string         `json:"handoff_id"`
	TenantID    string         `json:"tenant_id"`
	FromAgent   string         `json:"from_agent"`
	TargetAgent string         `json:"target_agent"`
	CreatedAt   string         `json:"created_at"`
	Session     handoffSession `json:"session"`
	Facts       []handoffFact  `json:"facts"`
	Message     string         `json:"message"`
	TaskRecord  *TaskRecord    `json:"task_record"`
	KeyID       string         `json:"key_id"`
	ContentHash string         `json:"content_hash"`
	Signature   string         `json:"signature"`
}

// handoffCanonical returns the canonical content of a package given as
// JSON: the object without content_hash and signature, encoded with sorted
// keys, no whitespace and no HTML escaping (numbers kept as written).
func handoffCanonical(pkg []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(pkg))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the package")
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	delete(m, "content_hash")
	delete(m, "signature")
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// handoffContentHash is the hex BLAKE3-256 of canonical.
func handoffContentHash(canonical []byte) string {
	sum := blake3.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// ---- create_handoff ----

type createHandoffArgs struct {
	SessionID    string      `json:"session_id" schema:"minLength=1"`
	IncludeFacts bool        `json:"include_facts,omitempty" schema:"default=false" doc:"Carry the shared facts the state cites (at most 100)."`
	TargetAgent  string      `json:"target_agent,omitempty" doc:"Only this agent may accept."`
	Message      string      `json:"message,omitempty"`
	TaskRecord   *TaskRecord `json:"task_record,omitempty"`
}

// CreateHandoffOutput is what create_handoff returns: the signed package,
// as JSON text for accept_handoff.
type CreateHandoffOutput struct {
	PackageJSON       string `json:"package_json"`
	ContentHash       string `json:"content_hash"`
	Signature         string `json:"signature"`
	RelevantFactCount int    `json:"relevant_fact_count"`
	HandoffID         string `json:"handoff_id"`
	ReceiptID         string `json:"receipt_id"`
}

func checkTaskRecord(tool string, tr *TaskRecord) error {
	if tr == nil {
		return nil
	}
	if err := checkNames(tool, "task_record.requester", tr.Requester); err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"task_record.sources", tr.Sources}, {"task_record.acceptance_criteria", tr.AcceptanceCriteria}, {"task_record.boundaries", tr.Boundaries}} {
		if len(l.list) > maxHandoffListItems {
			return toolkit.InvalidParams(tool, l.name, fmt.Sprintf("at most %d items", maxHandoffListItems))
		}
	}
	return nil
}

// stateMentions returns the lower-cased strings of a JSON state: its string
// values and object keys.
func stateMentions(state []byte) map[string]bool {
	var v any
	if json.Unmarshal(state, &v) != nil {
		return nil
	}
	out := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out[strings.ToLower(x)] = true
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				out[strings.ToLower(k)] = true
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// factIDPattern matches a fact id as the state may cite it.
var factIDPattern = regexp.MustCompile(`^f_[0-9a-f]{32}$`)

// relevantFacts returns the current shared facts the session refers to
// (see the package comment), at most maxHandoffFacts, without duplicates.
func relevantFacts(tx store.Tx, env *toolkit.Env, tenant, sessionID string, state []byte) ([]handoffFact, error) {
	out := []handoffFact{}
	seen := map[string]bool{}
	add := func(f *store.Fact) {
		if len(out) >= maxHandoffFacts || seen[f.ID] || f.Tenant != tenant || !store.Public(f) || !f.Current() {
			return
		}
		seen[f.ID] = true
		out = append(out, handoffFact{Entity: f.Entity, Key: f.Key, Value: f.Value, Confidence: f.Confidence})
	}
	mentions := stateMentions(state)
	// Facts the state cites by id, in id order.
	var ids []string
	for m := range mentions {
		if factIDPattern.MatchString(m) {
			ids = append(ids, m)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		f, err := store.GetFact(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			if err := store.SkipCorrupt(tx, err); err != nil {
				return nil, err
			}
			continue // unreadable: reported, and not carried
		}
		add(f)
	}
	// Facts of the entities the state names, or of the session id.
	mentions[strings.ToLower(sessionID)] = true
	entities, err := store.ListEntities(tx, store.Scope{Tenant: tenant, Agent: ""})
	if err != nil {
		return nil, err
	}
	for _, e := range entities {
		if len(out) >= maxHandoffFacts {
			break
		}
		if store.IsReserved(e) || !mentions[strings.ToLower(e)] {
			continue
		}
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: tenant}, Entity: e, Limit: maxHandoffFacts, Now: env.Time()})
		if err != nil {
			return nil, err
		}
		for _, r := range res.Facts {
			add(r.Fact)
		}
	}
	return out, nil
}

func createHandoff() *toolkit.Tool {
	const name = "create_handoff"
	return &toolkit.Tool{
		Name:        name,
		Description: "Package one of your sessions for another agent, signed. Pass package_json to accept_handoff unchanged.",
		Annotations: toolkit.Annotations{Title: "Create handoff"},
		Out:         toolkit.OutputOf[CreateHandoffOutput](),
		Run:         toolkit.Bind(name, runCreateHandoff),
	}
}

// runCreateHandoff runs one create_handoff call.
func runCreateHandoff(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *createHandoffArgs) (*toolkit.Result, error) {
	const name = "create_handoff"
	if err := checkSessionID(name, in.SessionID); err != nil {
		return nil, err
	}
	if err := checkNames(name, "target_agent", in.TargetAgent); err != nil {
		return nil, err
	}
	if err := checkTaskRecord(name, in.TaskRecord); err != nil {
		return nil, err
	}
	if env.Signer == nil {
		return nil, toolkit.WrapError(toolkit.CodeInternalError, "create_handoff: no signing key", nil)
	}
	scope, now := c.Scope(), env.Time()
	var out CreateHandoffOutput
	missing, tooLarge := false, 0
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		missing, tooLarge = false, 0
		s, err := store.GetSession(tx, scope, in.SessionID, now)
		if errors.Is(err, store.ErrNotFound) {
			missing = true
			return nil
		}
		if err != nil {
			return err
		}
		facts := []handoffFact{}
		if in.IncludeFacts {
			if facts, err = relevantFacts(tx, env, scope.Tenant, s.ID, s.State); err != nil {
				return err
			}
		}
		pkg := handoffPackage{
			Schema: handoffSchema, HandoffID: "ho_" + strings.TrimPrefix(store.NewFactID(), "f_"),
			TenantID: scope.Tenant, FromAgent: scope.Agent, TargetAgent: in.TargetAgent, CreatedAt: stamp(now),
			Session: handoffSession{SessionID: s.ID, State: s.State}, Facts: facts,
			Message: in.Message, TaskRecord: in.TaskRecord, KeyID: env.Signer.KeyID(),
		}
		pkg, raw, err := signHandoff(env, pkg)
		if err != nil {
			return err
		}
		if len(raw) > maxHandoffPackageBytes {
			tooLarge = len(raw)
			return nil // nothing is written
		}
		rec := &store.Handoff{ID: pkg.HandoffID, Tenant: scope.Tenant, From: scope.Agent, Target: in.TargetAgent,
			ContentHash: pkg.ContentHash, CreatedAt: now}
		if err := store.PutHandoff(tx, rec); err != nil {
			return err
		}
		payload := map[string]any{"handoff_id": pkg.HandoffID, "content_hash": pkg.ContentHash,
			"session_id": s.ID, "target_agent": in.TargetAgent, "fact_count": len(facts)}
		r, err := receipts.Append(tx, env.Signer, scope.Tenant, "handoff", c.Name(), payload, now)
		if err != nil {
			return err
		}
		payload["receipt_id"] = r.ID
		if err := observeHandoff(tx, env, c, in.SessionID, "handoff.created", payload); err != nil {
			return err
		}
		out = CreateHandoffOutput{PackageJSON: string(raw), ContentHash: pkg.ContentHash, Signature: pkg.Signature,
			RelevantFactCount: len(facts), HandoffID: pkg.HandoffID, ReceiptID: r.ID}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if missing {
		return sessionNotFound(in.SessionID), nil
	}
	if tooLarge > 0 {
		return toolkit.ErrorResult("the package would be %d bytes, more than the %d accept_handoff takes; nothing was "+
			"recorded: shorten the session state, the message or the task record, or leave out include_facts",
			tooLarge, maxHandoffPackageBytes), nil
	}
	return toolkit.JSONResult(out)
}

// signHandoff sets pkg's content hash (over its canonical form) and the
// signature of that hash, and returns it with its JSON text.
func signHandoff(env *toolkit.Env, pkg handoffPackage) (handoffPackage, []byte, error) {
	raw, err := codec.MarshalNoEscape(pkg)
	if err != nil {
		return pkg, nil, err
	}
	canon, err := handoffCanonical(raw)
	if err != nil {
		return pkg, nil, err
	}
	pkg.ContentHash = handoffContentHash(canon)
	sig, err := env.Signer.Sign([]byte(handoffSigningPrefix + pkg.ContentHash))
	if err != nil {
		return pkg, nil, err
	}
	pkg.Signature = hex.EncodeToString(sig)
	raw, err = codec.MarshalNoEscape(pkg)
	if err != nil {
		return pkg, nil, err
	}
	return pkg, raw, nil
}

// ---- accept_handoff ----

type acceptHandoffArgs struct {
	Package string `json:"package" schema:"minLength=1"`
}

// AcceptHandoffOutput is what accept_handoff returns.
type AcceptHandoffOutput struct {
	HandoffID     string      `json:"handoff_id"`
	SessionID     string      `json:"session_id"`
	SessionLoaded bool        `json:"session_loaded"`
	FactsLoaded   int         `json:"facts_loaded"`
	FactsWritten  int         `json:"facts_written"`
	FactsStale    int         `json:"facts_stale"`
	Verified      bool        `json:"verified"`
	FromAgent     string      `json:"from_agent,omitempty"`
	Message       string      `json:"message,omitempty"`
	TaskRecord    *TaskRecord `json:"task_record,omitempty"`
	ReceiptID     string      `json:"receipt_id"`
}

// verifyHandoff parses and checks a package against the server's key. The
// error is a -32602 naming package.
func verifyHandoff(tool string, env *toolkit.Env, raw string) (*handoffPackage, error) {
	refuse := func(reason string) error { return toolkit.InvalidParams(tool, "package", reason) }
	if raw == "" {
		return nil, refuse("required: the package_json string create_handoff returned")
	}
	if len(raw) > maxHandoffPackageBytes {
		return nil, refuse(fmt.Sprintf("longer than %d bytes", maxHandoffPackageBytes))
	}
	if toolkit.LoneSurrogate([]byte(raw)) {
		// Decoding would turn the escape into U+FFFD, silently; crux never
		// writes one, so the package was altered.
		return nil, refuse("is not valid UTF-8: it holds an unpaired surrogate escape")
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	pkg := new(handoffPackage)
	if err := dec.Decode(pkg); err != nil {
		return nil, refuse("not a handoff package: " + err.Error())
	}
	if pkg.Schema != handoffSchema {
		return nil, refuse(fmt.Sprintf("schema is %q, want %q", pkg.Schema, handoffSchema))
	}
	canon, err := handoffCanonical([]byte(raw))
	if err != nil {
		return nil, refuse("not a handoff package: " + err.Error())
	}
	want := handoffContentHash(canon)
	if subtle.ConstantTimeCompare([]byte(want), []byte(pkg.ContentHash)) != 1 {
		return nil, refuse("content hash mismatch: the package was altered")
	}
	if env.Signer == nil {
		return nil, toolkit.WrapError(toolkit.CodeInternalError, tool+": no signing key", nil)
	}
	if pkg.KeyID != env.Signer.KeyID() {
		return nil, refuse(fmt.Sprintf("signed by key %q, not this server's key", pkg.KeyID))
	}
	sig, err := hex.DecodeString(pkg.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize ||
		!ed25519.Verify(env.Signer.Public(), []byte(handoffSigningPrefix+pkg.ContentHash), sig) {
		return nil, refuse("signature verification failed")
	}
	return pkg, nil
}

func acceptHandoff() *toolkit.Tool {
	const name = "accept_handoff"
	return &toolkit.Tool{
		Name:        name,
		Description: "Accept a handoff package exactly as created; an altered, foreign or reused one is refused.",
		Annotations: toolkit.Annotations{Title: "Accept handoff", IdempotentHint: true}, // a package is accepted once; a repeat is refused and changes nothing
		Out:         toolkit.OutputOf[AcceptHandoffOutput](),
		Run:         toolkit.Bind(name, runAcceptHandoff),
	}
}

// runAcceptHandoff runs one accept_handoff call.
func runAcceptHandoff(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *acceptHandoffArgs) (*toolkit.Result, error) {
	const name = "accept_handoff"
	pkg, err := verifyHandoff(name, env, in.Package)
	if err != nil {
		return nil, err
	}
	scope, me, now := c.Scope(), c.Identity(), env.Time()
	if pkg.TenantID != scope.Tenant {
		return nil, toolkit.InvalidParams(name, "package", "the package belongs to another tenant")
	}
	if pkg.TargetAgent != "" && pkg.TargetAgent != me {
		return nil, &toolkit.Error{Code: toolkit.CodeCapabilityDenied,
			Message: name + ": only " + pkg.TargetAgent + " may accept this handoff",
			Data:    map[string]any{"handoff_id": pkg.HandoffID, "reason": "not_target_agent"}}
	}
	if err := checkSessionID(name, pkg.Session.SessionID); err != nil || pkg.Session.SessionID == "" {
		return nil, toolkit.InvalidParams(name, "package", "bad session id")
	}
	var out AcceptHandoffOutput
	err = env.Store.Update(ctx, func(tx store.Tx) error {
		out = AcceptHandoffOutput{HandoffID: pkg.HandoffID, SessionID: pkg.Session.SessionID, Verified: true,
			FromAgent: pkg.FromAgent, Message: pkg.Message, TaskRecord: pkg.TaskRecord}
		rec, err := store.GetHandoff(tx, scope.Tenant, pkg.HandoffID)
		if errors.Is(err, store.ErrNotFound) {
			return toolkit.InvalidParams(name, "package", "no such handoff was created here")
		}
		if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare([]byte(rec.ContentHash), []byte(pkg.ContentHash)) != 1 {
			return toolkit.InvalidParams(name, "package", "content hash does not match the recorded handoff")
		}
		if rec.Accepted {
			return toolkit.InvalidParams(name, "package", "handoff already accepted")
		}
		sess := &store.Session{ID: pkg.Session.SessionID, Tenant: scope.Tenant, Owner: me,
			State: pkg.Session.State, WrittenBy: me, UpdatedAt: now}
		if err := store.PutSession(tx, sess); errors.Is(err, store.ErrReadOnlySession) {
			return toolkit.WrapError(toolkit.CodeConflict, name+": session "+sess.ID+" is a read-only reference a "+
				"passport merge moved here; nothing was accepted", err)
		} else if err != nil {
			return err
		}
		out.SessionLoaded = true
		if err := loadHandoffFacts(tx, scope, pkg.Facts, now, &out); err != nil {
			return err
		}
		rec.Accepted, rec.AcceptedBy, rec.AcceptedAt = true, me, &now
		if err := store.PutHandoff(tx, rec); err != nil {
			return err
		}
		payload := map[string]any{
			"handoff_id": pkg.HandoffID, "content_hash": pkg.ContentHash, "session_id": pkg.Session.SessionID,
			"facts_loaded": out.FactsLoaded, "facts_written": out.FactsWritten}
		r, err := receipts.Append(tx, env.Signer, scope.Tenant, "handoff_accept", c.Name(), payload, now)
		if err != nil {
			return err
		}
		out.ReceiptID = r.ID
		payload["receipt_id"] = r.ID
		if err := observeHandoff(tx, env, c, pkg.Session.SessionID, "handoff.accepted", payload); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return toolkit.JSONResult(out)
}

// loadHandoffFacts writes, under scope, each of a package's facts whose
// (entity, key) the tenant's shared facts do not hold yet, and counts in
// out those held with the same value (loaded), with another value (stale,
// left as they are) and those it wrote. crux's own entities are passed
// over.
func loadHandoffFacts(tx store.Tx, scope store.Scope, facts []handoffFact, now time.Time, out *AcceptHandoffOutput) error {
	for _, f := range facts {
		if store.IsReserved(f.Entity) {
			continue
		}
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: scope.Tenant}, Entity: f.Entity, Key: f.Key, Limit: 1, Now: now})
		if err != nil {
			return err
		}
		switch {
		case len(res.Facts) > 0 && res.Facts[0].Value == f.Value:
			out.FactsLoaded++
		case len(res.Facts) > 0:
			out.FactsStale++
		default:
			if _, _, err := store.PutFact(tx, store.NewFact{Scope: scope, Entity: f.Entity,
				Key: f.Key, Value: f.Value, Confidence: f.Confidence, Now: now}); err != nil {
				return err
			}
			out.FactsLoaded++
			out.FactsWritten++
		}
	}
	return nil
}

// observeHandoff records, when Flags.HandoffObservations is on, an
// observation of kind (provider crux) in c's session, in tx: what the
// handoff receipt attests, and the receipt's id.
func observeHandoff(tx store.Tx, env *toolkit.Env, c toolkit.Caller, session, kind string, payload map[string]any) error {
	if !env.Flags.HandoffObservations {
		return nil
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	_, err = recordObservation(tx, env, c, Observation{SessionID: session, Provider: "crux", Kind: kind, Payload: b})
	return err
}
