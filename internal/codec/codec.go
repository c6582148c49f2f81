// Package codec holds the small encoding helpers several crux packages
// share.
package codec

import (
	"bytes"
	"encoding/json"
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
