// The crux system drives the library's retrieval core through its public
// API: Server.Ingest (then Server.Compact with CruxCompact, as crux ingest
// --compact does),
// and the query tool.

package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/tools"
	"go.etcd.io/bbolt"
)

// CruxLimit is the limit the crux system passes to the query tool (results
// are segments, several of which may belong to one passage; Query keeps
// each passage's first). Zero means the k the harness asks for.
var CruxLimit = 0

// CruxBatch is the number of passages per Server.Ingest call; zero (the
// default) means the whole corpus in one call, as crux ingest sends it
// (Ingest commits it in batches of its own).
var CruxBatch = 0

// CruxCompact makes the crux system compact its store after the ingest,
// as crux ingest --compact does; without it the file keeps the pages the
// ingest's later batches replaced, if it took more than one.
var CruxCompact = false

const cruxTenant = "bench"

func init() {
	Register(Factory{Name: "crux", New: func(dir string) (System, error) { return NewCrux(dir) }})
}

// Crux is crux's retrieval core over a bbolt store with the production
// settings (fsync on every commit), called in process (or, for crux-pg,
// over a PostgreSQL store: see postgres.go).
type Crux struct {
	path   string // the bbolt file; "" for another backend
	db     store.Backend
	srv    *crux.Server
	caller crux.Caller
}

// NewCrux opens a new crux server over a bbolt file under dir.
func NewCrux(dir string) (*Crux, error) {
	path := filepath.Join(dir, "crux.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		return nil, err
	}
	x, err := newCruxOn(db, nil)
	if err != nil {
		return nil, err
	}
	x.path = path
	return x, nil
}

// newCruxOn is the crux system over db, with opts (nil: the defaults); it
// closes db if it fails.
func newCruxOn(db store.Backend, opts *crux.Options) (*Crux, error) {
	if opts == nil {
		opts = &crux.Options{}
	}
	srv, err := crux.NewServer(db, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Crux{db: db, srv: srv, caller: crux.Caller{Agent: "bench", Authenticated: true}}, nil
}

// Name implements System.
func (*Crux) Name() string { return "crux" }

// Ingest implements System.
func (x *Crux) Ingest(docs []Doc) error {
	ctx := context.Background()
	for len(docs) > 0 {
		n := len(docs)
		if CruxBatch > 0 {
			n = min(CruxBatch, n)
		}
		batch := make([]crux.Document, n)
		for i, d := range docs[:n] {
			batch[i] = crux.Document{ID: d.ID, Title: d.Title, Text: d.Text}
		}
		if _, err := x.srv.Ingest(ctx, cruxTenant, batch, nil); err != nil {
			return err
		}
		docs = docs[n:]
	}
	if CruxCompact {
		return x.srv.Compact(ctx)
	}
	return nil
}

type cruxQueryArgs struct {
	TenantID    string `json:"tenant_id"`
	Query       string `json:"query"`
	Limit       int    `json:"limit"`
	TokenBudget int    `json:"token_budget"`
}

// queryArgs are the query tool's arguments for question q, whose k best
// passages are asked for.
func queryArgs(q string, k int) cruxQueryArgs {
	limit := CruxLimit
	if limit == 0 {
		limit = k
	}
	return cruxQueryArgs{TenantID: cruxTenant, Query: q, Limit: limit, TokenBudget: 100000}
}

// The -32602 refusals the benchmark counts as a query that finds nothing,
// by what their messages say: a query of stop words alone (query), one
// without a word of two letters or digits (query_facts).
const (
	queryRefused = "only common words"
	factsRefused = "needs a word"
)

// distinct returns the ids of rows (id gives a row's), in order, each
// once, at most k of them.
func distinct[R any](rows []R, id func(R) string, k int) []string {
	ids := make([]string, 0, k)
	seen := make(map[string]bool, k)
	for _, r := range rows {
		if len(ids) == k {
			break
		}
		if s := id(r); !seen[s] {
			seen[s] = true
			ids = append(ids, s)
		}
	}
	return ids
}

// refusedAs reports whether err is a -32602 whose message says why: a
// tool's error in process, or a JSON-RPC error answer over stdio.
func refusedAs(err error, why string) bool {
	if e := (*crux.Error)(nil); errors.As(err, &e) {
		return e.Code == crux.CodeInvalidParams && strings.Contains(e.Message, why)
	}
	var e *rpcError
	return errors.As(err, &e) && e.code == crux.CodeInvalidParams && strings.Contains(e.message, why)
}

// Query implements System: the query tool's segments, mapped to their
// passages in rank order, each passage once.
func (x *Crux) Query(q string, k int) ([]string, error) {
	args, err := json.Marshal(queryArgs(q, k))
	if err != nil {
		return nil, err
	}
	res, err := x.srv.CallTool(context.Background(), x.caller, "query", args)
	if refusedAs(err, queryRefused) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The answer as an embedding program reads it: the tool's typed
	// output (an MCP client parses the same answer's JSON text).
	out, err := crux.Decode[tools.QueryOutput](res)
	if err != nil {
		return nil, fmt.Errorf("crux query: %w", err)
	}
	return distinct(out.Results, func(r tools.QueryRow) string { return r.DocID }, k), nil
}

// UsedOnDisk implements UsedSizer: the bbolt file's pages up to its
// high-water mark (bbolt grows the file ahead of its data), read once the
// store is closed.
func (x *Crux) UsedOnDisk() (int64, error) {
	db, err := bbolt.Open(x.path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.View(func(tx *bbolt.Tx) error { n = tx.Size(); return nil })
	return n, err
}

// SizeOnDisk implements System: the size of the bbolt file.
func (x *Crux) SizeOnDisk() (int64, error) { return fileSize(x.path) }

// Close implements System.
func (x *Crux) Close() error {
	err := x.srv.Close()
	if err2 := x.db.Close(); err == nil {
		err = err2
	}
	return err
}

// DocFactIngester is a System that takes a corpus both as documents and
// as facts, into one index (crux-docs-facts). The evaluation hands it
// both.
type DocFactIngester interface {
	IngestDocsFacts(docs []Doc, facts []Fact) error
}

func init() {
	Register(Factory{Name: "crux-docs-facts", Optional: true, New: func(dir string) (System, error) {
		c, err := NewCrux(dir)
		if err != nil {
			return nil, err
		}
		return &CruxDocsFacts{Crux: c}, nil
	}})
}

// CruxDocsFacts is the crux system over a tenant that also holds the
// corpus's facts (written with store_fact in that tenant, as crux-facts
// writes them): query's entity-graph lane then has facts to follow, as
// it has for an agent that keeps both.
type CruxDocsFacts struct {
	*Crux
	// Cut counts the values the facts' ingest cut to store_fact's limit.
	Cut int
}

// Name implements System.
func (*CruxDocsFacts) Name() string { return "crux-docs-facts" }

// Ingest implements System: the documents, and each as a fact (DocFacts).
func (x *CruxDocsFacts) Ingest(docs []Doc) error { return x.IngestDocsFacts(docs, DocFacts(docs)) }

// IngestDocsFacts implements DocFactIngester: the documents as the crux
// system ingests them, then the facts as crux-facts stores them.
func (x *CruxDocsFacts) IngestDocsFacts(docs []Doc, facts []Fact) error {
	if err := x.Crux.Ingest(docs); err != nil {
		return err
	}
	f := &CruxFacts{srv: x.srv, caller: crux.Caller{Agent: x.caller.Agent, Authenticated: true, Tenant: cruxTenant}}
	err := f.IngestFacts(facts)
	x.Cut += f.Cut
	return err
}
