// The crux-facts system drives crux's fact store through its public tools:
// each document becomes one fact written with store_fact, and queries go
// to query_facts.

package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/toolkit"
	"github.com/crux-go/crux/tools"
)

func init() {
	Register(Factory{Name: "crux-facts", Optional: true, New: func(dir string) (System, error) { return NewCruxFacts(dir) }})
}

// Fact is one fact of a corpus, as the crux-facts system writes it with
// store_fact. Key is the id of the document it stands for: query_facts'
// rows are mapped back to documents by their key.
type Fact struct {
	Entity string `json:"entity"`
	Key    string `json:"key"`
	Value  string `json:"value"`
}

// FactIngester is a System that takes a corpus as facts rather than as
// documents (crux-facts). The evaluation hands it a corpus's facts when
// the corpus has them.
type FactIngester interface {
	IngestFacts(facts []Fact) error
}

// DocFacts is the default fact form of documents: entity = title, key =
// id, value = text.
func DocFacts(docs []Doc) []Fact {
	out := make([]Fact, len(docs))
	for i, d := range docs {
		out[i] = Fact{Entity: d.Title, Key: d.ID, Value: d.Text}
	}
	return out
}

// What store_fact accepts, and what FitFact does to a fact outside it: an
// entity or key is at most tools.MaxNameBytes (1,024) bytes without control
// characters, a value at most toolkit.MaxValueBytes (1 MiB).
const (
	maxFactName  = tools.MaxNameBytes
	maxFactValue = toolkit.MaxValueBytes
)

// FitFact makes f acceptable to store_fact: control characters in the
// entity become spaces, an entity or value too long is cut at the limit
// (on a UTF-8 boundary), and an empty entity becomes the key. cut reports whether the value was cut. A
// key is never changed (it names the document); one that store_fact
// refuses fails the ingest.
func FitFact(f Fact) (out Fact, cut bool) {
	f.Entity = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, f.Entity)
	f.Entity = cutUTF8(f.Entity, maxFactName)
	if strings.TrimSpace(f.Entity) == "" {
		f.Entity = f.Key // store_fact needs an entity; a document without a title is named by its id
	}
	if len(f.Value) > maxFactValue {
		f.Value, cut = cutUTF8(f.Value, maxFactValue), true
	}
	return f, cut
}

// cutUTF8 is s cut to at most n bytes, not inside a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// CruxFacts is crux's fact store over a bbolt store with the production
// settings (fsync on every commit), called in process: store_fact for each
// fact, one call after the other, and query_facts with the question as its
// keywords. (crux-facts-pg is the same over a PostgreSQL store: see
// postgres.go.)
type CruxFacts struct {
	path   string // the bbolt file; "" for another backend
	db     store.Backend
	srv    *crux.Server
	caller crux.Caller
	// Cut counts the values IngestFacts cut to store_fact's limit.
	Cut int
}

// NewCruxFacts opens a new crux server over a bbolt file under dir.
func NewCruxFacts(dir string) (*CruxFacts, error) {
	path := filepath.Join(dir, "crux.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		return nil, err
	}
	x, err := newCruxFactsOn(db, nil)
	if err != nil {
		return nil, err
	}
	x.path = path
	return x, nil
}

// newCruxFactsOn is the crux-facts system over db, with opts (nil: the
// defaults); it closes db if it fails.
func newCruxFactsOn(db store.Backend, opts *crux.Options) (*CruxFacts, error) {
	if opts == nil {
		opts = &crux.Options{}
	}
	srv, err := crux.NewServer(db, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &CruxFacts{db: db, srv: srv,
		caller: crux.Caller{Agent: "bench", Authenticated: true, Tenant: cruxTenant}}, nil
}

// Name implements System.
func (*CruxFacts) Name() string { return "crux-facts" }

// Ingest implements System: each document as a fact (DocFacts).
func (x *CruxFacts) Ingest(docs []Doc) error { return x.IngestFacts(DocFacts(docs)) }

// IngestFacts implements FactIngester: one store_fact call per fact, in
// order (query_facts breaks ties newest first, so the order is part of the
// result).
func (x *CruxFacts) IngestFacts(facts []Fact) error {
	ctx := context.Background()
	for _, f := range facts {
		f, cut := FitFact(f)
		if cut {
			x.Cut++
		}
		args, err := json.Marshal(map[string]string{"entity": f.Entity, "key": f.Key, "value": f.Value})
		if err != nil {
			return err
		}
		res, err := x.srv.CallTool(ctx, x.caller, "store_fact", args)
		if err != nil {
			return fmt.Errorf("store_fact %s: %w", f.Key, err)
		}
		if _, err := crux.Decode[tools.StoreFactOutput](res); err != nil {
			return fmt.Errorf("store_fact %s: %w", f.Key, err)
		}
	}
	return nil
}

type queryFactsArgs struct {
	Query string `json:"query"`
	TopK  int    `json:"top_k"`
}

// Query implements System: query_facts' rows, mapped to their keys in rank
// order, each key once.
func (x *CruxFacts) Query(q string, k int) ([]string, error) {
	args, err := json.Marshal(queryFactsArgs{Query: q, TopK: k})
	if err != nil {
		return nil, err
	}
	res, err := x.srv.CallTool(context.Background(), x.caller, "query_facts", args)
	if refusedAs(err, factsRefused) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out, err := crux.Decode[tools.QueryFactsOutput](res)
	if err != nil {
		return nil, fmt.Errorf("query_facts: %w", err)
	}
	return distinct(out.Rows, func(r tools.FactRow) string { return r.Key }, k), nil
}

// SizeOnDisk implements System: the size of the bbolt file.
func (x *CruxFacts) SizeOnDisk() (int64, error) { return fileSize(x.path) }

// Close implements System.
func (x *CruxFacts) Close() error {
	err := x.srv.Close()
	if err2 := x.db.Close(); err == nil {
		err = err2
	}
	return err
}
