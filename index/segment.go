package index

import (
	"strings"
	"unicode/utf8"
)

// SegmentBytes is the most bytes of text a segment holds (about 300
// tokens).
const SegmentBytes = 1200

// Segment cuts text into segments of at most SegmentBytes bytes, each
// trimmed of surrounding white space, none empty, that together hold
// every word of text in order. It cuts at paragraph boundaries (a blank
// line, or a line starting a Markdown heading), packing short paragraphs
// together; a paragraph longer than SegmentBytes is cut after a sentence
// end (". ", "! ", "? ") or else at a space, and a run with neither at a
// UTF-8 boundary. Text with no words but white space has no segments.
func Segment(text string) []string {
	var segs []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			segs = append(segs, s)
		}
		cur.Reset()
	}
	for _, p := range paragraphs(text) {
		if cur.Len() > 0 && (isHeading(p) || cur.Len()+2+len(p) > SegmentBytes) {
			flush()
		}
		for len(p) > SegmentBytes {
			cut := cutPoint(p)
			cur.WriteString(p[:cut])
			flush()
			p = strings.TrimLeft(p[cut:], " \t\r\n")
		}
		if p == "" {
			continue
		}
		if cur.Len() > 0 {
			cur.WriteString("\n\n")
		}
		cur.WriteString(p)
	}
	flush()
	return segs
}

// paragraphs splits text at blank lines and before Markdown headings,
// each paragraph trimmed, empty ones dropped.
func paragraphs(text string) []string {
	var out []string
	var cur []string
	end := func() {
		if p := strings.TrimSpace(strings.Join(cur, "\n")); p != "" {
			out = append(out, p)
		}
		cur = cur[:0]
	}
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.TrimSpace(line) == "":
			end()
			continue
		case isHeading(line):
			end()
		}
		cur = append(cur, line)
	}
	end()
	return out
}

// isHeading reports whether s starts with a Markdown ATX heading.
func isHeading(s string) bool {
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	return n >= 1 && n <= 6 && (n == len(s) || s[n] == ' ' || s[n] == '\t')
}

// cutPoint returns where to cut p, longer than SegmentBytes: just after
// the last sentence end within SegmentBytes, else at its last space, else
// at the last UTF-8 boundary; never 0.
func cutPoint(p string) int {
	window := p[:SegmentBytes]
	best := -1
	for _, end := range []string{". ", "! ", "? ", ".\n", "\n"} {
		if i := strings.LastIndex(window, end); i >= 0 && i+1 > best {
			best = i + 1
		}
	}
	if best > SegmentBytes/2 {
		return best
	}
	if i := strings.LastIndexAny(window, " \t"); i > 0 {
		return i
	}
	cut := SegmentBytes
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	if cut == 0 {
		cut = SegmentBytes
	}
	return cut
}
