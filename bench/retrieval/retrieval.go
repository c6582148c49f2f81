// Package retrieval is the retrieval benchmark and evaluation of crux.
//
// The benchmark (cmd/compare) is a corpus of about 20,000 passages built
// from the Go standard library's documentation on the machine that runs
// it, known-item queries drawn from that corpus, and a harness that
// ingests the corpus into several systems (crux's retrieval core, bleve v2
// with BM25 scoring, a textbook in-memory BM25, and optionally SQLite FTS5
// and crux's fact store) and measures, in one run, ingest time, size on
// disk, query latency and retrieval quality (recall@10, MRR@10).
//
// The evaluation (cmd/eval, Evaluate) measures retrieval quality on
// several corpora of different kinds (multi-session conversations, the
// Cranfield collection, the Go docs), each against every system side by
// side: recall@10, MRR@10, nDCG@10 where the judgments are graded, and
// query latency.
//
// It is its own Go module so that bleve and SQLite never enter the
// dependency graph of crux itself. README.md beside this file describes
// the method; bench/retrieval.sh and bench/eval.sh run them.
package retrieval

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Doc is one passage of the corpus: one line of the corpus JSONL file.
type Doc struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Text  string `json:"text"`
	// DocStart is the byte offset in Text where the doc comment begins
	// (Text is the declaration, a blank line, then the doc comment). The
	// query generator draws phrases from Text[DocStart:]; systems index
	// Title and Text and ignore it.
	DocStart int `json:"doc_start"`
}

// Query is one known-item query: one line of the queries JSONL file. Want
// is the id of the one passage the query was drawn from.
type Query struct {
	Query string `json:"query"`
	Want  string `json:"want"`
	// Kind says how the query was made ("phrase": a phrase of the doc text).
	Kind string `json:"kind"`
}

// System is one retrieval system under test.
type System interface {
	// Name is the name shown in the results.
	Name() string
	// Ingest indexes docs. The harness calls it once, on a new system, with
	// the whole corpus; a system batches as it sees fit.
	Ingest(docs []Doc) error
	// Query returns the ids of at most k distinct passages, best first.
	Query(q string, k int) ([]string, error)
	// SizeOnDisk is the size of the system's files after Ingest, or -1 for
	// a system that keeps its index in memory only.
	SizeOnDisk() (int64, error)
	// Close releases the system's resources.
	Close() error
}

// UsedSizer is a System whose files hold room it has not filled yet
// (bbolt grows its file ahead of the data): UsedOnDisk, called after Close,
// is the part in use.
type UsedSizer interface {
	UsedOnDisk() (int64, error)
}

// Factory makes a new, empty system whose files go under dir (a fresh
// directory of its own).
type Factory struct {
	Name string
	New  func(dir string) (System, error)
	// Optional leaves the system out of cmd/compare's default set (and
	// of Factories): it runs only when named. The evaluation (cmd/eval)
	// runs every system by default.
	Optional bool
}

var factories []Factory

// Register adds a system to those the harness runs. Each system's file
// registers it from an init function.
func Register(f Factory) { factories = append(factories, f) }

// Factories returns the registered systems that are not Optional, in
// name order: cmd/compare's default set.
func Factories() []Factory {
	var out []Factory
	for _, f := range AllFactories() {
		if !f.Optional {
			out = append(out, f)
		}
	}
	return out
}

// AllFactories returns every registered system, in name order.
func AllFactories() []Factory {
	out := append([]Factory(nil), factories...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PickFactories returns the systems named in the comma-separated list, in
// its order, or def when the list is empty; an unknown name is an error
// that lists the known ones.
func PickFactories(list string, def []Factory) ([]Factory, error) {
	if strings.TrimSpace(list) == "" {
		return def, nil
	}
	all := AllFactories()
	var out []Factory
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(f Factory) bool { return f.Name == name })
		if i < 0 {
			var names []string
			for _, f := range all {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("no system %q (built in: %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// ReadJSONL decodes one value of type T per line of the file at path.
func ReadJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// WriteJSONL writes one JSON line per value to the file at path, through a
// temporary file renamed into place, so that a cached file is never half
// written.
func WriteJSONL[T any](path string, vs []T) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := encodeJSONL(f, vs); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func encodeJSONL[T any](w io.Writer, vs []T) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Rank is the 1-based rank of want in got, or 0 when got lacks it.
func Rank(got []string, want string) int {
	for i, id := range got {
		if id == want {
			return i + 1
		}
	}
	return 0
}

// Quality is the known-item retrieval quality of a system over a query set,
// at cutoff K: Recall is the share of queries whose passage is among the
// first K results (with one relevant passage per query, recall@K and
// success@K are the same), MRR the mean of 1/rank over queries (0 when the
// passage is not among the first K).
type Quality struct {
	K      int     `json:"k"`
	Recall float64 `json:"recall"`
	MRR    float64 `json:"mrr"`
}

// Score computes Quality from the ranks Rank returned (0 = not found).
func Score(ranks []int, k int) Quality {
	q := Quality{K: k}
	if len(ranks) == 0 {
		return q
	}
	for _, r := range ranks {
		if r >= 1 && r <= k {
			q.Recall++
			q.MRR += 1 / float64(r)
		}
	}
	q.Recall /= float64(len(ranks))
	q.MRR /= float64(len(ranks))
	return q
}

// Percentile is the p-th percentile (0 < p ≤ 100) of ds by the
// nearest-rank method; ds need not be sorted and is not changed.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p/100*float64(len(s))+0.999999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

// Median is the median of ds (the mean of the two middle values for an
// even count); ds is not changed.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// DirSize is the total size of the regular files under dir; files removed
// while it walks are left out.
func DirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walk (a merge finishing)
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}
