package codec

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The appenders below write JSON exactly as encoding/json's Marshal does
// (HTML characters escaped), for the hand-written encoders of the hottest
// answers; their tests hold them to encoding/json byte for byte.

const hexDigits = "0123456789abcdef"

// plain marks the bytes AppendString copies as they are: ASCII from space
// on, but '"', '\\', '<', '>' and '&'.
var plain = func() (t [256]uint8) {
	for c := 0x20; c < 0x80; c++ {
		if c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			t[c] = 1
		}
	}
	return t
}()

// AppendString appends s as a JSON string: '"' and '\\' escaped, control
// characters as \b, \f, \n, \r, \t or \u00XX, '<', '>' and '&' as
// \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028 and \u2029, and
// each byte of invalid UTF-8 as \ufffd.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Runs of plain bytes, most of most strings, eight at a time.
		for i+8 <= len(s) && plain[s[i]]&plain[s[i+1]]&plain[s[i+2]]&plain[s[i+3]]&
			plain[s[i+4]]&plain[s[i+5]]&plain[s[i+6]]&plain[s[i+7]] != 0 {
			i += 8
		}
		if i == len(s) {
			break
		}
		if plain[s[i]] != 0 {
			i++
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendFloat appends f as a JSON number, or reports false for NaN and
// the infinities, which JSON cannot hold.
func AppendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	// Most numbers crux writes are scores rounded to four decimals. Below
	// 1e9 a number n/1e4 is written as those digits (floats there are far
	// closer together than 1e-4, so no shorter decimal stands for it),
	// without strconv's search for the shortest form.
	if math.Abs(f) < 1e9 {
		if n := math.Round(f * 1e4); n/1e4 == f && (n != 0 || !math.Signbit(f)) {
			return appendFixed4(b, int64(n)), true
		}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 → e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendFixed4 appends n/1e4 in decimal, with no trailing zeros.
func appendFixed4(b []byte, n int64) []byte {
	if n < 0 {
		b, n = append(b, '-'), -n
	}
	b = strconv.AppendInt(b, n/1e4, 10)
	frac := n % 1e4
	if frac == 0 {
		return b
	}
	b = append(b, '.', byte('0'+frac/1000), byte('0'+frac/100%10), byte('0'+frac/10%10), byte('0'+frac%10))
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return b
}

// AppendStrings appends ss as a JSON array of strings, null when nil.
func AppendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}
