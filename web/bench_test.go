package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/web"
)

// benchFacts is how many facts the benchmark's store holds; -short
// (.ci/run's one iteration of every benchmark) fills a fiftieth of it.
const benchFacts = 100_000

// benchWords make the facts' values, so that a search has some facts to
// rank and many to pass over.
var benchWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
	"kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"}

// BenchmarkFactsPage renders the facts page (HTML, through query_facts)
// over a store of 100,000 shared facts of 1,000 entities (100 each): the first page
// of the whole list, a keyword search, one entity, and a later page.
func BenchmarkFactsPage(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	now := time.Now().Add(-time.Hour)
	const batch = 2000
	n := benchFacts
	if testing.Short() {
		n = benchFacts / 50
	}
	for start := 0; start < n; start += batch {
		err := db.Update(ctx, func(tx store.Tx) error {
			for i := start; i < start+batch; i++ {
				value := fmt.Sprintf("%s %s %s note %d", benchWords[i%20], benchWords[(i/20)%20], benchWords[(i/400)%20], i)
				if _, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: crux.DefaultTenant, Agent: "alice"},
					Entity: fmt.Sprintf("bench:%04d", i%(n/100)), Key: fmt.Sprintf("k%05d", i), Value: value,
					Confidence: 0.5 + float64(i%50)/100, Now: now}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	srv, err := crux.NewServer(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	h := web.New(srv, &web.Options{Lookup: lookup})
	for _, bc := range []struct{ name, path string }{
		{"list", "/ui/"},
		{"search", "/ui/?q=alpha+bravo+charlie"},
		{"entity", "/ui/?entity=bench:0012"},
		{"page4", "/ui/?q=delta&page=4"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, bc.path, nil)
			req.Header.Set("Authorization", "Bearer alice-token")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if rows := strings.Count(w.Body.String(), `<tr class="fact"`); rows != web.DefaultPerPage {
				b.Fatalf("%s: %d rows, want a full page of %d", bc.path, rows, web.DefaultPerPage)
			}
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, bc.path, nil)
				req.Header.Set("Authorization", "Bearer alice-token")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", bc.path, w.Code, w.Body)
				}
			}
		})
	}
}
