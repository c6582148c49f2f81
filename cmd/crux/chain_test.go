package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// chainOfThree fills a data directory with three receipts of the default
// tenant, in this order: a forget, a refusal (the second, identical
// refusal shares it) and a decision, all by the agent tester.
func chainOfThree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	forgetFact(t, dir, "secret")
	// One refusal: each crux call mints its own token (issued now, to the
	// second), so two calls a second apart make two different refusals.
	r := runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "sync_pull")
	require.Equal(t, exitFailure, r.code, r.stderr)
	require.Equal(t, crux.CodeCapabilityDenied, decodeCall(t, r.stdout).Error.Code)
	r = runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "record_decision",
		`{"action":"ship","rationale":"green"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	return dir
}

// listed runs crux receipts list --json with args.
func listed(t *testing.T, dir string, args ...string) []listedReceipt {
	t.Helper()
	r := runCrux(t, nil, "", append([]string{"receipts", "list", "--data", dir, "--json"}, args...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	var out []listedReceipt
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&out), r.stdout)
	return out
}

// tamperStore changes the store of dir behind crux's back.
func tamperStore(t *testing.T, dir string, fn func(tx store.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, dbFile), nil)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Update(context.Background(), fn))
}

func TestVerifyChainClean(t *testing.T) {
	dir := chainOfThree(t)
	r := runCrux(t, nil, "", "verify", "chain", "--data", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stdout, "\n"), "one line: %q", r.stdout)
	assert.Regexp(t, `^OK: chain of tenant "default": 3 receipts verified, seq 1 to 3, head hash [0-9a-f]{64}\n$`, r.stdout)

	r = runCrux(t, nil, "", "verify", "chain", "--data", dir, "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var a receipts.ChainAudit
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &a))
	assert.True(t, a.OK())
	assert.Equal(t, uint64(3), a.Receipts)
	assert.Equal(t, uint64(3), a.HeadSeq)

	// With the exported keyring, as an auditor without the key would.
	r = runCrux(t, nil, "", "keys", "export", "--data", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	kr := filepath.Join(t.TempDir(), "keyring.json")
	writeFile(t, kr, r.stdout)
	r = runCrux(t, nil, "", "verify", "chain", "--data", dir, "--keyring", kr)
	assert.Equal(t, exitOK, r.code, r.stderr)

	// A keyring without the key fails at seq 1.
	r = runCrux(t, nil, "", "keys", "export", "--data", t.TempDir())
	require.Equal(t, exitOK, r.code, r.stderr)
	writeFile(t, kr, r.stdout)
	r = runCrux(t, nil, "", "verify", "chain", "--data", dir, "--keyring", kr)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, `crux: chain of tenant "default": KEY_NOT_FOUND at seq 1: `)

	// Another tenant has no receipts: nothing to break.
	r = runCrux(t, nil, "", "verify", "chain", "--data", dir, "--tenant", "globex")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, "OK: chain of tenant \"globex\": no receipts\n", r.stdout)

	r = runCrux(t, nil, "", "verify", "chain", "--data", t.TempDir())
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no store")
}

func TestVerifyChainTampered(t *testing.T) {
	t.Run("receipt body altered in the store", func(t *testing.T) {
		dir := chainOfThree(t)
		refusal := listed(t, dir, "--kind", "refusal")
		require.Len(t, refusal, 1)
		require.Equal(t, uint64(2), refusal[0].Seq)
		tamperStore(t, dir, func(tx store.Tx) error {
			v, err := tx.Get("receipts", []byte(refusal[0].ReceiptID))
			if err != nil {
				return err
			}
			w := bytes.Replace(v, []byte("tester"), []byte("hacker"), 1)
			require.NotEqual(t, v, w)
			return tx.Put("receipts", []byte(refusal[0].ReceiptID), w)
		})
		r := runCrux(t, nil, "", "verify", "chain", "--data", dir)
		assert.Equal(t, exitFailure, r.code)
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, `crux: chain of tenant "default": BODY_HASH_MISMATCH at seq 2: receipt `+refusal[0].ReceiptID)

		r = runCrux(t, nil, "", "verify", "chain", "--data", dir, "--json")
		assert.Equal(t, exitFailure, r.code)
		var a receipts.ChainAudit
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &a))
		assert.Equal(t, receipts.BodyHashMismatch, a.ErrorCode)
		assert.Equal(t, uint64(2), a.ErrorSeq)
		assert.Equal(t, uint64(1), a.Receipts)
	})
	t.Run("chain index entry dropped", func(t *testing.T) {
		dir := chainOfThree(t)
		tamperStore(t, dir, func(tx store.Tx) error {
			return tx.Delete("receipts.chain", binary.BigEndian.AppendUint64([]byte("default\x00"), 2))
		})
		r := runCrux(t, nil, "", "verify", "chain", "--data", dir)
		assert.Equal(t, exitFailure, r.code)
		assert.Contains(t, r.stderr, `CHAIN_GAP at seq 2: `)
	})
}

func TestReceiptsList(t *testing.T) {
	dir := chainOfThree(t)
	all := listed(t, dir)
	require.Len(t, all, 3)
	var kinds []string
	for i, l := range all {
		kinds = append(kinds, l.Kind)
		assert.Equal(t, uint64(3-i), l.Seq, "newest first")
		assert.Equal(t, "default", l.TenantID)
		assert.Equal(t, "tester", l.Actor)
		assert.True(t, strings.HasPrefix(l.ReceiptID, "r_"), l.ReceiptID)
		at, err := time.Parse(time.RFC3339Nano, l.CreatedAt)
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), at, time.Minute)
	}
	assert.Equal(t, []string{"decision", "refusal", "forget"}, kinds)

	// The ids listed are the ones verify receipt takes.
	r := runCrux(t, nil, "", "verify", "receipt", "--data", dir, all[1].ReceiptID)
	assert.Equal(t, exitOK, r.code, r.stderr)

	assert.Equal(t, all[:2], listed(t, dir, "--limit", "2"))
	assert.Equal(t, all[1:2], listed(t, dir, "--kind", "refusal"))
	assert.Equal(t, all[2:], listed(t, dir, "--kind", "forget", "--limit", "1"))
	assert.Empty(t, listed(t, dir, "--kind", "no_such_kind"))
	assert.Empty(t, listed(t, dir, "--tenant", "globex"))

	// Text: one line each, the fields in order.
	r = runCrux(t, nil, "", "receipts", "list", "--data", dir, "--limit", "2")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 2, r.stdout)
	for i, line := range lines {
		assert.Equal(t, []string{all[i].ReceiptID, []string{"3", "2"}[i], all[i].Kind, "tester", all[i].CreatedAt},
			strings.Fields(line))
	}

	r = runCrux(t, nil, "", "receipts", "list", "--data", t.TempDir())
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no store")
}

func TestChainCommandUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"verify what", []string{"verify", "chains"}, `"receipt", "chain", "output" or "bundle"`},
		{"verify chain argument", []string{"verify", "chain", "--data", dir, "acme"}, "--tenant"},
		{"verify chain agent", []string{"verify", "chain", "--data", dir, "--agent", "a"}, "--agent does not apply"},
		{"verify chain unknown flag", []string{"verify", "chain", "--kind", "refusal"}, "-kind"},
		{"receipts without list", []string{"receipts"}, `"list"`},
		{"receipts other", []string{"receipts", "show"}, `"list"`},
		{"list argument", []string{"receipts", "list", "--data", dir, "refusal"}, "no arguments"},
		{"list zero limit", []string{"receipts", "list", "--data", dir, "--limit", "0"}, "between 1 and 1000"},
		{"list huge limit", []string{"receipts", "list", "--data", dir, "--limit", "1001"}, "between 1 and 1000"},
		{"list limit not a number", []string{"receipts", "list", "--data", dir, "--limit", "ten"}, "-limit"},
		{"list agent", []string{"receipts", "list", "--data", dir, "--agent", "a"}, "--agent does not apply"},
		{"list NUL tenant", []string{"receipts", "list", "--data", dir, "--tenant", "a\x00b"}, "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCrux(t, nil, "", tc.args...)
			assert.Equal(t, exitUsage, r.code)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, tc.want)
			assert.Contains(t, r.stderr, "crux help")
		})
	}
}

// writeFile writes content to path.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}
