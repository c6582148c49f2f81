package tools_test

// A race stress: 64 goroutines, as several agents of two tenants, make
// mixed calls through crux.Server.CallTool for a fixed time. Every answer
// is searched for the markers of what the caller must not see (other
// agents' private facts and sessions, the other tenant's facts); afterwards
// every version chain must be intact, list_entities must agree with the
// chains, and each tenant's receipt chain must hold exactly the receipts
// the calls were given, and verify.
//
// CRUXTEST_STRESS_DURATION (a Go duration) runs it longer than its default
// budget; CRUXTEST_SEED replays a seed (the interleaving still differs).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// stressAgent is one caller of the stress and the markers of what only it
// may see.
type stressAgent struct {
	crux.Caller
	priv   string // in its private values and private entity names; "" when anonymous
	sess   string // in its session ids and states; "" when anonymous
	tenant string // in every value it writes: its tenant's marker
}

var stressAgents = []stressAgent{
	{Caller: crux.Caller{Agent: "alice", Authenticated: true}, priv: "privalice", sess: "sessalice", tenant: "tenantdefault"},
	{Caller: crux.Caller{Agent: "bob", Authenticated: true}, priv: "privbob", sess: "sessbob", tenant: "tenantdefault"},
	{Caller: crux.Caller{Agent: "carol", Authenticated: true}, priv: "privcarol", sess: "sesscarol", tenant: "tenantdefault"},
	{Caller: crux.Caller{Agent: "dave", Authenticated: true}, priv: "privdave", sess: "sessdave", tenant: "tenantdefault"},
	{Caller: crux.Caller{}, tenant: "tenantdefault"}, // anonymous: the shared pool only
	{Caller: crux.Caller{Agent: "erin", Authenticated: true, Tenant: "t2"}, priv: "priverin", sess: "sesserin", tenant: "tenanttwo"},
}

// forbidden are the markers a must never see.
func (a stressAgent) forbidden() []string {
	var out []string
	for _, b := range stressAgents {
		if b.Caller == a.Caller {
			continue
		}
		if b.priv != "" {
			out = append(out, b.priv, b.sess)
		}
		if b.TenantID() != a.TenantID() {
			out = append(out, b.tenant)
		}
	}
	return out
}

// The (entity, key) pairs the stress writes: shared entities every agent
// of a tenant writes, and each agent's private-only entity.
const (
	stressEntities = 6
	stressKeys     = 3
)

func stressEntity(i int) string { return "stress:e" + strconv.Itoa(i) }

func stressKey(i int) string { return "k" + strconv.Itoa(i) }

func (a stressAgent) privateEntity() string { return a.priv + ":notes" }

// stressRun is the state the goroutines share.
type stressRun struct {
	t        *testing.T
	srv      *crux.Server
	failures atomic.Int64
	calls    atomic.Int64
	refused  atomic.Int64 // refusals the contention explains (a supersedes of a retired fact, an edit of a stale version, ...)
	created  sync.Map     // every fact id a call created
	mu       sync.Mutex
	receipts map[string][]string // tenant → the receipt ids calls returned
	byTool   map[string]int
}

// fail records a failure; the run stops after a few.
func (r *stressRun) fail(format string, args ...any) {
	if r.failures.Add(1) <= 20 {
		r.t.Errorf(format, args...)
	}
}

// call runs one tool as a and checks the answer for what a must not see.
// It returns the structured content of a successful result, the result
// and the protocol error, if any.
func (r *stressRun) call(a stressAgent, name string, args map[string]any) (map[string]any, *crux.Result, *crux.Error) {
	r.calls.Add(1)
	b, err := json.Marshal(args)
	if err != nil {
		r.fail("%s: %v", name, err)
		return nil, nil, nil
	}
	res, err := r.srv.CallTool(context.Background(), a.Caller, name, b)
	var text strings.Builder
	var ce *crux.Error
	if err != nil {
		if !errors.As(err, &ce) {
			r.fail("%s as %s: %v is not a *crux.Error", name, a.Name(), err)
			return nil, nil, nil
		}
		data, _ := json.Marshal(ce.Data)
		text.WriteString(ce.Message)
		text.Write(data)
	} else {
		all, _ := json.Marshal(res)
		text.Write(all)
	}
	for _, m := range a.forbidden() {
		if i := strings.Index(text.String(), m); i >= 0 {
			s := text.String()
			r.fail("LEAK: %s(%s) as %s (tenant %s) answered with %q: ...%s...", name, b, a.Name(), a.TenantID(), m,
				s[max(0, i-200):min(len(s), i+200)])
		}
	}
	r.mu.Lock()
	r.byTool[name]++
	r.mu.Unlock()
	if err != nil {
		return nil, nil, ce
	}
	var sc map[string]any
	if !res.IsError {
		all, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(all, &sc); err != nil {
			r.fail("%s: structured content: %v", name, err)
		}
	}
	return sc, res, nil
}

// refusal accepts a refusal the contention of the run explains, and fails
// on any other error.
func (r *stressRun) refusal(a stressAgent, name string, args map[string]any, res *crux.Result, ce *crux.Error, ok func(*crux.Result, *crux.Error) bool) {
	switch {
	case ce == nil && (res == nil || !res.IsError):
		return
	case ok != nil && ok(res, ce):
		r.refused.Add(1)
	case ce != nil:
		r.fail("%s(%v) as %s: error %d %s", name, args, a.Name(), ce.Code, ce.Message)
	default:
		r.fail("%s(%v) as %s: isError %+v", name, args, a.Name(), res.Content)
	}
}

func (r *stressRun) receipt(tenant string, sc map[string]any) {
	id, _ := sc["receipt_id"].(string)
	if id == "" {
		r.fail("no receipt_id in %v", sc)
		return
	}
	r.mu.Lock()
	r.receipts[tenant] = append(r.receipts[tenant], id)
	r.mu.Unlock()
}

// stressWorker is one goroutine's memory: fact ids it has seen, which are
// visible to its agent and so fair targets for its writes.
type stressWorker struct {
	a    stressAgent
	rng  *rand.Rand
	seen []string
	n    int
}

func (w *stressWorker) see(id string) {
	if id == "" {
		return
	}
	if len(w.seen) < 32 {
		w.seen = append(w.seen, id)
		return
	}
	w.seen[w.rng.IntN(len(w.seen))] = id
}

func (w *stressWorker) seenID() (string, bool) {
	if len(w.seen) == 0 {
		return "", false
	}
	return w.seen[w.rng.IntN(len(w.seen))], true
}

// seeRows remembers the ids of the rows under field, each under idField.
func (w *stressWorker) seeRows(sc map[string]any, field, idField string) {
	rows, _ := sc[field].([]any)
	for _, row := range rows {
		if m, ok := row.(map[string]any); ok {
			id, _ := m[idField].(string)
			w.see(id)
		}
	}
}

// isParam accepts a -32602 naming param.
func isParam(param string) func(*crux.Result, *crux.Error) bool {
	return func(_ *crux.Result, ce *crux.Error) bool {
		return ce != nil && ce.Code == crux.CodeInvalidParams && strings.Contains(ce.Message, ": "+param+": ")
	}
}

// staleOrDeleted accepts what a memory tool answers for a fact that another
// goroutine superseded or deleted meanwhile, and the anonymous refusal.
func staleOrDeleted(anonymous bool) func(*crux.Result, *crux.Error) bool {
	return func(res *crux.Result, ce *crux.Error) bool {
		if ce != nil {
			return ce.Code == crux.CodeConflict || anonymous && ce.Code == crux.CodeForbidden && strings.Contains(ce.Message, "authenticated")
		}
		return strings.Contains(res.Content[0].Text, "is deleted")
	}
}

// step makes one random call.
func (r *stressRun) step(w *stressWorker) {
	a, rng := w.a, w.rng
	w.n++
	entity, key := stressEntity(rng.IntN(stressEntities)), stressKey(rng.IntN(stressKeys))
	anonymous := a.Identity() == ""
	var (
		name string
		args map[string]any
		sc   map[string]any
		res  *crux.Result
		ce   *crux.Error
	)
	do := func(n string, as map[string]any) {
		name, args = n, as
		sc, res, ce = r.call(a, name, args)
	}
	switch p := rng.IntN(100); {
	case p < 22 || p < 34 && anonymous: // a shared fact, sometimes retiring one seen
		args := map[string]any{"entity": entity, "key": key, "value": fmt.Sprintf("%s shared %d", a.tenant, w.n)}
		if id, ok := w.seenID(); ok && rng.IntN(3) == 0 {
			args["supersedes"] = []string{id}
		}
		do("store_fact", args)
		r.refusal(a, name, args, res, ce, isParam("supersedes"))
		if sc != nil {
			id, _ := sc["fact_id"].(string)
			r.created.Store(id, true)
			w.see(id)
		}
	case p < 34: // a private fact, on a shared entity's name or on its own
		if rng.IntN(3) == 0 {
			entity = a.privateEntity()
		}
		args := map[string]any{"entity": entity, "key": key, "value": fmt.Sprintf("%s %s %d", a.priv, a.tenant, w.n), "private": true}
		if id, ok := w.seenID(); ok && rng.IntN(3) == 0 {
			args["supersedes"] = []string{id}
		}
		do("store_fact", args)
		r.refusal(a, name, args, res, ce, isParam("supersedes"))
		if sc != nil {
			id, _ := sc["fact_id"].(string)
			r.created.Store(id, true)
			w.see(id)
		}
	case p < 44: // queries, some of them probing for others' markers
		args := map[string]any{}
		switch rng.IntN(5) {
		case 0:
			args["entity"] = entity
		case 1:
			args["entity_prefix"] = "stress:"
			args["key"] = key
			args["top_k"] = 50
		case 2:
			probe := stressAgents[rng.IntN(len(stressAgents))]
			args["query"] = probe.priv + " " + probe.tenant + " " + probe.sess
		case 3:
			args["query"] = "shared"
			args["include_superseded"] = true
		default:
			args["top_k"] = 100
		}
		do("query_facts", args)
		r.refusal(a, name, args, res, ce, nil)
		w.seeRows(sc, "rows", "fact_id")
	case p < 50:
		args := map[string]any{"top_k": 50, "token_budget": 100000}
		if rng.IntN(2) == 0 {
			args["entity"] = entity
		}
		do("memory_view", args)
		r.refusal(a, name, args, res, ce, nil)
		w.seeRows(sc, "facts", "id")
	case p < 55:
		do("fact_history", map[string]any{"entity": entity, "key": key})
		r.refusal(a, name, args, res, ce, nil)
	case p < 60:
		do("memory_history", map[string]any{"entity": entity, "key": key})
		r.refusal(a, name, args, res, ce, nil)
	case p < 66:
		id, ok := w.seenID()
		if !ok {
			return
		}
		do("delete_fact", map[string]any{"fact_id": id})
		r.refusal(a, name, args, res, ce, staleOrDeleted(anonymous)) // superseded meanwhile: -32004
	case p < 71:
		id, ok := w.seenID()
		if !ok {
			return
		}
		do("memory_pin", map[string]any{"fact_id": id, "pinned": rng.IntN(3) > 0})
		r.refusal(a, name, args, res, ce, staleOrDeleted(anonymous))
	case p < 75:
		id, ok := w.seenID()
		if !ok {
			return
		}
		do("memory_edit", map[string]any{"fact_id": id, "new_value": fmt.Sprintf("%s edited %d", a.tenant, w.n), "reason": "stress"})
		r.refusal(a, name, args, res, ce, staleOrDeleted(anonymous))
		if sc != nil {
			nf, _ := sc["new_fact"].(map[string]any)
			id, _ := nf["id"].(string)
			r.created.Store(id, true)
			w.see(id)
		}
	case p < 78:
		id, ok := w.seenID()
		if !ok {
			return
		}
		do("memory_reverify", map[string]any{"fact_id": id})
		r.refusal(a, name, args, res, ce, staleOrDeleted(anonymous))
		if sc != nil {
			r.receipt(a.TenantID(), sc)
		}
	case p < 81:
		scope := map[string]any{"type": "entity_prefix", "value": "stress:"}
		if rng.IntN(2) == 0 {
			scope = map[string]any{"type": "key_glob", "value": key}
		}
		do("memory_forget_dry_run", map[string]any{"scope": scope, "include_pinned": rng.IntN(2) == 0})
		r.refusal(a, name, args, res, ce, nil)
	case p < 89 && !anonymous: // sessions
		id := fmt.Sprintf("%s-%d", a.sess, rng.IntN(3))
		switch rng.IntN(5) {
		case 0, 1:
			do("save_session", map[string]any{"session_id": id, "state": map[string]any{"title": a.sess, "n": w.n}})
			r.refusal(a, name, args, res, ce, nil)
		case 2:
			do("get_session", map[string]any{"session_id": id})
			r.refusal(a, name, args, res, ce, func(res *crux.Result, ce *crux.Error) bool {
				return ce == nil && strings.Contains(res.Content[0].Text, "not found")
			})
		case 3:
			do("list_sessions", map[string]any{"include_archived": true})
			r.refusal(a, name, args, res, ce, nil)
		default:
			do("session_checkpoint", map[string]any{"session_id": id, "token_budget": 500, "objective": a.sess, "next_action": "continue"})
			r.refusal(a, name, args, res, ce, nil)
		}
	case p < 93:
		do("record_decision", map[string]any{"action": fmt.Sprintf("decision %d", w.n), "rationale": "stress", "session_id": "stress"})
		r.refusal(a, name, args, res, ce, nil)
		if sc != nil {
			r.receipt(a.TenantID(), sc)
		}
	default:
		do("list_entities", map[string]any{})
		r.refusal(a, name, args, res, ce, nil)
	}
}

// chainVersion is one row of fact_history.
type chainVersion struct {
	FactID       string `json:"fact_id"`
	Value        string `json:"value"`
	Version      uint32 `json:"version"`
	Supersedes   string `json:"supersedes"`
	SupersededBy string `json:"superseded_by"`
	Deleted      bool   `json:"deleted"`
	Private      bool   `json:"private"`
}

// checkChain checks one version chain, oldest first: versions 1..n, each
// link to the previous version consistent in both directions, and no
// version current but possibly the last. It reports whether the chain has a
// current version.
func checkChain(t *testing.T, r *stressRun, what string, vs []chainVersion) bool {
	t.Helper()
	current := false
	for i, v := range vs {
		assert.Equal(t, uint32(i+1), v.Version, "%s: versions are 1..n", what)
		if i > 0 {
			prev := vs[i-1]
			if v.Supersedes != "" {
				assert.Equal(t, prev.FactID, v.Supersedes, "%s v%d supersedes the version before it", what, v.Version)
				assert.Equal(t, v.FactID, prev.SupersededBy, "%s v%d is superseded by the version after it", what, prev.Version)
			}
		}
		if v.SupersededBy != "" {
			_, ok := r.created.Load(v.SupersededBy)
			assert.True(t, ok, "%s v%d is superseded by %s, which no call created", what, v.Version, v.SupersededBy)
		}
		if v.SupersededBy == "" && !v.Deleted {
			assert.Equal(t, len(vs)-1, i, "%s: v%d of %d is current", what, v.Version, len(vs))
			current = true
		}
	}
	return current
}

func TestConcurrentMixedCallsKeepChainsPrivacyAndReceipts(t *testing.T) {
	budget := 20 * time.Second
	if v := os.Getenv("CRUXTEST_STRESS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "CRUXTEST_STRESS_DURATION")
		budget = d
	}
	if testing.Short() {
		budget = 2 * time.Second
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CRUXTEST_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CRUXTEST_SEED")
	}
	t.Logf("seed %d (CRUXTEST_SEED=%d replays it)", seed, seed)

	// A clock that moves on, so that times differ as they would.
	clk := &clock{t: start}
	srv, _, db := newTestServer(t, withClock(clk))
	stopClock := make(chan struct{})
	var clockDone sync.WaitGroup
	clockDone.Go(func() {
		for {
			select {
			case <-stopClock:
				return
			case <-time.After(time.Millisecond):
				clk.Advance(time.Second)
			}
		}
	})

	r := &stressRun{t: t, srv: srv, receipts: map[string][]string{}, byTool: map[string]int{}}
	const goroutines = 64
	began := time.Now()
	deadline := began.Add(budget)
	var wg sync.WaitGroup
	for g := range goroutines {
		w := &stressWorker{a: stressAgents[g%len(stressAgents)], rng: rand.New(rand.NewPCG(seed, uint64(g)))}
		wg.Go(func() {
			for time.Now().Before(deadline) && r.failures.Load() == 0 {
				r.step(w)
			}
		})
	}
	wg.Wait()
	close(stopClock)
	clockDone.Wait()
	t.Logf("%d calls in %s by %d goroutines (%d refusals explained by contention); per tool: %v",
		r.calls.Load(), time.Since(began).Round(time.Millisecond), goroutines, r.refused.Load(), r.byTool)
	require.Zero(t, r.failures.Load(), "failures during the run")

	// Every chain each agent sees, shared and private: intact, and the
	// entities holding a current fact are those list_entities lists.
	chains := 0
	for _, a := range stressAgents {
		var entities []string
		for i := range stressEntities {
			entities = append(entities, stressEntity(i))
		}
		if a.priv != "" {
			entities = append(entities, a.privateEntity())
		}
		withCurrent := map[string]bool{}
		for _, e := range entities {
			for k := range stressKeys {
				var h struct {
					Versions   []chainVersion `json:"versions"`
					NextCursor string         `json:"next_cursor"`
				}
				for cursor := ""; ; cursor = h.NextCursor { // every page, newest first
					args := map[string]any{"entity": e, "key": stressKey(k), "limit": 1000}
					if cursor != "" {
						args["cursor"] = cursor
					}
					sc, _, ce := r.call(a, "fact_history", args)
					require.Nil(t, ce)
					var page struct {
						Versions   []chainVersion `json:"versions"`
						NextCursor string         `json:"next_cursor"`
					}
					decode(t, sc, &page)
					h.Versions, h.NextCursor = append(h.Versions, page.Versions...), page.NextCursor
					if h.NextCursor == "" {
						break
					}
				}
				var shared, private []chainVersion
				for _, v := range h.Versions {
					if v.Private {
						private = append(private, v)
					} else {
						shared = append(shared, v)
					}
				}
				var current []string
				for _, vs := range [][]chainVersion{shared, private} {
					slices.SortFunc(vs, func(x, y chainVersion) int { return int(x.Version) - int(y.Version) })
					what := fmt.Sprintf("%s sees (%s, %s) %s", a.Name(), e, stressKey(k), map[bool]string{true: "private", false: "shared"}[len(vs) > 0 && vs[0].Private])
					if checkChain(t, r, what, vs) {
						withCurrent[e] = true
						current = append(current, vs[len(vs)-1].FactID)
					}
					if len(vs) > 0 {
						chains++
					}
				}
				// The query indexes agree with the chains: a query of the
				// pair finds exactly its current versions.
				sc, _, ce := r.call(a, "query_facts", map[string]any{"entity": e, "key": stressKey(k), "top_k": 1000})
				require.Nil(t, ce)
				var found []string
				for _, row := range rows(t, sc) {
					found = append(found, row["fact_id"].(string))
				}
				assert.ElementsMatch(t, current, found, "query_facts (%s, %s) as %s", e, stressKey(k), a.Name())
			}
		}
		sc, _, ce := r.call(a, "list_entities", map[string]any{})
		require.Nil(t, ce)
		var listed []string
		for _, e := range sc["entities"].([]any) {
			if s := e.(string); strings.HasPrefix(s, "stress:") || strings.HasPrefix(s, "priv") {
				listed = append(listed, s)
			}
		}
		var want []string
		for e := range withCurrent {
			want = append(want, e)
		}
		assert.ElementsMatch(t, want, listed, "list_entities as %s", a.Name())
	}
	require.Zero(t, r.failures.Load(), "leaks while checking the chains")

	// Each tenant's receipt chain links, verifies, and holds exactly the
	// receipts the calls returned.
	kr := srv.Keyring()
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		for _, tenant := range []string{crux.DefaultTenant, "t2"} {
			if err := receipts.VerifyStoredChain(tx, tenant); err != nil {
				return err
			}
			var inChain []string
			err := receipts.Chain(tx, tenant, 0, func(rc *receipts.Receipt) error {
				if rep := receipts.Verify(rc, kr, time.Now()); !rep.OK() {
					return fmt.Errorf("receipt %s: %s: %s", rc.ID, rep.ErrorCode, rep.ErrorMessage)
				}
				inChain = append(inChain, rc.ID)
				return nil
			})
			if err != nil {
				return err
			}
			assert.ElementsMatch(t, r.receipts[tenant], inChain, "tenant %s: the chain holds the receipts the calls returned, once each", tenant)
		}
		return nil
	}))

	// The file passes bbolt's own consistency check.
	require.NoError(t, srv.Close())
	require.NoError(t, db.Close())
	bdb, err := bbolt.Open(db.Path(), 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer bdb.Close()
	require.NoError(t, bdb.View(func(tx *bbolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}))
	t.Logf("%d version chains intact; %d receipts in tenant default, %d in t2, all verified",
		chains, len(r.receipts[crux.DefaultTenant]), len(r.receipts["t2"]))
}
