package toolkit

import "encoding/json"

// decodeFlat decodes the JSON text b as encoding/json's Decoder with
// UseNumber decodes it into a map[string]any, for the arguments most calls
// pass: one object whose values are strings without escapes, numbers,
// booleans and null. It reports false for anything else (an escape, a
// nested value, a syntax error, anything after the object, even white
// space, as checkArguments's decoder requires), which the caller
// decodes with encoding/json instead: what decodeFlat accepts, it decodes
// as encoding/json does, and it never accepts what encoding/json rejects.
// Bytes of invalid UTF-8 are kept as they are (encoding/json would write
// U+FFFD); checkArguments refuses such arguments either way.
func decodeFlat(b []byte) (map[string]any, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	doc := make(map[string]any, 8)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return doc, i+1 == len(b)
	}
	for {
		key, j, ok := flatString(b, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return nil, false
		}
		var v any
		switch c := b[i]; {
		case c == '"':
			s, j, ok := flatString(b, i)
			if !ok {
				return nil, false
			}
			v, i = s, j
		case c == '-' || '0' <= c && c <= '9':
			j, ok := numberEnd(b, i)
			if !ok {
				return nil, false
			}
			v, i = json.Number(b[i:j]), j
		case hasLiteral(b, i, "true"):
			v, i = true, i+4
		case hasLiteral(b, i, "false"):
			v, i = false, i+5
		case hasLiteral(b, i, "null"):
			v, i = nil, i+4
		default:
			return nil, false // a nested value, or not JSON
		}
		doc[key] = v
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return doc, i+1 == len(b)
		default:
			return nil, false
		}
	}
}

// skipSpace returns the index of the first byte of b at or after i that is
// not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// flatString reads the JSON string starting at b[i] (a '"'), which must
// hold no escape and no control character, returning it and the index
// after its closing quote.
func flatString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

// numberEnd returns the index after the JSON number starting at b[i],
// reporting false if the text there is not one.
func numberEnd(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(i + 1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

// hasLiteral reports whether b holds lit at i.
func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}
