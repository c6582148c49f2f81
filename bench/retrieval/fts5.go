package retrieval

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, "sqlite"
)

func init() {
	Register(Factory{Name: "sqlite-fts5", Optional: true, New: func(dir string) (System, error) { return NewFTS5(dir) }})
}

// FTS5 is SQLite's full-text index (modernc.org/sqlite, pure Go) in a
// database file under the system's directory: one FTS5 table of two
// columns, title and text, with the porter tokenizer over unicode61
// (tokenize='porter unicode61': Unicode letters and digits, case folded,
// diacritics removed, Porter-stemmed; no stop words). A query is the
// question's words, each quoted, OR'ed, ranked by FTS5's bm25() (k1 1.2,
// b 0.75, both columns weighted 1), ties by insertion order.
type FTS5 struct {
	path string
	db   *sql.DB
	stmt *sql.Stmt
	ids  []string // rowid-1 → document id
}

// NewFTS5 creates an empty FTS5 index in a new database under dir.
func NewFTS5(dir string) (*FTS5, error) {
	path := filepath.Join(dir, "fts5.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE VIRTUAL TABLE docs USING fts5(title, text, tokenize='porter unicode61')`); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite-fts5: %w", err)
	}
	return &FTS5{path: path, db: db}, nil
}

// Name implements System.
func (*FTS5) Name() string { return "sqlite-fts5" }

// Ingest implements System: every document in one transaction, rowid i+1
// for docs[i].
func (x *FTS5) Ingest(docs []Doc) error {
	tx, err := x.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ins, err := tx.Prepare(`INSERT INTO docs(rowid, title, text) VALUES (?, ?, ?)`)
	if err != nil {
		return err
	}
	base := len(x.ids)
	for i, d := range docs {
		if _, err := ins.Exec(base+i+1, d.Title, d.Text); err != nil {
			return err
		}
	}
	if err := ins.Close(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, d := range docs {
		x.ids = append(x.ids, d.ID)
	}
	if x.stmt == nil {
		x.stmt, err = x.db.Prepare(`SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), rowid LIMIT ?`)
	}
	return err
}

// FTS5Match is the MATCH expression of a query: its words (runs of letters
// and digits, as unicode61 splits them), each once, in double quotes so
// that no word is read as an operator (AND, OR, NOT, NEAR) or a column
// filter, joined by OR. A query without a word gives "".
func FTS5Match(q string) string {
	seen := map[string]bool{}
	var parts []string
	for _, w := range strings.FieldsFunc(q, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		w = strings.ToLower(w)
		if seen[w] {
			continue
		}
		seen[w] = true
		parts = append(parts, `"`+strings.ReplaceAll(w, `"`, `""`)+`"`)
	}
	return strings.Join(parts, " OR ")
}

// Query implements System.
func (x *FTS5) Query(q string, k int) ([]string, error) {
	m := FTS5Match(q)
	if m == "" || x.stmt == nil {
		return nil, nil
	}
	rows, err := x.stmt.Query(m, k)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]string, 0, k)
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, x.ids[id-1])
	}
	return out, rows.Err()
}

// SizeOnDisk implements System: the database file (and its journal, if
// one is left).
func (x *FTS5) SizeOnDisk() (int64, error) {
	var n int64
	for _, p := range []string{x.path, x.path + "-journal", x.path + "-wal"} {
		fi, err := os.Stat(p)
		if err == nil {
			n += fi.Size()
		} else if !os.IsNotExist(err) {
			return 0, err
		}
	}
	return n, nil
}

// Close implements System.
func (x *FTS5) Close() error {
	if x.stmt != nil {
		x.stmt.Close()
	}
	return x.db.Close()
}
