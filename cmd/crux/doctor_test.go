package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// storeFact stores a fact through crux call as agent and returns its id.
func storeFact(t *testing.T, dir, agent, args string) string {
	t.Helper()
	r := runCrux(t, nil, "", "call", "--data", dir, "--agent", agent, "store_fact", args)
	require.Equal(t, exitOK, r.code, r.stderr)
	id, _ := decodeCall(t, r.stdout).StructuredContent["fact_id"].(string)
	require.NotEmpty(t, id)
	return id
}

// plant rewrites, straight through the bbolt backend, the stored record of
// each fact id with what edit makes of it, and returns the new bytes.
func plant(t *testing.T, dir string, edits map[string]func([]byte) []byte) map[string][]byte {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, dbFile), nil)
	require.NoError(t, err)
	defer db.Close()
	out := map[string][]byte{}
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for id, edit := range edits {
			v, err := tx.Get("facts", []byte(id))
			require.NoError(t, err)
			out[id] = edit(bytes.Clone(v))
			if err := tx.Put("facts", []byte(id), out[id]); err != nil {
				return err
			}
		}
		return nil
	}))
	return out
}

// scans are the tool calls that read the whole shared pool.
var scans = []struct{ tool, args string }{
	{"query_facts", `{}`},
	{"memory_view", `{}`},
	{"fact_history", `{"entity":"svc","key":"host"}`},
	{"memory_freshness", `{}`},
	{"memory_sweep_candidates", `{}`},
	{"memory_forget_dry_run", `{"scope":{"type":"tenant_id","value":"default"}}`},
}

func TestDoctorFindsAndRemovesUnreadableRecords(t *testing.T) {
	dir := t.TempDir()
	forget := forgetFact(t, dir, "kept-in-a-forget") // a receipt chain and a forget record
	port := storeFact(t, dir, "alice", `{"entity":"svc","key":"port","value":"port is 8080"}`)
	host := storeFact(t, dir, "alice", `{"entity":"svc","key":"host","value":"host BADTEXT"}`)
	junk := storeFact(t, dir, "bob", `{"entity":"svc","key":"owner","value":"owned by bob"}`)
	mine := storeFact(t, dir, "bob", `{"entity":"notes","key":"todo","value":"private note","private":true}`)
	r := runCrux(t, nil, "", "call", "--data", dir, "--agent", "bob", "memory_pin", `{"fact_id":"`+junk+`"}`)
	require.Equal(t, exitOK, r.code, r.stderr)

	// A value that is not UTF-8 (what an older crux let through), and a
	// record damaged on disk.
	planted := plant(t, dir, map[string]func([]byte) []byte{
		host: func(v []byte) []byte { return bytes.ReplaceAll(v, []byte("BADTEXT"), []byte("BAD\xffEXT")) },
		junk: func([]byte) []byte { return []byte{0xbf, 0x61, 0xff} },
	})
	// Those bytes are what made every scan fail for every agent: any
	// strict decoder refuses them.
	var m map[string]any
	assert.True(t, bytes.Contains(planted[host], []byte("BAD\xffEXT")))
	assert.Error(t, cbor.Unmarshal(planted[junk], &m))

	// Every agent's scans now serve the other records and log the bad ones.
	for _, agent := range []string{"alice", "bob", ""} {
		for _, sc := range scans {
			r := runCrux(t, nil, "", "call", "--data", dir, "--agent", agent, sc.tool, sc.args)
			require.Equal(t, exitOK, r.code, "%s %s: %s %s", agent, sc.tool, r.stdout, r.stderr)
			out := decodeCall(t, r.stdout)
			require.Nil(t, out.IsError, "%s %s: %s", agent, sc.tool, r.stdout)
			assert.NotContains(t, r.stdout, host)
			assert.NotContains(t, r.stdout, junk)
			if sc.tool == "query_facts" {
				assert.Contains(t, r.stdout, port, agent)
			}
		}
	}
	r = runCrux(t, nil, "", "call", "--data", dir, "--agent", "bob", "query_facts", `{}`)
	assert.Contains(t, r.stdout, mine, "bob's private fact is served")
	assert.Contains(t, r.stderr, "skipped an unreadable record")
	assert.Contains(t, r.stderr, "id="+host)
	assert.Contains(t, r.stderr, "id="+junk)
	assert.Equal(t, 2, strings.Count(r.stderr, "skipped an unreadable record"), "once per record: %s", r.stderr)

	// crux doctor lists them, with their location, and exits 1.
	r = runCrux(t, nil, "", "doctor", "--data", dir)
	assert.Equal(t, exitFailure, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `facts "`+host+`": the fact cannot be read: store: fact record holds a string of invalid UTF-8`)
	assert.Contains(t, r.stdout, `facts "`+junk+`": the fact cannot be read`)
	assert.Regexp(t, `facts\.entity ".*": names the unreadable fact `+host, r.stdout)
	// The rank entry: in facts.rank, or in facts.fresh while it waits to move there.
	assert.Regexp(t, `facts\.(rank|fresh) ".*": names the unreadable fact `+junk, r.stdout)
	assert.Regexp(t, `(?m)^\d+ problems; crux doctor --repair removes \d+ of them$`, r.stdout)
	listed := r.stdout

	// --repair removes them in one transaction, saying what it removed.
	r = runCrux(t, nil, "", "doctor", "--data", dir, "--repair")
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	for _, line := range strings.Split(strings.TrimSpace(listed), "\n") {
		if strings.HasPrefix(line, "facts") {
			assert.Contains(t, r.stdout, "removed "+line+"\n")
		}
	}
	assert.Regexp(t, `removed pins\.by_fact ".*": pins the removed fact `+junk, r.stdout)
	assert.Contains(t, r.stdout, "the store is clean")

	// Afterwards: scans are clean, nothing is logged, doctor agrees, the
	// entity listing is right, and the receipt chain verifies.
	for _, sc := range scans {
		r := runCrux(t, nil, "", "call", "--data", dir, "--agent", "alice", sc.tool, sc.args)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.NotContains(t, r.stderr, "unreadable", sc.tool)
	}
	r = runCrux(t, nil, "", "call", "--data", dir, "--agent", "alice", "list_entities", `{}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, []any{"svc"}, decodeCall(t, r.stdout).StructuredContent["entities"])
	r = runCrux(t, nil, "", "doctor", "--data", dir)
	assert.Equal(t, exitOK, r.code, r.stdout)
	assert.Equal(t, "the store is clean: every record reads and every receipt chain links\n", r.stdout)
	r = runCrux(t, nil, "", "verify", "receipt", "--data", dir, forget)
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Equal(t, "OK", rep["error_code"])

	// The pair whose current fact was removed takes a new version.
	storeFact(t, dir, "alice", `{"entity":"svc","key":"host","value":"host is db2"}`)
	r = runCrux(t, nil, "", "call", "--data", dir, "query_facts", `{"entity":"svc","key":"host"}`)
	assert.Contains(t, r.stdout, "host is db2")
	assert.Empty(t, regexp.MustCompile(`unreadable`).FindString(r.stderr))
}

func TestDoctorOnACleanStoreAndItsUsage(t *testing.T) {
	dir := t.TempDir()
	r := runCrux(t, nil, "", "doctor", "--data", dir)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no store")

	storeFact(t, dir, "alice", `{"entity":"e","key":"k","value":"v"}`)
	r = runCrux(t, nil, "", "doctor", "--data", dir)
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "the store is clean")
	r = runCrux(t, nil, "", "doctor", "--data", dir, "--repair")
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	assert.Equal(t, "removed 0 entries\nthe store is clean: every record reads and every receipt chain links\n", r.stdout)

	for _, args := range [][]string{
		{"doctor", "--data", dir, "extra"},
		{"doctor", "--data", dir, "--agent", "alice"},
		{"doctor", "--data", dir, "--repair=maybe"},
	} {
		r := runCrux(t, nil, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
}

// TestDoctorListsFutureVersions: a version stored far ahead of the clock
// (what a replica could push before sync bounded its clock) is listed by
// crux doctor, and --repair leaves it for the operator to correct.
func TestDoctorListsFutureVersions(t *testing.T) {
	dir := t.TempDir()
	storeFact(t, dir, "alice", `{"entity":"acct","key":"balance","value":"100"}`)
	db, err := bolt.Open(filepath.Join(dir, dbFile), nil)
	require.NoError(t, err)
	var forged string
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		f, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "default", Agent: "alice"},
			Entity: "acct", Key: "balance", Value: "FORGED", Now: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)})
		if f != nil {
			forged = f.ID
		}
		return err
	}))
	require.NoError(t, db.Close())

	for _, args := range [][]string{{"doctor", "--data", dir}, {"doctor", "--data", dir, "--repair"}} {
		r := runCrux(t, nil, "", args...)
		assert.Equal(t, exitFailure, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, `facts "`+forged+`": stored at 9999-01-01T00:00:00Z`)
		assert.Contains(t, r.stdout, `(owner "alice", entity "acct", key "balance")`)
		assert.Regexp(t, `(?m)^1 problem$`, r.stdout, "not one --repair removes")
	}
}
