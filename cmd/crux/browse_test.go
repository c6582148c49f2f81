package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/tools"
	"github.com/crux-go/crux/web"
)

// storeFacts stores facts through crux call as agent, each {entity, key,
// value}.
func storeFacts(t *testing.T, dir, agent string, facts ...[3]string) {
	t.Helper()
	for _, f := range facts {
		args, err := json.Marshal(map[string]string{"entity": f[0], "key": f[1], "value": f[2]})
		require.NoError(t, err)
		r := runCrux(t, nil, "", "call", "--data", dir, "--agent", agent, "store_fact", string(args))
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Nil(t, decodeCall(t, r.stdout).Error, r.stdout)
	}
}

func TestFactsCommand(t *testing.T) {
	dir := t.TempDir()
	storeFacts(t, dir, "tester",
		[3]string{"project:crux", "language", "Go"},
		[3]string{"project:crux", "license", "MIT"},
		[3]string{"project:other", "note", "line one\nline two \x1b[31mred\x1b[0m " + strings.Repeat("long ", 30)},
	)

	// JSON: the query_facts rows of the agent, whole.
	r := runCrux(t, nil, "", "facts", "--data", dir, "--agent", "tester", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var rows []tools.FactRow
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows), r.stdout)
	require.Len(t, rows, 3)
	byKey := map[string]tools.FactRow{}
	for _, row := range rows {
		byKey[row.Key] = row
	}
	assert.Equal(t, "Go", byKey["language"].Value)
	assert.Contains(t, byKey["note"].Value, "\x1b[31m", "--json prints the value as stored")
	assert.Empty(t, r.stderr)

	// --entity keeps one entity's facts.
	r = runCrux(t, nil, "", "facts", "--data", dir, "--agent", "tester", "--entity", "project:crux", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	rows = nil
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 2)
	for _, row := range rows {
		assert.Equal(t, "project:crux", row.Entity)
	}

	// --query keeps those that match the keywords.
	r = runCrux(t, nil, "", "facts", "--data", dir, "--agent", "tester", "--query", "MIT", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	rows = nil
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, "license", rows[0].Key)

	// The table: a header, then one line a fact, values on one line, cut,
	// with no control character reaching the terminal.
	r = runCrux(t, nil, "", "facts", "--data", dir, "--agent", "tester")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4, r.stdout)
	assert.Equal(t, []string{"ENTITY", "KEY", "VALUE", "CONFIDENCE", "STORED", "FACT"}, strings.Fields(lines[0]))
	assert.NotContains(t, r.stdout, "\x1b")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		assert.True(t, strings.HasPrefix(f[0], "project:"), l)
		assert.True(t, strings.HasPrefix(f[len(f)-1], "f_"), l)
		if f[1] == "note" {
			assert.Contains(t, l, "line one line two")
			assert.Contains(t, l, "…")
			assert.NotContains(t, l, strings.Repeat("long ", 30))
		}
	}

	// --limit bounds the list and says that more match.
	r = runCrux(t, nil, "", "facts", "--data", dir, "--agent", "tester", "--limit", "2", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	rows = nil
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rows))
	assert.Len(t, rows, 2)
	assert.Contains(t, r.stderr, "truncated: showing the first 2 facts")
	r = runCrux(t, nil, "", "facts", "--data", dir, "--agent", "tester", "--limit", "3", "--json")
	assert.NotContains(t, r.stderr, "truncated", "exactly the limit: nothing left out")

	// An entity without facts lists none.
	r = runCrux(t, nil, "", "facts", "--data", dir, "--agent", "tester", "--entity", "project:none")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "no facts match")
	r = runCrux(t, nil, "", "facts", "--data", dir, "--agent", "tester", "--entity", "project:none", "--json")
	assert.Equal(t, "[]\n", r.stdout)

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--limit", "0"}, exitUsage, "between 1 and 500"},
		{[]string{"--limit", "501"}, exitUsage, "between 1 and 500"},
		{[]string{"extra"}, exitUsage, "no arguments"},
		{[]string{"--entity", "bad\x01name"}, exitFailure, "query_facts: entity"},
	} {
		r := runCrux(t, nil, "", append([]string{"facts", "--data", dir}, tc.args...)...)
		assert.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}

func TestForgetsListCommand(t *testing.T) {
	dir := t.TempDir()
	due := forgetInThePast(t, dir, "forgets-list-secret")
	r := runCrux(t, nil, "", "purge", "--data", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	restored := forgetFact(t, dir, "second")
	r = runCrux(t, nil, "", "forget", "restore", "--data", dir, restored)
	require.Equal(t, exitOK, r.code, r.stderr)
	open := forgetFact(t, dir, "third")

	r = runCrux(t, nil, "", "forgets", "list", "--data", dir, "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var list []web.ForgetRow
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&list), r.stdout)
	require.Len(t, list, 3, r.stdout)
	assert.Equal(t, []string{open, restored, due}, []string{list[0].ForgetReceiptID, list[1].ForgetReceiptID, list[2].ForgetReceiptID},
		"newest first")
	assert.Equal(t, []string{"forgotten", "restored", "purged"}, []string{list[0].State, list[1].State, list[2].State})
	assert.Equal(t, "entity_prefix", list[0].Scope.Type)
	assert.Equal(t, "vault", list[0].Scope.Value)
	assert.GreaterOrEqual(t, list[0].FactCount, 1)
	assert.Equal(t, 1, list[2].FactCount)
	assert.NotEmpty(t, list[1].RestoreReceiptID)
	assert.NotEmpty(t, list[2].PurgeReceiptID)
	assert.NotEmpty(t, list[2].PurgedAt)

	r = runCrux(t, nil, "", "forgets", "list", "--data", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4, r.stdout)
	assert.Equal(t, []string{"FORGET", "INITIATED", "SCOPE", "FACTS", "STATE"}, strings.Fields(lines[0]))
	for i, want := range []string{"restorable until", "restored", "purged"} {
		assert.True(t, strings.HasPrefix(lines[i+1], list[i].ForgetReceiptID), lines[i+1])
		assert.Contains(t, lines[i+1], "entity_prefix=vault")
		assert.Contains(t, lines[i+1], want)
	}

	r = runCrux(t, nil, "", "forgets", "list", "--data", dir, "--limit", "2", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	list = nil
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	assert.Len(t, list, 2)
	assert.Contains(t, r.stderr, "truncated: showing the first 2 forgets")

	r = runCrux(t, nil, "", "forgets", "list", "--data", dir, "--tenant", "globex")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, `no forgets in tenant "globex"`)

	for _, args := range [][]string{{"forgets"}, {"forgets", "list", "--limit", "0"}, {"forgets", "list", "--agent", "a"}, {"forgets", "list", "x"}} {
		r := runCrux(t, nil, "", append(args, "--data", dir)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
	r = runCrux(t, nil, "", "forgets", "list", "--data", t.TempDir())
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no store")
}

func TestReceiptsListTruncated(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 {
		r := runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "record_decision",
			fmt.Sprintf(`{"action":"a%d","rationale":"r"}`, i))
		require.Equal(t, exitOK, r.code, r.stderr)
	}
	all := listed(t, dir)
	r := runCrux(t, nil, "", "receipts", "list", "--data", dir, "--limit", fmt.Sprint(len(all)-1))
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, fmt.Sprintf("truncated: showing the first %d receipts", len(all)-1))
	r = runCrux(t, nil, "", "receipts", "list", "--data", dir, "--limit", fmt.Sprint(len(all)))
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "truncated")
}
