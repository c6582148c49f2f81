//go:build unix

package main

// Crash cycles: crux serve and crux purge are SIGKILLed at random moments,
// over and over, on one data directory. After every kill the store must
// hold every write whose reply reached the client, pass bbolt's consistency
// check, and keep a receipt chain that verifies.
//
// The tests run for a fixed time budget (and at least a fixed number of
// cycles); CRUXTEST_STRESS_DURATION (a Go duration) runs them longer, and
// CRUXTEST_SEED replays a seed (the timing still differs from run to run).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// stressBudget is how long a crash test runs: def, or
// $CRUXTEST_STRESS_DURATION when it is set (an opt-in for longer runs).
func stressBudget(t *testing.T, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv("CRUXTEST_STRESS_DURATION")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "CRUXTEST_STRESS_DURATION")
	return d
}

// stressRand returns a random source seeded from $CRUXTEST_SEED or the
// clock, logging the seed.
func stressRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CRUXTEST_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CRUXTEST_SEED")
	}
	t.Logf("seed %d (CRUXTEST_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// crashAgent is the agent every crash-test process serves.
const crashAgent = "tester"

// crashScope is the scope crashAgent reads in.
var crashScope = store.Scope{Tenant: crux.DefaultTenant, Agent: crashAgent}

// acked is one acknowledged write: a fact (entity, key, value, id), or a
// decision (its receipt).
type acked struct {
	entity, key, value, factID string
	receiptID                  string // a decision's receipt; empty for a plain fact
}

// ackLog records what the clients sent and which writes were acknowledged:
// a write counts only once its reply has arrived.
type ackLog struct {
	mu      sync.Mutex
	sent    int
	acks    []acked
	inDoubt int // sent, and no reply before the kill: either outcome is allowed
}

func (l *ackLog) send() {
	l.mu.Lock()
	l.sent++
	l.mu.Unlock()
}

func (l *ackLog) ack(a acked) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
}

func (l *ackLog) doubt() {
	l.mu.Lock()
	l.inDoubt++
	l.mu.Unlock()
}

func (l *ackLog) snapshot() []acked {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]acked(nil), l.acks...)
}

// crashChains is the number of (entity, key) chains the writers extend
// concurrently, so that versions pile up across kills.
const crashChains = 4

// crashWrite is write number n: its tool, its arguments, and what an
// acknowledgement of it records (the ids come from the reply).
func crashWrite(n int64) (string, map[string]any, acked) {
	switch {
	case n%10 == 9: // a decision: a signed receipt in the chain
		return "record_decision", map[string]any{
			"action": fmt.Sprintf("decision-%d", n), "rationale": "crash test", "session_id": "crash",
		}, acked{}
	case n%5 == 3: // a new version of a shared chain
		a := acked{entity: fmt.Sprintf("crash:chain:%d", n%crashChains), key: "counter", value: fmt.Sprintf("count-%d", n)}
		return "store_fact", map[string]any{"entity": a.entity, "key": a.key, "value": a.value}, a
	case n%7 == 5: // a private fact
		a := acked{entity: fmt.Sprintf("crash:private:%d", n), key: "k", value: fmt.Sprintf("private-%d", n)}
		return "store_fact", map[string]any{"entity": a.entity, "key": a.key, "value": a.value, "private": true}, a
	default: // a fact of its own (entity, key)
		a := acked{entity: fmt.Sprintf("crash:%d", n), key: "k", value: fmt.Sprintf("value-%d", n)}
		return "store_fact", map[string]any{"entity": a.entity, "key": a.key, "value": a.value}, a
	}
}

// crashCycle starts crux serve on dir, runs inflight writers through one
// MCP session, SIGKILLs the process after killAfter, and waits for it to
// die. It returns the number of writes acknowledged in the cycle.
func crashCycle(t *testing.T, ctx context.Context, dir string, inflight int, killAfter time.Duration, next *atomic.Int64, log *ackLog) int {
	t.Helper()
	var stderr syncBuffer
	cmd := exec.Command(cruxBinary(t), "serve", "--data", dir, "--agent", crashAgent)
	cmd.Env = subprocessEnv()
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "crash", Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	require.NoError(t, err, "stderr: %s", stderr.String())

	var killed atomic.Bool
	var acks atomic.Int64
	var wg sync.WaitGroup
	for range inflight {
		wg.Go(func() {
			for !killed.Load() {
				n := next.Add(1)
				name, args, a := crashWrite(n)
				log.send()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					if killed.Load() {
						log.doubt() // no reply: the kill took it
						return
					}
					t.Errorf("%s #%d failed before the kill: %v\nstderr: %s", name, n, err, stderr.String())
					return
				}
				if res.IsError {
					t.Errorf("%s #%d: %+v", name, n, res.Content)
					return
				}
				sc, _ := res.StructuredContent.(map[string]any)
				if name == "record_decision" {
					a.receiptID, _ = sc["receipt_id"].(string)
					a.factID, _ = sc["fact_id"].(string)
				} else {
					a.factID, _ = sc["fact_id"].(string)
				}
				if a.factID == "" {
					t.Errorf("%s #%d: no fact_id in %v", name, n, sc)
					return
				}
				log.ack(a)
				acks.Add(1)
			}
		})
	}
	time.Sleep(killAfter)
	killed.Store(true)
	require.NoError(t, cmd.Process.Kill())
	wg.Wait()
	_ = cs.Close() // waits for the process; its error is the kill
	require.NotNil(t, cmd.ProcessState, "the process was not waited for")
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"crux serve ended on its own (%s) before the kill; stderr: %s", cmd.ProcessState, stderr.String())
	return int(acks.Load())
}

// checkFile runs bbolt's consistency check on the database of dir and
// reads every key and value of every bucket.
func checkFile(t *testing.T, dir string) {
	t.Helper()
	bdb, err := bbolt.Open(filepath.Join(dir, dbFile), 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer bdb.Close()
	require.NoError(t, bdb.View(func(tx *bbolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("bbolt check: %w", errors.Join(errs...))
		}
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			return readBucket(b)
		})
	}))
}

// readBucket reads every key and value of b and of its nested buckets.
func readBucket(b *bbolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				return readBucket(nb)
			}
		}
		_ = append([]byte(nil), v...)
		return nil
	})
}

// checkStore checks the store of dir after a kill: it opens it read-write
// once, which applies its write-ahead log, then checks the file and,
// opened read-only, the store: every acknowledged write is there, found by
// its (entity, key), and every tenant's receipt chain links and verifies
// with the data directory's key.
func checkStore(t *testing.T, dir string, acks []acked) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, dbFile), &bolt.Options{LockTimeout: 5 * time.Second})
	require.NoError(t, err, "recover")
	require.NoError(t, db.Close())
	checkFile(t, dir)
	signer, err := receipts.LoadOrCreateKey(dir)
	require.NoError(t, err)
	kr := receipts.NewKeyring(signer.Public())

	db, err = bolt.Open(filepath.Join(dir, dbFile), &bolt.Options{ReadOnly: true, LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var lost []string
		for _, a := range acks {
			if a.receiptID != "" {
				if _, err := receipts.Get(tx, a.receiptID); err != nil {
					lost = append(lost, fmt.Sprintf("decision receipt %s: %v", a.receiptID, err))
				}
				continue
			}
			hist, err := store.History(tx, crashScope, a.entity, a.key)
			if err != nil {
				return err
			}
			found := false
			for _, f := range hist {
				found = found || f.ID == a.factID && f.Value == a.value
			}
			if !found {
				lost = append(lost, fmt.Sprintf("fact %s (%s, %s) = %q", a.factID, a.entity, a.key, a.value))
			}
		}
		if len(lost) > 0 {
			return fmt.Errorf("%d acknowledged writes lost, first: %s", len(lost), lost[0])
		}
		if err := receipts.VerifyStoredChain(tx, crux.DefaultTenant); err != nil {
			return err
		}
		return receipts.Chain(tx, crux.DefaultTenant, 0, func(r *receipts.Receipt) error {
			if rep := receipts.Verify(r, kr, time.Now()); !rep.OK() {
				return fmt.Errorf("receipt %s (seq %d): %s: %s", r.ID, r.Seq, rep.ErrorCode, rep.ErrorMessage)
			}
			return nil
		})
	}))
}

func TestCrashCyclesKeepAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("crash cycles take tens of seconds")
	}
	const minCycles = 20
	budget := stressBudget(t, 30*time.Second)
	rng := stressRand(t)
	ctx, cancel := context.WithTimeout(context.Background(), budget+5*time.Minute)
	defer cancel()
	cruxBinary(t) // build before the clock starts
	dir := t.TempDir()

	var log ackLog
	var next atomic.Int64
	began := time.Now()
	cycles := 0
	for ; cycles < minCycles || time.Since(began) < budget; cycles++ {
		inflight := 1
		if cycles%2 == 1 {
			inflight = 32
		}
		killAfter := time.Duration(10+rng.IntN(400)) * time.Millisecond
		n := crashCycle(t, ctx, dir, inflight, killAfter, &next, &log)
		if t.Failed() {
			t.FailNow()
		}
		checkStore(t, dir, log.snapshot())
		if t.Failed() {
			t.Fatalf("after cycle %d (%d in flight, killed after %s, %d acknowledged in it)", cycles, inflight, killAfter, n)
		}
	}
	acks := log.snapshot()
	t.Logf("%d crash cycles in %s: %d writes sent, %d acknowledged, 0 lost, %d without a reply when killed",
		cycles, time.Since(began).Round(time.Millisecond), log.sent, len(acks), log.inDoubt)
	require.Greater(t, len(acks), cycles, "too few writes were acknowledged for the test to mean anything")

	// A clean restart serves every acknowledged write, and the version
	// chains the writers extended across kills are intact.
	verifyBegan := time.Now()
	defer func() {
		t.Logf("verified through a restarted crux serve in %s", time.Since(verifyBegan).Round(time.Millisecond))
	}()
	var stderr syncBuffer
	cs, _ := startServe(t, ctx, dir, &stderr)
	defer func() { assert.NoError(t, cs.Close(), "stderr: %s", stderr.String()) }()
	// Every write was found in-process after every kill; through MCP, a
	// random sample.
	sample := 0
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, i := range rng.Perm(len(acks)) {
		a := acks[i]
		if a.receiptID != "" {
			continue
		}
		if sample++; sample > 200 {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			found := false
			for _, v := range historyOf(t, ctx, cs, a.entity, a.key) {
				found = found || v.FactID == a.factID
			}
			assert.True(t, found, "%s/%s has %s", a.entity, a.key, a.factID)
		})
	}
	wg.Wait()
	for i := range crashChains {
		vs := historyOf(t, ctx, cs, fmt.Sprintf("crash:chain:%d", i), "counter")
		slices.Reverse(vs) // fact_history lists newest first
		current := 0
		for j, v := range vs {
			assert.Equal(t, uint32(j+1), v.Version, "chain %d: versions are consecutive", i)
			if j > 0 {
				assert.Equal(t, vs[j-1].FactID, v.Supersedes, "chain %d v%d", i, v.Version)
				assert.Equal(t, v.FactID, vs[j-1].SupersededBy, "chain %d v%d", i, v.Version-1)
			}
			if v.SupersededBy == "" && !v.Deleted {
				current++
			}
		}
		if len(vs) > 0 {
			assert.Equal(t, 1, current, "chain %d has exactly one current version", i)
		}
	}
}

// structuredJSON is the structured content of an MCP result, as JSON.
func structuredJSON(t *testing.T, res *mcp.CallToolResult) []byte {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	return b
}

// forgetPast stores a secret and bulk facts under entity prefix in dir's
// store, and forgets them, all ten days ago, so that the forget's recovery
// window has ended now. It also stores one fact that stays, returned as
// acknowledged. It returns the forget receipt id.
func forgetPast(t *testing.T, dir, prefix, secret string, bulk int) (string, acked) {
	t.Helper()
	// NoSync: a SIGKILL loses nothing the kernel has, and this setup is
	// not what the test kills.
	srv, closeAll := serverInThePast(t, dir, &bolt.Options{LockTimeout: 5 * time.Second, NoSync: true})
	defer closeAll()
	ctx := context.Background()
	caller := crux.Caller{Agent: crashAgent, Authenticated: true}
	callOK := func(name string, args map[string]any) map[string]any {
		b, err := json.Marshal(args)
		require.NoError(t, err)
		res, err := srv.CallTool(ctx, caller, name, b)
		require.NoError(t, err, name)
		require.False(t, res.IsError, "%s: %+v", name, res.Content)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &out))
		return out
	}
	callOK("store_fact", map[string]any{"entity": prefix + ":vault", "key": "code", "value": secret})
	pad := strings.Repeat("x", 128<<10) // one word, 128 KiB
	for i := range bulk {
		callOK("store_fact", map[string]any{"entity": fmt.Sprintf("%s:bulk:%d", prefix, i), "key": "k", "value": pad})
	}
	out := callOK("memory_forget", map[string]any{"scope": map[string]any{"type": "entity_prefix", "value": prefix + ":"}, "reason": "crash test"})
	keep := acked{entity: "kept:" + prefix, key: "k", value: "kept-" + prefix}
	keep.factID = callOK("store_fact", map[string]any{"entity": keep.entity, "key": keep.key, "value": keep.value})["fact_id"].(string)
	return out["forget_receipt_id"].(string), keep
}

// ballast writes n bytes of live data into a bucket of its own in the new
// store of dir, so that every compaction has that much to copy and a kill
// lands in it more often.
func ballast(t *testing.T, dir string, n int) {
	t.Helper()
	bdb, err := bbolt.Open(filepath.Join(dir, dbFile), 0o600, &bbolt.Options{NoSync: true})
	require.NoError(t, err)
	chunk := make([]byte, 64<<10)
	require.NoError(t, bdb.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("crashtest.ballast"))
		if err != nil {
			return err
		}
		for i := 0; i*len(chunk) < n; i++ {
			for j := range chunk {
				chunk[j] = byte(i + j*7)
			}
			if err := b.Put(fmt.Appendf(nil, "%08d", i), chunk); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, bdb.Close())
}

// forgetState reads the state and purge receipt of forget id, read-only.
func forgetState(t *testing.T, dir, id string) (state, purgeReceipt string) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, dbFile), &bolt.Options{ReadOnly: true, LockTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		rec, err := store.GetForget(tx, id)
		if err != nil {
			return err
		}
		state, purgeReceipt = rec.State, rec.PurgeReceipt
		if rec.State == store.ForgetPurged {
			if _, err := receipts.Get(tx, rec.PurgeReceipt); err != nil {
				return fmt.Errorf("forget %s is purged, but its purge receipt %s: %w", id, rec.PurgeReceipt, err)
			}
		}
		return nil
	}))
	return state, purgeReceipt
}

func TestCrashDuringPurgeKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("crash cycles take tens of seconds")
	}
	const minCycles = 10
	budget := stressBudget(t, 20*time.Second)
	rng := stressRand(t)
	bin := cruxBinary(t)
	dir := t.TempDir()
	ballast(t, dir, 16<<20)

	var keep []acked
	var forgets []string
	secrets := map[string]string{} // forget id → its secret
	maxKill := 300 * time.Millisecond
	var inCompaction, completed, purgedSeen int
	began := time.Now()
	cycles := 0
	for ; cycles < minCycles || time.Since(began) < budget; cycles++ {
		secret := fmt.Sprintf("purge-secret-%d-%x", cycles, rng.Uint64())
		id, k := forgetPast(t, dir, fmt.Sprintf("p%d", cycles), secret, 8)
		forgets, secrets[id] = append(forgets, id), secret
		keep = append(keep, k)

		// Opening the store purges what is due: crux purge, or a crux
		// serve being started (its stdin stays open, so it runs until killed).
		args := []string{"purge", "--data", dir}
		if cycles%3 == 2 {
			args = []string{"serve", "--data", dir, "--agent", crashAgent}
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = subprocessEnv()
		var stderr syncBuffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		killAfter := time.Duration(rng.Int64N(int64(maxKill)))
		started := time.Now()
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			require.NoError(t, err, "%v: %s", args, stderr.String())
			completed++
			// It finished first: aim the next kills inside its run time.
			maxKill = max(20*time.Millisecond, time.Since(started))
		case <-time.After(killAfter):
			require.NoError(t, cmd.Process.Kill())
			<-exited
		}
		stdin.Close()
		if m, _ := filepath.Glob(filepath.Join(dir, dbFile+".compact-*")); len(m) > 0 {
			inCompaction++ // killed while copying the live data
		}

		checkStore(t, dir, keep)
		for _, f := range forgets {
			state, _ := forgetState(t, dir, f)
			require.Contains(t, []string{store.ForgetForgotten, store.ForgetPurged}, state, "forget %s", f)
			if state == store.ForgetPurged && f == id {
				purgedSeen++
			}
		}
		if t.Failed() {
			t.Fatalf("after purge cycle %d (%v, killed after %s)", cycles, args[0], killAfter)
		}
	}

	// A purge run to its end purges every forget and leaves no value of
	// theirs in the file; the store opens, its chain verifies.
	r := runCrux(t, nil, "", "purge", "--data", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, f := range forgets {
		state, _ := forgetState(t, dir, f)
		assert.Equal(t, store.ForgetPurged, state, "forget %s", f)
		assert.False(t, purgeFileContains(t, dir, secrets[f]), "the secret of forget %s is still in the file", f)
	}
	m, _ := filepath.Glob(filepath.Join(dir, dbFile+".compact-*"))
	assert.Empty(t, m, "a compaction copy is left next to the database")
	checkStore(t, dir, keep)
	t.Logf("%d purge cycles in %s: %d killed while compacting, %d ran to the end before the kill, %d purged before the kill; %d acknowledged facts kept, 0 lost",
		cycles, time.Since(began).Round(time.Millisecond), inCompaction, completed, purgedSeen, len(keep))
}

// historyVersion is one row of fact_history.
type historyVersion struct {
	FactID       string `json:"fact_id"`
	Value        string `json:"value"`
	Version      uint32 `json:"version"`
	Supersedes   string `json:"supersedes"`
	SupersededBy string `json:"superseded_by"`
	Deleted      bool   `json:"deleted"`
}

// historyOf reads the whole history of (entity, key) through fact_history,
// page after page (newest first).
func historyOf(t *testing.T, ctx context.Context, cs *mcp.ClientSession, entity, key string) []historyVersion {
	t.Helper()
	var all []historyVersion
	cursor := ""
	for page := 0; page < 1000; page++ {
		args := map[string]any{"entity": entity, "key": key, "limit": 1000}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fact_history", Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%+v", res.Content)
		var h struct {
			Versions   []historyVersion `json:"versions"`
			NextCursor string           `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(structuredJSON(t, res), &h))
		all = append(all, h.Versions...)
		if cursor = h.NextCursor; cursor == "" {
			return all
		}
	}
	t.Fatalf("history of %s/%s: too many pages", entity, key)
	return nil
}
