package tools_test

// A fixture store and one valid call of every tool, shared by the fuzz
// target (whose seed corpus holds these calls) and the fault-injection test.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/memstore"
	"github.com/crux-go/crux/internal/receipttest"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/storetest"
	"github.com/crux-go/crux/tools"
)

// fixtureTime is the fixture servers' clock: it does not move, so that a
// call replays the same way.
var fixtureTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixtureFlags are the defaults with every switch a tool depends on turned
// on, so that each tool runs its code rather than its flag-off answer.
func fixtureFlags() crux.Flags {
	f := crux.DefaultFlags()
	f.AutonomyContract = true
	f.ReuseCheck = true
	f.EngramMCP = true
	f.MemoryAck = true
	f.C2PAOutput = true
	f.Artefacts = true
	f.AgentPassports = true
	f.PassportRevocation = true
	f.PassportMintRequests = true
	f.ReceiptVerify = true
	f.Observe = true
	f.HandoffObservations = true
	f.AuditEnvelope = true
	f.IdentityContinuity = true
	f.AuditExport = true
	f.AuditExportDir = fixtureExportDir
	f.ContextCustodyAudit = true
	return f
}

// fixtureSigner signs the fixture servers' receipts: its key is the same in
// every run.
func fixtureSigner() *receipts.Ed25519Signer {
	return receipts.NewEd25519Signer(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
}

// operatorReceipts is how many receipts the fixture's operator, olga, has
// earned: the fewest that make her passport trusted.
const operatorReceipts = 500

// fixtureServer is a server over st with the fixture's flags, its clock and
// a signer whose key is the same in every run.
func fixtureServer(t testing.TB, st store.Backend) *crux.Server {
	t.Helper()
	flags := fixtureFlags()
	signer := fixtureSigner()
	srv, err := crux.NewServer(st, &crux.Options{Flags: &flags, Now: func() time.Time { return fixtureTime }, Signer: signer})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// swapStore is a backend whose store can be replaced between calls, so
// that one server (which takes tens of milliseconds to build) serves many
// fresh copies of the fixture.
type swapStore struct {
	mu  sync.RWMutex
	cur store.Backend
}

func (s *swapStore) set(b store.Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = b
}

func (s *swapStore) get() store.Backend {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur
}

func (s *swapStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.get().View(ctx, fn)
}

func (s *swapStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.get().Update(ctx, fn)
}

func (s *swapStore) Close() error { return s.get().Close() }

// fixtureState is the fixture, built once per test binary: the content of
// its store and the values of its placeholders.
type fixtureState struct {
	snap storetest.Snapshot
	fx   *fixture
}

var builtFixture struct {
	sync.Mutex
	state *fixtureState
}

// loadFixture builds the fixture on first use.
func loadFixture(t testing.TB) *fixtureState {
	t.Helper()
	builtFixture.Lock()
	defer builtFixture.Unlock()
	if builtFixture.state == nil {
		fb := storetest.NewFaulty(memstore.New())
		srv := fixtureServer(t, fb)
		fx := fillFixture(t, srv, fb)
		snap, err := fb.Snapshot(context.Background())
		require.NoError(t, err)
		builtFixture.state = &fixtureState{snap: snap, fx: fx}
	}
	return builtFixture.state
}

// restore returns a fresh in-memory store holding the fixture, wrapped in
// a disarmed Faulty that knows its buckets.
func (fs *fixtureState) restore(t testing.TB) *storetest.Faulty {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
		for b, kv := range fs.snap {
			for k, v := range kv {
				if err := tx.Put(b, []byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	return storetest.NewFaulty(st, slices.Collect(maps.Keys(fs.snap))...)
}

// fixtureRig is a fixture server over a swapStore that holds a fresh copy
// of the fixture; set other copies in with swap.set(fs.restore(t)).
func fixtureRig(t testing.TB) (*crux.Server, *swapStore, *fixtureState) {
	t.Helper()
	fs := loadFixture(t)
	swap := &swapStore{cur: fs.restore(t)}
	return fixtureServer(t, swap), swap, fs
}

// configSHA is the SHA-256 the fixture audits cfg/app.yaml with.
const configSHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// fixture is what fillFixture stored: the values of the placeholders that
// valid calls (and fuzz inputs) name instead of ids known only at run time.
type fixture struct {
	replace *strings.Replacer
}

// The placeholders of a call's arguments. $PACKAGE stands for a JSON
// string, quotes included.
const (
	phFact     = "$FACT"     // alice's shared fact project:crux/language
	phPrivate  = "$PRIVATE"  // alice's private fact project:crux/editor
	phBobFact  = "$BOBFACT"  // bob's shared fact service:api/cache
	phArtefact = "$ARTEFACT" // alice's artefact
	phPackage  = "$PACKAGE"  // the handoff package alice made for bob, as a JSON string
	phPlan     = "$PLAN"     // the session id of alice's cuecrux_session plan
	phReceipt  = "$RECEIPT"  // the receipt of alice's decision
	phObs      = "$OBS"      // an observation of alice's session s1
)

// fillFixture stores, through srv, what the valid calls act on: facts of
// alice (shared and private) and bob, contradicting values, sessions (one
// archived), an artefact, a handoff package for bob, a constraint, a config
// audit, a decision, a gap, two documents, an engram, a session plan, an
// observation of alice's session s1, the passports of bob and of erin
// (sponsored by alice), and the operator passport of olga, with a private
// fact, a session, and a device linked. st is srv's store: olga's receipts
// are appended to it directly, as her calls would have minted them.
func fillFixture(t testing.TB, srv *crux.Server, st store.Backend) *fixture {
	t.Helper()
	do := func(c crux.Caller, tool, args string) map[string]any { return call(t, srv, c, tool, args) }
	str := func(m map[string]any, field string) string {
		s, ok := m[field].(string)
		require.True(t, ok, "no %s in %v", field, m)
		return s
	}
	fact := str(do(alice, "store_fact", `{"entity":"project:crux","key":"language","value":"Go","horizon_class":"volatile"}`), "fact_id")
	private := str(do(alice, "store_fact", `{"entity":"project:crux","key":"editor","value":"vim","private":true}`), "fact_id")
	bobFact := str(do(bob, "store_fact", `{"entity":"service:api","key":"cache","value":"enabled","confidence":0.5}`), "fact_id")
	do(alice, "store_fact", `{"entity":"service:api","key":"cache","value":"Disabled.","private":true}`)
	do(alice, "save_session", `{"session_id":"s1","state":{"title":"port","focus":"project:crux","n":1.5}}`)
	do(alice, "save_session", `{"session_id":"s2","state":{"title":"old"}}`)
	do(alice, "archive_session", `{"session_id":"s2","reason":"done"}`)
	artefact := str(do(alice, "artefact_put", `{"content_bytes_base64":"aGVsbG8=","mime_type":"text/plain","tool_origin":"fixture"}`), "artefact_id")
	pkg, err := json.Marshal(str(do(alice, "create_handoff", `{"session_id":"s1","target_agent":"bob","include_facts":true}`), "package_json"))
	require.NoError(t, err)
	do(alice, "declare_constraint", `{"constraint_type":"policy","assertion":"never push to main","severity":"high"}`)
	do(alice, "audit_config", `{"path":"cfg/app.yaml","sha256":"`+configSHA+`","auditor":"alice"}`)
	receipt := str(do(alice, "record_decision", `{"action":"use bbolt","rationale":"embedded"}`), "receipt_id")
	do(anon, "query_facts", `{"query":"kubernetes"}`)
	plan := str(do(alice, "cuecrux_session", `{"intent":"write code"}`), "session_id")
	obs, err := srv.Observe(context.Background(), alice, crux.Observation{SessionID: "s1", Provider: "claude-code",
		Kind: "tool_call", Payload: json.RawMessage(`{"tool":"Bash","command":"go test ./..."}`)})
	require.NoError(t, err)
	_, err = srv.Ingest(context.Background(), crux.DefaultTenant, []crux.Document{
		{ID: "guide/storage.md", Title: "Storage", Text: "crux keeps its facts in a bbolt file.\n\nEvery commit is synced to disk."},
		{ID: "guide/retrieval.md", Title: "Retrieval", Text: "Documents are cut into segments and ranked with BM25."},
	}, nil)
	require.NoError(t, err)
	require.NoError(t, srv.PutEngram(context.Background(), crux.DefaultTenant,
		crux.Engram{Name: "careful-edit", Version: "1", IntentBucket: "code_change", Content: "Read the tests before editing."}))
	do(bob, "issue_passport", `{}`)
	erin := crux.Caller{Agent: "erin", Authenticated: true}
	do(erin, "issue_passport", `{"sponsor_id":"alice"}`)
	do(erin, "store_fact", `{"entity":"project:crux","key":"editor","value":"emacs","private":true}`)
	do(erin, "save_session", `{"session_id":"s1","state":{"erin":true}}`)
	do(olga, "issue_passport", `{}`)
	require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
		return receipttest.Earn(tx, fixtureSigner(), "default", "olga", operatorReceipts, fixtureTime)
	}))
	// olga-old is olga's: split from her passport, then used on its own.
	do(olga, "passport_split", `{"target_passport":"olga","new_passport_name":"olga-old","token_budget":100}`)
	old := crux.Caller{Agent: "olga-old", Authenticated: true}
	do(old, "store_fact", `{"entity":"project:crux","key":"editor","value":"emacs","private":true}`)
	do(old, "save_session", `{"session_id":"s1","state":{"old":true}}`)
	do(olga, "store_fact", `{"entity":"project:crux","key":"editor","value":"nano","private":true}`)
	do(olga, "passport_link_device", `{"device_fingerprint":"`+strings.Repeat("0a", 32)+`","token_budget":100}`)
	return &fixture{replace: strings.NewReplacer(phFact, fact, phPrivate, private, phBobFact, bobFact,
		phArtefact, artefact, phPackage, string(pkg), phPlan, plan, phReceipt, receipt, phObs, obs.ObservationID)}
}

// expand replaces the placeholders in args by the fixture's values.
func (fx *fixture) expand(args string) string { return fx.replace.Replace(args) }

// validCall is a call of one tool that succeeds on the fixture.
type validCall struct {
	caller crux.Caller
	tool   string
	args   string // with placeholders
	// isError: the tool answers every call with an error result (sync
	// without a sync client).
	isError bool
}

// validCalls holds one valid call of every tool, in catalogue order.
var validCalls = []validCall{
	{caller: alice, tool: "cuecrux_session", args: `{"intent":"review code","hints":{"want_parent_chain":true,"max_capabilities":5}}`},
	{caller: alice, tool: "autonomy_contract", args: `{"token_budget":2000}`},
	{caller: alice, tool: "reuse_check", args: `{"tenant_id":"default","description":"rank documents with bm25 segments","limit":3}`},
	{caller: alice, tool: "engram_resolve", args: `{"names":["careful-edit@1"],"model_id":"claude-sonnet-4-5"}`},
	{caller: alice, tool: "query", args: `{"tenant_id":"default","query":"where are facts stored on disk","limit":5,"token_budget":2000}`},
	{caller: alice, tool: "query_scan", args: `{"tenant_id":"default","query":"bm25 segments","limit":5}`},
	{caller: alice, tool: "query_expand", args: `{"tenant_id":"default","result_ids":["0:guide/storage.md","0:guide/retrieval.md"]}`},
	{caller: alice, tool: "store_fact", args: `{"entity":"project:crux","key":"language","value":"Go 1.26","confidence":0.9,"supersedes":["$PRIVATE"]}`},
	{caller: alice, tool: "query_facts", args: `{"query":"crux language","top_k":5,"min_effective_confidence":0.1}`},
	{caller: alice, tool: "delete_fact", args: `{"fact_id":"$FACT"}`},
	{caller: alice, tool: "list_entities", args: `{}`},
	{caller: alice, tool: "get_bootstrap", args: `{"topic":"docs","token_budget":500}`},
	{caller: alice, tool: "fact_history", args: `{"entity":"project:crux","key":"language"}`},
	{caller: alice, tool: "memory_acknowledge_use", args: `{"turn_id":"t1","fact_ids":["$FACT","$PRIVATE"],"intent":"answer","confidence":0.8,"note":"used"}`},
	{caller: alice, tool: "output_attest", args: `{"receipt_id":"$RECEIPT","content_bytes_base64":"aGVsbG8gd29ybGQ=","content_type":"text/plain","claim_generator":"fixture/1","token_budget":10}`},
	{caller: alice, tool: "memory_forget", args: `{"scope":{"type":"entity_prefix","value":"project:"},"reason":"cleanup"}`},
	{caller: alice, tool: "memory_forget_dry_run", args: `{"scope":{"type":"entity_prefix","value":"project:"}}`},
	{caller: alice, tool: "memory_view", args: `{"top_k":10}`},
	{caller: alice, tool: "memory_edit", args: `{"fact_id":"$FACT","new_value":"Go 1.26","reason":"upgrade"}`},
	{caller: alice, tool: "memory_pin", args: `{"fact_id":"$FACT"}`},
	{caller: alice, tool: "memory_history", args: `{"entity":"project:crux","key":"language"}`},
	{caller: alice, tool: "memory_freshness", args: `{"top_k":5}`},
	{caller: alice, tool: "memory_sweep_candidates", args: `{}`},
	{caller: alice, tool: "memory_contradictions", args: `{}`},
	{caller: alice, tool: "memory_consolidate", args: `{"entity":"service:api","key":"cache","canonical_value":"enabled (consolidated)","target_fact_ids":["$BOBFACT"],"confidence":0.8,"consolidation_id":"c-1"}`},
	{caller: alice, tool: "memory_set_horizon", args: `{"fact_id":"$FACT","horizon_class":"stable"}`},
	{caller: alice, tool: "memory_reverify", args: `{"fact_id":"$FACT"}`},
	{caller: alice, tool: "artefact_put", args: `{"content_bytes_base64":"d29ybGQ=","mime_type":"text/plain","ttl_seconds":3600}`},
	{caller: alice, tool: "artefact_get", args: `{"artefact_id":"$ARTEFACT"}`},
	{caller: alice, tool: "artefact_list", args: `{"scope":"text"}`},
	{caller: alice, tool: "get_session", args: `{"session_id":"s1"}`},
	{caller: alice, tool: "save_session", args: `{"session_id":"s3","state":{"step":1,"notes":["a","b"]},"ttl_seconds":3600}`},
	{caller: alice, tool: "session_checkpoint", args: `{"session_id":"s1","token_budget":500,"objective":"port","decisions":["use bbolt"],"next_action":"test"}`},
	{caller: alice, tool: "list_sessions", args: `{"include_archived":true}`},
	{caller: alice, tool: "delete_session", args: `{"session_id":"s1"}`},
	{caller: alice, tool: "archive_session", args: `{"session_id":"s1","reason":"done"}`},
	{caller: alice, tool: "unarchive_session", args: `{"session_id":"s2"}`},
	{caller: alice, tool: "route_access_matrix", args: `{}`},
	{caller: alice, tool: "execplan_gate", args: `{"slug":"issue9","milestone":"m1","status":"passed","commit_sha":"3277c67","token_budget":500,"tests_passing":true,"artifacts":["ci.log"]}`},
	{caller: alice, tool: "auth_posture_audit", args: `{}`},
	{caller: alice, tool: "egress_policy_check", args: `{"target":"https://example.com/api","purpose":"docs"}`},
	{caller: alice, tool: "get_gaps", args: `{}`},
	{caller: alice, tool: "list_observations", args: `{"session_id":"s1","provider":"claude-code","limit":10}`},
	{caller: alice, tool: "get_observation", args: `{"session_id":"s1","observation_id":"$OBS"}`},
	{caller: alice, tool: "verify_observation", args: `{"session_id":"s1","observation_id":"$OBS"}`},
	{caller: alice, tool: "receipt_verify", args: `{"receipt_id":"$RECEIPT"}`},
	{caller: alice, tool: "get_agent_identity", args: `{}`},
	{caller: alice, tool: "resolve_principal", args: `{"session_id":"$PLAN"}`},
	{caller: alice, tool: "create_handoff", args: `{"session_id":"s1","target_agent":"bob","include_facts":true,"message":"over to you","task_record":{"requester":"carol","desired_outcome":"done","sources":["a"],"acceptance_criteria":["tests pass"],"boundaries":["no deletes"],"blocker_rule":"ask"}}`},
	{caller: bob, tool: "accept_handoff", args: `{"package":$PACKAGE}`},
	{caller: alice, tool: "record_decision", args: `{"action":"ship","rationale":"ready","alternatives":["wait"],"context_refs":["$FACT"]}`},
	{caller: alice, tool: "declare_constraint", args: `{"constraint_type":"shell_pattern","assertion":"rm\\s+-rf\\s+/","severity":"critical"}`},
	{caller: alice, tool: "get_constraints", args: `{}`},
	{caller: alice, tool: "check_constraints", args: `{"action_description":"push to main","tool_name":"Bash","tool_parameters":{"command":"git push origin main"}}`},
	{caller: alice, tool: "audit_config", args: `{"path":"cfg/other.yaml","sha256":"` + configSHA + `","auditor":"alice","note":"PR 1"}`},
	{caller: alice, tool: "check_config_audit", args: `{"paths":[{"path":"cfg/app.yaml","sha256":"` + configSHA + `"}]}`},
	{caller: alice, tool: "enrich_action", args: `{"tool_name":"Bash","tool_parameters":{"command":"rm -rf /tmp/x"},"action_description":"clean up"}`},
	{caller: alice, tool: "audit_export_bundle", args: `{"token_budget":2000,"since_ts":"2026-01-01T00:00:00Z","scope":{"entity_prefix":"project:"}}`},
	{caller: alice, tool: "issue_passport", args: `{"sponsor_id":"carol"}`},
	{caller: alice, tool: "request_passport_mint", args: `{"requested_category":"work","reason":"a work account"}`},
	{caller: bob, tool: "get_passport", args: `{}`},
	{caller: alice, tool: "revoke_passport", args: `{"target_passport":"erin","reason":"left the team"}`},
	{caller: olga, tool: "passport_split", args: `{"target_passport":"olga","new_passport_name":"olga-lab","token_budget":500,"reason":"a lab identity"}`},
	{caller: olga, tool: "passport_merge", args: `{"source_passport":"olga-old","target_passport":"olga","conflict_policy":"prefer_target","token_budget":500,"reason":"one identity again"}`},
	{caller: olga, tool: "passport_link_device", args: `{"device_fingerprint":"` + strings.Repeat("5e", 32) + `","token_budget":500,"capabilities_subset":["facts:read","sessions:read"]}`},
	{caller: alice, tool: "sync_pull", args: `{"entity_prefix":"project:"}`, isError: true},
	{caller: alice, tool: "sync_push", args: `{"allowlist":["entity:project:"]}`, isError: true},
	{caller: alice, tool: "sync_status", args: `{}`},
	{caller: alice, tool: "update_status", args: `{}`},
	{caller: alice, tool: "context_custody_audit", args: `{"token_budget":2000}`},
}

// TestValidCallsCoverEveryTool: the table names every tool once, in
// catalogue order, so that a new tool gets a fuzz seed and a
// fault-injection run.
func TestValidCallsCoverEveryTool(t *testing.T) {
	var want, got []string
	for _, tl := range tools.All(nil) {
		want = append(want, tl.Name)
	}
	for _, vc := range validCalls {
		got = append(got, vc.tool)
	}
	require.Equal(t, want, got)
}

// TestValidCalls: each valid call does what the table says on a fresh
// copy of the fixture, and leaves every agent able to read the store.
func TestValidCalls(t *testing.T) {
	srv, swap, fs := fixtureRig(t)
	for _, vc := range validCalls {
		t.Run(vc.tool, func(t *testing.T) {
			swap.set(fs.restore(t))
			res, err := srv.CallTool(context.Background(), vc.caller, vc.tool, json.RawMessage(fs.fx.expand(vc.args)))
			require.NoError(t, err)
			require.Equal(t, vc.isError, res.IsError, "%v", res.Content)
			requireReadable(t, srv)
		})
	}
}

// readers are the callers requireReadable reads as.
var readers = []crux.Caller{alice, bob, anon, {Agent: "carol", Authenticated: true, Tenant: "other"}}

// requireReadable checks that every reader (and extra callers) can still
// query facts and view its memory; a caller whose passport a call revoked
// gets the revocation answer instead, as it should.
func requireReadable(t testing.TB, srv *crux.Server, extra ...crux.Caller) {
	t.Helper()
	for _, c := range slices.Concat(readers, extra) {
		for _, q := range []struct{ tool, args string }{{"query_facts", `{}`}, {"memory_view", `{}`}} {
			res, err := srv.CallTool(context.Background(), c, q.tool, json.RawMessage(q.args))
			if err != nil {
				t.Fatalf("%+v cannot read: %s: %v", c, q.tool, err)
			}
			if res.IsError && !revokedAnswer(c, res) {
				t.Fatalf("%+v cannot read: %s: %v", c, q.tool, res.Content)
			}
		}
	}
}

// revokedAnswer reports whether res is the answer to a call of c refused
// because c's passport is revoked.
func revokedAnswer(c crux.Caller, res *crux.Result) bool {
	return len(res.Content) == 1 && strings.HasPrefix(res.Content[0].Text, "passport "+c.Agent+" was revoked at ")
}

// TestValidCallsRerun: every valid call gives the same answer, and leaves
// the same number of records in each bucket, when each of its transaction
// functions first runs in a transaction that is rolled back, as a backend
// may run it (bbolt's group commit after a failure in the batch,
// PostgreSQL after a serialization failure). So no transaction function
// has an effect outside its transaction.
func TestValidCallsRerun(t *testing.T) {
	tookMS := regexp.MustCompile(`"took_ms":[0-9]+`)
	srv, swap, fs := fixtureRig(t)
	shape := func(f *storetest.Faulty) map[string]int {
		snap, err := f.Snapshot(context.Background())
		require.NoError(t, err)
		out := map[string]int{}
		for b, kv := range snap {
			out[b] = len(kv)
		}
		return out
	}
	for _, vc := range validCalls {
		t.Run(vc.tool, func(t *testing.T) {
			args := json.RawMessage(fs.fx.expand(vc.args))
			once := fs.restore(t)
			swap.set(once)
			want, err := srv.CallTool(context.Background(), vc.caller, vc.tool, args)
			require.NoError(t, err)

			twice := fs.restore(t)
			swap.set(storetest.Twice(twice))
			got, err := srv.CallTool(context.Background(), vc.caller, vc.tool, args)
			require.NoError(t, err)
			require.Equal(t, want.IsError, got.IsError, "%v", got.Content)
			// took_ms measures the call itself: 0 on one run, 15 on a
			// slower one, so its digits are not compared.
			wantText := tookMS.ReplaceAllString(want.Content[0].Text, `"took_ms":0`)
			gotText := tookMS.ReplaceAllString(got.Content[0].Text, `"took_ms":0`)
			assert.Equal(t, len(wantText), len(gotText), "the same answer, ids and times aside:\n%s\n%s", wantText, gotText)
			assert.Equal(t, shape(once), shape(twice), "the same records")
		})
	}
}

// needIdentity names the tools that refuse an anonymous caller outright:
// they act on the caller's own passport or in its name.
var needIdentity = []string{
	"memory_acknowledge_use", "output_attest", "memory_edit", "memory_pin", "memory_consolidate",
	"memory_set_horizon", "memory_reverify", "artefact_put", "receipt_verify",
	"issue_passport", "request_passport_mint", "get_passport", "revoke_passport",
	"passport_split", "passport_merge", "passport_link_device",
}

// TestAnonymousRefusedOneWay: every tool that needs an identity refuses
// an anonymous caller (and a named caller no transport vouched for) with
// the same -32003 requires_identity, and no other answer mentions a
// missing identity: no isError result, no other code.
func TestAnonymousRefusedOneWay(t *testing.T) {
	srv, swap, fs := fixtureRig(t)
	var refused []string
	for _, vc := range validCalls {
		for _, c := range []crux.Caller{anon, {Agent: vc.caller.Agent}} {
			swap.set(fs.restore(t))
			res, err := srv.CallTool(context.Background(), c, vc.tool, json.RawMessage(fs.fx.expand(vc.args)))
			var text string
			var e *crux.Error
			switch {
			case errors.As(err, &e):
				text = e.Message
			case err != nil:
				t.Fatalf("%s as %s: %v", vc.tool, c.Name(), err)
			case res.IsError:
				text = res.Content[0].Text
			}
			mentions := strings.Contains(text, "anonymous") || strings.Contains(text, "authenticated")
			if e != nil && e.Code == crux.CodeForbidden && reasonOf(e) == "requires_identity" {
				assert.Equal(t, map[string]any{"reason": "requires_identity", "tool": vc.tool}, e.Data)
				assert.Equal(t, vc.tool+": needs an authenticated agent identity; anonymous callers are refused ("+tools.IdentityHelp+")", e.Message)
				if c == anon {
					refused = append(refused, vc.tool)
				}
				continue
			}
			assert.False(t, mentions, "%s as %q refuses a missing identity another way: %s", vc.tool, c.Agent, text)
		}
	}
	assert.ElementsMatch(t, needIdentity, refused)
}

// reasonOf is data.reason of e, or "".
func reasonOf(e *crux.Error) string {
	d, _ := e.Data.(map[string]any)
	r, _ := d["reason"].(string)
	return r
}
