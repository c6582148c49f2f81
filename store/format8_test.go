package store_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// TestUpgradeFormat7 opens a store written by the code of format 7, whose
// retired facts carry their retirement in their records: the upgrade
// rewrites nothing of the buckets compared but the keyword and confidence
// indexes (see upgraded), every fact reads as before, and a new version of
// a chain written afterwards retires the format-7 fact it supersedes
// without rewriting that fact's record (its entity-index entry takes the
// retirement), which then reads as retired (see upgradeAndRetire).
func TestUpgradeFormat7(t *testing.T) { upgradeAndRetire(t, "format7", 7) }

// upgradeAndRetire opens the store of testdata/<fixture>, of format from,
// holding retired facts, and upgrades it: each bucket compared holds what
// upgraded says; every fact reads as before; keyword and unfiltered
// queries, of a few facts and of all, find the same facts in the same
// order (keyword queries of a store older than format 10 read the facts
// for the counts their postings lack). It then writes a new
// version of every current shared chain of tenant default: each retires
// the old fact, whose record stays as it was and which reads as retired,
// in history too; the new facts are found by their words; crux doctor
// finds nothing amiss; and a second open commits nothing.
func upgradeAndRetire(t *testing.T, fixture string, from int) {
	path := openFixtureOf(t, fixture)
	ctx := context.Background()
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)

	buckets := []string{"facts", "facts.entity", "facts.key", "facts.words", "facts.rank", "facts.active",
		"facts.fresh", "sync.log", "sync.log.new", "forgets", "forgets.facts", "receipts", "receipts.chain"}
	before := map[string]map[string]string{}
	var facts map[string]*store.Fact
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		require.Equal(t, from, format)
		for _, b := range buckets {
			before[b] = dump(t, tx, b)
		}
		facts = readFacts(t, tx)
		return nil
	}))
	retired := 0
	for _, f := range facts {
		if f.SupersededBy != "" {
			retired++
		}
	}
	require.Greater(t, retired, 20, "the fixture holds retired facts")
	require.Greater(t, len(before["facts.rank"]), 50)
	found := map[fixtureQuery][]string{}
	for _, tenant := range []string{"default", "acme"} {
		for _, agent := range []string{"", "alice", "bob"} {
			for _, w := range []string{"widget3", "fixture", "upgrade", "setting2", "", "widget again", "value of the widget3", "about"} {
				for _, limit := range []int{1000, 3} {
					q := fixtureQuery{tenant: tenant, agent: agent, words: w, limit: limit}
					require.NoError(t, db.View(ctx, func(tx store.Tx) error { found[q] = searchFixture(t, tx, q); return nil }))
				}
			}
		}
	}

	upgradeFrom(t, db, from, buckets, before)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		assert.Equal(t, facts, readFacts(t, tx))
		for q, ids := range found {
			assert.Equal(t, ids, searchFixture(t, tx, q), "%+v", q)
		}
		return nil
	}))

	type chain struct{ entity, key string }
	olds := map[chain]*store.Fact{}
	for _, f := range facts {
		if f.Tenant == "default" && f.Current() && !f.Private && !store.IsReserved(f.Entity) {
			olds[chain{f.Entity, f.Key}] = f
		}
	}
	require.Greater(t, len(olds), 10)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	news := map[string]*store.Fact{}
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for c, old := range olds {
			now = now.Add(time.Second)
			f, gone, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "default", Agent: "alice"},
				Entity: c.entity, Key: c.key, Value: "written after the upgrade, zebra", Confidence: 1, Now: now})
			require.NoError(t, err)
			require.Equal(t, []string{old.ID}, gone)
			news[old.ID] = f
		}
		return nil
	}))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		records := dump(t, tx, "facts")
		var ids []string
		for id, f := range news {
			ids = append(ids, f.ID)
			assert.Equal(t, before["facts"][id], records[id], "the record of %s is not rewritten", id)
			got, err := store.GetFact(tx, f.ID)
			require.NoError(t, err)
			assert.True(t, got.StoredAt.Equal(f.StoredAt))
			old, err := store.GetFact(tx, id)
			require.NoError(t, err)
			assert.Equal(t, f.ID, old.SupersededBy)
			require.NotNil(t, old.ValidTo)
			assert.True(t, old.ValidTo.Equal(f.StoredAt))
			assert.False(t, old.Current())
			hist, err := store.History(tx, store.Scope{Tenant: "default"}, old.Entity, old.Key)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(hist), 2)
			last, prev := hist[len(hist)-1], hist[len(hist)-2]
			assert.Equal(t, f.ID, last.ID)
			assert.Equal(t, old.ID, prev.ID)
			assert.Equal(t, f.ID, prev.SupersededBy)
		}
		assert.ElementsMatch(t, ids, searchFixture(t, tx, fixtureQuery{tenant: "default", words: "zebra", limit: 1000}))
		problems, err := store.Diagnose(tx)
		require.NoError(t, err)
		assert.Empty(t, problems)
		return nil
	}))
	require.NoError(t, db.Close())

	assertUpgraded(t, path)
}

// upgraded is what the entries of bucket, in a store of format from (9
// or older) whose buckets held before, become once upgraded: the keys of
// facts.rank are complemented after their tenant and scope (format 8; a
// key of format 8 is already), a standard fact id in them being the byte
// 0x01 and its 16 bytes (format 9), and the facts waiting in facts.fresh
// join it (format 10: the keyword index is rebuilt, and facts.fresh
// emptied first); facts.fresh is then empty; other buckets the tests
// compare byte for byte are left as they were (facts.words is rebuilt:
// see upgradedWords).
func upgraded(from int, bucket string, before map[string]map[string]string) map[string]string {
	m := before[bucket]
	out := make(map[string]string, len(m))
	switch bucket {
	case "facts.rank":
		keys := map[string]string{}
		for k, v := range m {
			keys[k] = v
		}
		if from < 10 {
			for k, v := range before["facts.fresh"] {
				tenant, id, _ := strings.Cut(k, "\x00")
				scope, _, _ := strings.Cut(v[16:], "\x00")
				keys[tenant+"\x00"+scope+"\x00"+v[:16]+id] = ""
			}
		}
		for k, v := range keys {
			parts := strings.SplitN(k, "\x00", 3)
			rest := []byte(parts[2])
			if rest[0] < 0x80 { // complemented: format 8
				for i := range rest {
					rest[i] = ^rest[i]
				}
			}
			if id := string(rest[16:]); len(id) == 34 && strings.HasPrefix(id, "f_") && strings.ToLower(id) == id {
				raw, err := hex.DecodeString(id[2:])
				if err == nil {
					rest = append(append(rest[:16], 1), raw...)
				}
			}
			for i := range rest {
				rest[i] = ^rest[i]
			}
			out[parts[0]+"\x00"+parts[1]+"\x00"+string(rest)] = v
		}
	case "facts.fresh":
		if from >= 10 {
			return m
		}
	default:
		return m
	}
	return out
}

// upgradedWords is what the keyword postings of a store of format 9 or
// older become once upgraded (see store.CountedPostings), its facts.words
// and facts.fresh holding words and fresh and its facts being facts: the
// postings of facts.words and those waiting in facts.fresh, each with the
// term frequency of its word in its fact and the fact's number of words,
// counted here from the fact's text.
func upgradedWords(words, fresh map[string]string, facts map[string]*store.Fact) map[string]string {
	ps := store.PostingsOf(words)
	for k, v := range fresh {
		tenant, id, _ := strings.Cut(k, "\x00")
		_, ws, _ := strings.Cut(v[16:], "\x00")
		ws, _, _ = strings.Cut(ws, "\xff")
		for _, w := range strings.Split(ws, "\x00") {
			ps[tenant+"\x00"+w+"\x00"+id] = v[:16]
		}
	}
	out := make(map[string]string, len(ps))
	for k, rank := range ps {
		parts := strings.SplitN(k, "\x00", 3)
		f := facts[parts[2]]
		if f == nil || f.Deleted {
			continue
		}
		tf, dl := 0, 0
		index.Split(f.Value+" "+f.Key+" "+f.Entity, func(w index.Word) {
			dl++
			if index.Stem(w.Lower) == parts[1] {
				tf++
			}
		})
		out[k] = fmt.Sprintf("%s %d %d", rank, tf, dl)
	}
	return out
}
