package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strconv"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Bounded answers. No answer grows without limit with the data: every
// listing has a row cap, says how many rows there were in all (or that more
// remain) and sets truncated when it left some out. A listing also stops
// before its answer would pass answerBytes, so that a default answer stays
// under 64 KB whatever the store holds; a single row larger than that comes
// back alone.

// answerBytes bounds the size of a listing's answer: the whole tool result
// as JSON, whose text and structuredContent carry the answer twice.
const answerBytes = 60_000

// wireBytes is what v adds to a tool result as JSON: its JSON once as
// structuredContent and once more, escaped, as the text content.
//
// Quoted as a JSON string, that JSON grows by one byte for each quote and
// backslash: json.Marshal writes no other byte a string must escape
// (control characters, <, >, &, U+2028 and U+2029 come out as \u
// escapes, whose backslash is counted).
func wireBytes(v any) int {
	b, _ := json.Marshal(v)
	return 2*len(b) + bytes.Count(b, []byte{'"'}) + bytes.Count(b, []byte{'\\'})
}

// rowCap admits the rows of one listing, in order: at most maxRows
// (0: no row cap), and after the first only while the answer stays under
// answerBytes. Once it refuses a row it refuses every later one.
type rowCap struct {
	maxRows   int
	left      int // bytes the rows may still take
	rows      int
	truncated bool // a row was refused
}

// newRowCap returns the cap of a listing of at most maxRows rows in an
// answer that, without any row, is empty.
func newRowCap(maxRows int, empty any) *rowCap {
	return &rowCap{maxRows: maxRows, left: answerBytes - wireBytes(empty)}
}

// take reports whether row joins the listing, counting it if so.
func (r *rowCap) take(row any) bool {
	if r.truncated || r.maxRows > 0 && r.rows >= r.maxRows {
		r.truncated = true
		return false
	}
	cost := wireBytes(row) + 2 // and a comma in each copy
	if r.rows > 0 && cost > r.left {
		r.truncated = true
		return false
	}
	r.rows++
	r.left -= cost
	return true
}

// ---- history cursors ----

// Limits of fact_history and memory_history.
const (
	historyLimit    = 100  // default versions per page
	historyMaxLimit = 1000 // largest limit
)

// historyTag binds a cursor to the walk that made it: the tool, the
// caller and the chains of (entity, key) it reads.
func historyTag(tool string, c toolkit.Caller, entity, key string, chains store.HistoryChain) []byte {
	h := blake3.New(32, nil)
	for _, s := range []string{tool, c.TenantID(), c.Identity(), entity, key, strconv.Itoa(int(chains))} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return h.Sum(nil)[:8]
}

// historyCursorPrefix starts every history cursor; the rest is base64url.
const historyCursorPrefix = "h1."

// encodeHistoryCursor is the opaque next_cursor of a history page.
func encodeHistoryCursor(tag []byte, pos store.HistoryPos) string {
	b := binary.BigEndian.AppendUint32(nil, pos.Shared)
	b = binary.BigEndian.AppendUint32(b, pos.Private)
	b = append(b, tag...)
	return historyCursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeHistoryCursor reads a cursor of tool's walk tagged tag; "" starts
// at the newest versions. Anything else is a -32602 naming cursor.
func decodeHistoryCursor(tool, cursor string, tag []byte) (store.HistoryPos, error) {
	var pos store.HistoryPos
	if cursor == "" {
		return pos, nil
	}
	bad := toolkit.InvalidParams(tool, "cursor", "is not a next_cursor this tool returned; pass it back unchanged")
	if len(cursor) <= len(historyCursorPrefix) || cursor[:len(historyCursorPrefix)] != historyCursorPrefix {
		return pos, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor[len(historyCursorPrefix):])
	if err != nil || len(b) != 8+len(tag) {
		return pos, bad
	}
	pos.Shared, pos.Private = binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	if pos.Shared == 0 && pos.Private == 0 {
		return pos, bad // every cursor fixes the position of a chain it walks
	}
	if string(b[8:]) != string(tag) {
		return pos, toolkit.InvalidParams(tool, "cursor", "belongs to another history: pass it with the same arguments as the call that returned it")
	}
	return pos, nil
}

// historyPageArgs are the paging arguments of fact_history and
// memory_history.
type historyPageArgs struct {
	Limit  *int   `json:"limit,omitempty" schema:"default=100;maximum=1000;minimum=1"`
	Cursor string `json:"cursor,omitempty" schema:"minLength=1"`
}

// HistoryPage is a page of fact_history or memory_history: versions,
// newest first, and the cursor of the next page.
type HistoryPage[R any] struct {
	Versions   []R    `json:"versions"`
	NextCursor string `json:"next_cursor,omitempty"`
	Truncated  bool   `json:"truncated"`
}

// readHistoryPage reads the page of q that in names, as tool: q.From and
// q.Limit come from in, and the page keeps the versions, turned into rows
// by row, that fit in the answer.
func readHistoryPage[R any](tx store.Tx, tool string, c toolkit.Caller, q store.HistoryQuery, in historyPageArgs,
	row func(*store.Fact) R) (*HistoryPage[R], error) {
	tag := historyTag(tool, c, q.Entity, q.Key, q.Chains)
	from, err := decodeHistoryCursor(tool, in.Cursor, tag)
	if err != nil {
		return nil, err
	}
	q.From, q.Limit = from, historyLimit
	if in.Limit != nil {
		q.Limit = *in.Limit
	}
	p, err := store.ReadHistory(tx, q)
	if err != nil {
		return nil, err
	}
	out := &HistoryPage[R]{Versions: []R{}}
	rc := newRowCap(0, &HistoryPage[R]{Versions: []R{}, NextCursor: encodeHistoryCursor(tag, store.HistoryPos{}), Truncated: true})
	for _, f := range p.Facts {
		r := row(f)
		if !rc.take(r) {
			break
		}
		out.Versions = append(out.Versions, r)
	}
	if n := len(out.Versions); n < len(p.Facts) || p.More {
		out.NextCursor, out.Truncated = encodeHistoryCursor(tag, p.After(n)), true
	}
	return out, nil
}
