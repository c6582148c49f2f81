// Package memio reads and writes the files that move memories in and out
// of crux: crux's own export format, and the JSONL file of the reference
// MCP memory server (@modelcontextprotocol/server-memory).
//
// # The export format
//
// An export is JSON Lines (UTF-8, one JSON object per line, "\n" after
// each). The first line is the [Header]:
//
//	{"format":"crux-memories","version":1,"tenant":"default","agent":"alice","exported_at":"2026-12-02T04:30:00Z"}
//
// Every other line is one [store.MemoryRecord], {"type": T, T: {...}},
// where T is fact, session, constraint or artefact and the object is the
// record as the store keeps it (its JSON form; see package store, which
// also says what an export holds and what an import does with each
// record). Facts come chain by chain, every version of each; then
// sessions, constraints and artefacts' metadata. A reader refuses a
// header of another format or of a later version, a line that is not one
// record of a known type (unknown fields included), and a line longer
// than [MaxLineBytes].
//
// Package memio does no I/O but on the readers and writers it is given,
// and keeps at most one page or batch of records in memory: exports and
// imports of any size run in bounded memory.
package memio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/crux-go/crux/store"
)

// Format and Version are the header's format name and the version of the
// format this package writes and reads.
const (
	Format  = "crux-memories"
	Version = 1
)

// MaxLineBytes bounds one line of an import file: a fact's value or a
// session's state (1 MiB each at most) with the rest of its record and
// JSON escapes.
const MaxLineBytes = 8 << 20

// Header is the first line of an export.
type Header struct {
	Format  string `json:"format"`  // always Format
	Version int    `json:"version"` // the format's version
	Tenant  string `json:"tenant"`  // the tenant exported: every record is of it
	// Agent is the agent whose private records the export holds, "" for
	// none.
	Agent      string    `json:"agent,omitempty"`
	ExportedAt time.Time `json:"exported_at"`
}

// LineError is an import file's line that cannot be read or imported.
type LineError struct {
	Line int // 1 for the first line
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// PageFunc returns the export page that starts at cursor ("" for the
// first); see [store.ExportMemories].
type PageFunc func(ctx context.Context, cursor string) (*store.MemoryExportPage, error)

// ExportStats counts the records an export wrote, by type.
type ExportStats struct {
	Facts       int `json:"facts"`
	Sessions    int `json:"sessions"`
	Constraints int `json:"constraints"`
	Artefacts   int `json:"artefacts"`
}

// Export writes the export of h.Tenant to w: h, then every record of the
// pages next returns, page after page until one has no Next. It keeps one
// page in memory. On error, what was written is a prefix of the export
// without a final mark: a reader cannot tell it from a whole export of
// fewer records, so a caller must report the error.
func Export(ctx context.Context, w io.Writer, h Header, next PageFunc) (ExportStats, error) {
	var st ExportStats
	h.Format, h.Version = Format, Version
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil {
		return st, err
	}
	cursor := ""
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		page, err := next(ctx, cursor)
		if err != nil {
			return st, err
		}
		for i := range page.Records {
			r := &page.Records[i]
			if err := enc.Encode(r); err != nil {
				return st, err
			}
			switch r.Type {
			case store.MemoryFact:
				st.Facts++
			case store.MemorySession:
				st.Sessions++
			case store.MemoryConstraint:
				st.Constraints++
			case store.MemoryArtefact:
				st.Artefacts++
			}
		}
		if page.Next == "" {
			return st, bw.Flush()
		}
		if page.Next == cursor {
			return st, fmt.Errorf("memio: export: the page at cursor %q did not move on", cursor)
		}
		cursor = page.Next
	}
}

// lines calls fn with each line of r that is not blank, and its number.
func lines(r io.Reader, fn func(n int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := fn(n, sc.Bytes()); err != nil {
			var le *LineError
			if errors.As(err, &le) {
				return err
			}
			return &LineError{Line: n, Err: err}
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return &LineError{Line: n + 1, Err: fmt.Errorf("longer than %d bytes", MaxLineBytes)}
	}
	return sc.Err()
}

// decodeStrict decodes the JSON object line into v, refusing unknown
// fields and anything after the object.
func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// Read reads an export from r: its header, then each record, checked with
// [store.CheckMemoryRecord] for the header's tenant, which fn is called
// with, and its line number. The first line that is not a header, not a
// record, or not importable ends the read with a [*LineError]; so does an
// error of fn (wrapped, unless it is a *LineError already).
func Read(r io.Reader, fn func(line int, rec *store.MemoryRecord) error) (Header, error) {
	var h Header
	seen := false
	err := lines(r, func(n int, line []byte) error {
		if !seen {
			seen = true
			if err := decodeStrict(line, &h); err != nil {
				return fmt.Errorf("not a crux memories header {\"format\":%q,\"version\",\"tenant\",...}: %w", Format, err)
			}
			switch {
			case h.Format != Format:
				return fmt.Errorf("format %q is not %q", h.Format, Format)
			case h.Version > Version:
				return fmt.Errorf("format version %d is newer than this crux reads (%d): import it with a newer crux", h.Version, Version)
			case h.Version < 1:
				return fmt.Errorf("format version %d is not a version", h.Version)
			case h.Tenant == "":
				return errors.New("the header names no tenant")
			}
			return nil
		}
		var rec store.MemoryRecord
		if err := decodeStrict(line, &rec); err != nil {
			return fmt.Errorf("not a record {\"type\", ...}: %w", err)
		}
		if err := store.CheckMemoryRecord(&rec, h.Tenant); err != nil {
			return err
		}
		return fn(n, &rec)
	})
	if err == nil && !seen {
		err = errors.New("memio: the file is empty: an export starts with its header line")
	}
	return h, err
}
