package retrieval

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"
)

// BleveStore says whether the bleve index stores the title and text of each
// passage besides indexing them. crux keeps its documents' text, to return
// it; bleve can answer the benchmark's queries without it, so this decides
// which of the two a size comparison is against. cmd/compare sets it from
// its -bleve-store flag.
var BleveStore = true

// BleveQuery is how the bleve system searches: "all" (the default), one
// match query on the composite _all field into which both title and text
// are indexed besides their own fields; "text", one match query on the text
// field alone (title indexed but not searched); "fields", a disjunction of
// a match query on each field. cmd/compare sets it from its -bleve-query
// flag.
var BleveQuery = "all"

// BleveBatch is the number of passages per bleve batch.
var BleveBatch = 1000

func init() {
	Register(Factory{Name: "bleve", New: func(dir string) (System, error) { return NewBleve(dir) }})
}

// Bleve is bleve v2 as an application would set it up for this: an on-disk
// scorch index with BM25 scoring, the English analyzer (possessives,
// lowercase, English stop words, Porter stemmer) on a title and a text
// field, both also in the composite _all field, no term vectors or doc
// values (a match query needs neither), and one match query on _all (see
// BleveQuery for the other ways).
type Bleve struct {
	dir string
	idx bleve.Index
}

// NewBleve creates an empty bleve index under dir.
func NewBleve(dir string) (*Bleve, error) {
	switch BleveQuery {
	case "all", "text", "fields":
	default:
		return nil, fmt.Errorf("bleve: unknown query form %q (all, text or fields)", BleveQuery)
	}
	field := func() *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = en.AnalyzerName
		f.Store = BleveStore
		f.IncludeTermVectors = false
		f.IncludeInAll = BleveQuery == "all"
		f.DocValues = false
		return f
	}
	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt("title", field())
	doc.AddFieldMappingsAt("text", field())
	im := bleve.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = en.AnalyzerName
	im.DefaultMapping = doc
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	path := filepath.Join(dir, "bleve")
	idx, err := bleve.New(path, im)
	if err != nil {
		return nil, err
	}
	return &Bleve{dir: path, idx: idx}, nil
}

// Name implements System.
func (*Bleve) Name() string { return "bleve" }

// Ingest implements System: batches of BleveBatch passages, each batch
// persisted before the next starts (scorch's default, safe batches).
func (x *Bleve) Ingest(docs []Doc) error {
	for len(docs) > 0 {
		n := min(BleveBatch, len(docs))
		b := x.idx.NewBatch()
		for _, d := range docs[:n] {
			if err := b.Index(d.ID, map[string]any{"title": d.Title, "text": d.Text}); err != nil {
				return err
			}
		}
		if err := x.idx.Batch(b); err != nil {
			return err
		}
		docs = docs[n:]
	}
	return nil
}

// Query implements System.
func (x *Bleve) Query(q string, k int) ([]string, error) {
	var mq query.Query
	switch BleveQuery {
	case "all":
		mq = bleve.NewMatchQuery(q) // no field: the default field, _all
	case "text":
		text := bleve.NewMatchQuery(q)
		text.SetField("text")
		mq = text
	case "fields":
		text := bleve.NewMatchQuery(q)
		text.SetField("text")
		title := bleve.NewMatchQuery(q)
		title.SetField("title")
		mq = bleve.NewDisjunctionQuery(text, title)
	}
	req := bleve.NewSearchRequestOptions(mq, k, 0, false)
	res, err := x.idx.Search(req)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = h.ID
	}
	return out, nil
}

// SizeOnDisk implements System: the size of the index directory once
// scorch's background merges have settled (the size has not changed for a
// second, or ten seconds have passed).
func (x *Bleve) SizeOnDisk() (int64, error) {
	last, err := DirSize(x.dir)
	if err != nil {
		return 0, err
	}
	stable := 0
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		n, err := DirSize(x.dir)
		if err != nil {
			return 0, err
		}
		if n == last {
			if stable++; stable == 10 {
				break
			}
		} else {
			last, stable = n, 0
		}
	}
	return last, nil
}

// Close implements System.
func (x *Bleve) Close() error { return x.idx.Close() }
