// Package codec holds the small encoding helpers several crux packages
// share.
package codec

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"unicode/utf8"
)

// Must returns v, and panics if err is not nil. It is for values built
// once from constant inputs at start-up, such as CBOR encoding modes, whose
// construction fails only on a programming error.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// MarshalNoEscape is json.Marshal without HTML escaping: <, > and & are
// written as they are, so the bytes are what a reader of the text expects
// (and what a hash over canonical JSON covers).
func MarshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// scratch is a reusable buffer with an encoder writing to it, as
// json.Marshal encodes (HTML escaped).
type scratch struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// scratches holds the buffers of MarshalledLen and AppendMarshal.
var scratches = sync.Pool{New: func() any {
	s := new(scratch)
	s.enc = json.NewEncoder(&s.buf)
	return s
}}

// maxScratch is the largest buffer kept for reuse.
const maxScratch = 64 << 10

// MarshalledLen returns len(json.Marshal(v)), or 0 if v cannot be
// marshalled, without keeping the encoding: it encodes into a buffer
// reused across calls.
func MarshalledLen(v any) int {
	s := getScratch()
	defer s.put()
	if s.enc.Encode(v) != nil {
		return 0
	}
	return s.buf.Len() - 1 // Encode ends the value with a newline
}

// AppendMarshal appends json.Marshal(v) to b, encoding it into a buffer
// reused across calls. On error it returns b unchanged.
func AppendMarshal(b []byte, v any) ([]byte, error) {
	s := getScratch()
	defer s.put()
	if err := s.enc.Encode(v); err != nil {
		return b, err
	}
	return append(b, s.buf.Bytes()[:s.buf.Len()-1]...), nil // less Encode's newline
}

// Appended returns what appendTo appends to an empty buffer, as a string,
// and appendTo's report. The buffer is reused across calls (the string is
// a copy at its final length), so that writing a long text costs one
// allocation, not one per doubling.
func Appended(appendTo func(b []byte) ([]byte, bool)) (string, bool) {
	s := getScratch()
	defer s.put()
	b, ok := appendTo(s.buf.AvailableBuffer())
	s.buf.Write(b) // keeps b's growth for the next call
	return s.buf.String(), ok
}

// getScratch takes an empty scratch from scratches.
func getScratch() *scratch {
	s := scratches.Get().(*scratch)
	s.buf.Reset()
	return s
}

// put returns s to scratches, unless its buffer has grown past maxScratch.
func (s *scratch) put() {
	if s.buf.Cap() <= maxScratch {
		scratches.Put(s)
	}
}

// MarshalString returns json.Marshal(v) as a string, encoded straight
// into the string's memory (json.Marshal's bytes converted to a string
// would be copied once more).
func MarshalString(v any) (string, error) {
	var b strings.Builder
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return "", err
	}
	s := b.String()
	return s[:len(s)-1], nil // Encode ends the value with a newline
}

// CutUTF8 returns the longest prefix of s of at most n bytes that does not
// end inside a character of s.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
