package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// testFactTopK writes random facts and checks that a keyword query of
// limit k returns exactly the first k facts, in the same order and with
// the same scores, of the same query without a limit, which scores and
// reads every candidate: a limited query stops reading once no later
// candidate can enter its result, and must never stop too early. The
// facts hold words of a small vocabulary, unevenly, and one word every
// fact holds; some facts repeat words, some are private to one of two
// agents (never seen by the other, nor without an agent), some are
// retired by later versions of their chain or deleted, a few are pinned,
// confidences and write times repeat (ties), horizons make some stale at
// the later query times, and the last writes wait in facts.fresh.
func testFactTopK(t *testing.T, b store.Backend) {
	ctx := context.Background()
	vocab := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda",
		"sigma", "omega", "orbit", "orbital", "orbiter", "rocket", "rockets", "engine", "engineer", "fuel", "wing"}
	agents := []string{"", "alice", "bob"}
	horizons := []string{store.HorizonNone, store.HorizonVolatile, store.HorizonMedium, store.HorizonStable}
	for _, seed := range []uint64{1, 2, 3} {
		rng := rand.New(rand.NewPCG(seed, seed*7919))
		tenant := fmt.Sprintf("t%d", seed)
		now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
		var ids []string
		n := 300 + rng.IntN(200)
		for start := 0; start < n; start += 50 {
			require.NoError(t, b.Update(ctx, func(tx store.Tx) error {
				for i := start; i < min(n, start+50); i++ {
					var words []string
					for range 1 + rng.IntN(12) {
						// Uneven: the first words of the vocabulary far more often.
						words = append(words, vocab[min(rng.IntN(len(vocab)), rng.IntN(len(vocab)))])
					}
					words = append(words, "common")
					agent := agents[rng.IntN(len(agents))]
					if rng.IntN(3) > 0 {
						now = now.Add(time.Duration(rng.IntN(3)) * time.Hour) // often the same time
					}
					f, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: tenant, Agent: agent},
						Entity: fmt.Sprintf("e%d", rng.IntN(60)), Key: fmt.Sprintf("k%d", rng.IntN(3)),
						Value: strings.Join(words, " "), Confidence: []float64{0.3, 0.5, 0.8, 1}[rng.IntN(4)],
						Private: agent != "" && rng.IntN(2) == 0, HorizonClass: horizons[rng.IntN(len(horizons))], Now: now})
					if err != nil {
						return err
					}
					ids = append(ids, f.ID)
					if rng.IntN(25) == 0 {
						victim := ids[rng.IntN(len(ids))]
						for _, a := range agents {
							if _, _, err := store.DeleteFact(tx, store.Scope{Tenant: tenant, Agent: a}, victim, now); err == nil {
								break
							}
						}
					}
					if rng.IntN(30) == 0 && agent != "" {
						if err := store.SetPin(tx, store.Scope{Tenant: tenant, Agent: agent}, f.ID, true); err != nil {
							return err
						}
					}
				}
				return nil
			}))
		}
		for qi := range 60 {
			var text []string
			for range 1 + rng.IntN(4) {
				w := vocab[rng.IntN(len(vocab))]
				switch rng.IntN(6) {
				case 0:
					w = "common"
				case 1:
					w = w[:3] // a prefix of longer words
				}
				text = append(text, w)
			}
			terms := store.QueryWords(strings.Join(text, " "))
			agent := agents[qi%len(agents)]
			at := now.Add([]time.Duration{0, 40 * 24 * time.Hour, 400 * 24 * time.Hour}[rng.IntN(3)])
			q := store.FactQuery{Scope: store.Scope{Tenant: tenant, Agent: agent}, Terms: terms, Now: at,
				Rerank: 100, IncludeSuperseded: rng.IntN(4) == 0}
			if rng.IntN(4) == 0 {
				q.MinEffective = 0.4
			}
			var all store.FactResult
			require.NoError(t, b.View(ctx, func(tx store.Tx) (err error) { all, err = store.SearchFacts(tx, q); return err }))
			for _, f := range all.Facts {
				require.True(t, f.VisibleTo(agent), "seed %d: %s sees %s, private to %s", seed, agent, f.ID, f.Owner)
				require.False(t, f.Deleted)
				require.True(t, q.IncludeSuperseded || f.SupersededBy == "")
			}
			for _, k := range []int{1, 3, 10, 25} {
				q.Limit = k
				var top store.FactResult
				require.NoError(t, b.View(ctx, func(tx store.Tx) (err error) { top, err = store.SearchFacts(tx, q); return err }))
				want := all.Facts[:min(k, len(all.Facts))]
				if !assert.Equal(t, scored(want), scored(top.Facts), "seed %d, %q as %q, limit %d", seed, terms, agent, k) {
					return
				}
			}
		}
	}
}

// scored lists the facts of rs as "id score".
func scored(rs []store.RankedFact) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s %v", r.ID, r.Score)
	}
	return out
}

// testFactTopKCommon checks testFactTopK's property for a word held by
// more facts than a keyword query decodes the postings of (the newest of
// them only, the others counted): over a word in every fact, alone and
// beside rarer words and a prefix of longer words, some of them private
// or retired.
func testFactTopKCommon(t *testing.T, b store.Backend) {
	if testing.Short() {
		t.Skip("writes 9,000 facts")
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const n = 9000
	for start := 0; start < n; start += 1000 {
		require.NoError(t, b.Update(ctx, func(tx store.Tx) error {
			for i := start; i < start+1000; i++ {
				now = now.Add(time.Duration(rng.IntN(2)) * time.Second)
				value := fmt.Sprintf("common note %d", i%7)
				if i%9 == 0 {
					value += fmt.Sprintf(" rare%d rare%d", i%5, i%3)
				}
				agent := []string{"", "alice"}[rng.IntN(2)]
				if _, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: agent},
					Entity: fmt.Sprintf("e%d", rng.IntN(3000)), Key: "k", Value: value,
					Confidence: []float64{0.5, 1}[rng.IntN(2)], Private: agent != "" && rng.IntN(4) == 0, Now: now}); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	for _, text := range []string{"common", "common note", "note rare1", "rare", "common rare2 rare0"} {
		for _, agent := range []string{"", "alice", "bob"} {
			q := store.FactQuery{Scope: store.Scope{Tenant: "t", Agent: agent}, Terms: store.QueryWords(text), Now: now, Rerank: 50}
			var all store.FactResult
			require.NoError(t, b.View(ctx, func(tx store.Tx) (err error) { all, err = store.SearchFacts(tx, q); return err }))
			require.NotEmpty(t, all.Facts, "%q", text)
			for _, k := range []int{1, 10} {
				q.Limit = k
				var top store.FactResult
				require.NoError(t, b.View(ctx, func(tx store.Tx) (err error) { top, err = store.SearchFacts(tx, q); return err }))
				assert.Equal(t, scored(all.Facts[:min(k, len(all.Facts))]), scored(top.Facts), "%q as %q, limit %d", text, agent, k)
			}
		}
	}
}
