package c2pa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// JUMBF (ISO/IEC 19566-5) boxes, as C2PA uses them.
//
// A box is a 32-bit big-endian length (LBox, the whole box), a 4-byte type
// (TBox) and the payload. A superbox (type jumb) holds a description box
// (jumd: a 16-byte type UUID, a toggles byte, and with toggle 0x02 a
// NUL-terminated UTF-8 label) followed by its content boxes.

// Superbox content types: the first four bytes of the type UUID.
const (
	typeStore     = "c2pa" // the manifest store
	typeManifest  = "c2ma" // a standard manifest
	typeUpdate    = "c2um" // an update manifest
	typeAssertion = "c2as" // the assertion store
	typeClaim     = "c2cl" // the claim
	typeSignature = "c2cs" // the claim signature
	typeCBOR      = "cbor" // a CBOR assertion
)

// uuidTail is the last 12 bytes of every C2PA JUMBF type UUID.
var uuidTail = []byte{0x00, 0x11, 0x00, 0x10, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}

// togglesLabelled is the jumd toggles byte crux writes: requestable (0x01)
// and a label present (0x02).
const togglesLabelled = 0x03

// Bounds of the parser.
const (
	maxBoxDepth = 8    // superboxes inside superboxes
	maxBoxes    = 1024 // boxes in one manifest store
	boxHeader   = 8    // LBox and TBox
)

// appendBox appends the box of type typ with the concatenated payloads.
func appendBox(dst []byte, typ string, payloads ...[]byte) []byte {
	n := boxHeader
	for _, p := range payloads {
		n += len(p)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, typ...)
	for _, p := range payloads {
		dst = append(dst, p...)
	}
	return dst
}

// superBox returns a jumb box of content type t labelled label, holding
// the boxes content.
func superBox(t, label string, content ...[]byte) []byte {
	desc := make([]byte, 0, 16+1+len(label)+1)
	desc = append(desc, t...)
	desc = append(desc, uuidTail...)
	desc = append(desc, togglesLabelled)
	desc = append(desc, label...)
	desc = append(desc, 0)
	parts := append([][]byte{appendBox(nil, "jumd", desc)}, content...)
	return appendBox(nil, "jumb", parts...)
}

// cborBox returns a CBOR content box.
func cborBox(b []byte) []byte { return appendBox(nil, "cbor", b) }

// box is one parsed box.
type box struct {
	typ     string
	payload []byte
	raw     []byte // the whole box, header included
	header  int    // the header's length: 8, or 16 with a 64-bit length
}

// superbox is one parsed jumb box.
type superbox struct {
	ctype   string // the content type: the first 4 bytes of the type UUID
	label   string
	content []box  // the boxes after the description box
	body    []byte // the box without its header: what a hashed URI hashes
	depth   int
}

// errMalformed wraps every structural defect the parser finds.
var errMalformed = errors.New("malformed JUMBF")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// parseBoxes splits b into its boxes. count bounds how many boxes a whole
// parse may meet.
func parseBoxes(b []byte, count *int) ([]box, error) {
	var out []box
	for len(b) > 0 {
		if *count++; *count > maxBoxes {
			return nil, malformed("more than %d boxes", maxBoxes)
		}
		if len(b) < boxHeader {
			return nil, malformed("%d trailing bytes, too few for a box header", len(b))
		}
		n := uint64(binary.BigEndian.Uint32(b))
		typ := string(b[4:8])
		hdr := boxHeader
		switch n {
		case 0: // the box runs to the end
			n = uint64(len(b))
		case 1: // a 64-bit length follows
			if len(b) < 16 {
				return nil, malformed("box %q: truncated extended length", typ)
			}
			n, hdr = binary.BigEndian.Uint64(b[8:]), 16
		}
		if n < uint64(hdr) || n > uint64(len(b)) {
			return nil, malformed("box %q: length %d, but %d bytes remain", typ, n, len(b))
		}
		out = append(out, box{typ: typ, payload: b[hdr:n], raw: b[:n], header: hdr})
		b = b[n:]
	}
	return out, nil
}

// parseSuperBox reads bx as a jumb superbox.
func parseSuperBox(bx box, depth int, count *int) (*superbox, error) {
	if bx.typ != "jumb" {
		return nil, malformed("box %q where a jumb superbox belongs", bx.typ)
	}
	if depth > maxBoxDepth {
		return nil, malformed("superboxes nested deeper than %d", maxBoxDepth)
	}
	boxes, err := parseBoxes(bx.payload, count)
	if err != nil {
		return nil, err
	}
	if len(boxes) == 0 || boxes[0].typ != "jumd" {
		return nil, malformed("superbox without a jumd description box first")
	}
	d := boxes[0].payload
	if len(d) < 17 {
		return nil, malformed("jumd box of %d bytes, shorter than its type UUID and toggles", len(d))
	}
	sb := &superbox{content: boxes[1:], body: bx.raw[bx.header:], depth: depth}
	if !bytes.Equal(d[4:16], uuidTail) {
		sb.ctype = fmt.Sprintf("uuid:%x", d[:16]) // not a C2PA type
	} else {
		sb.ctype = string(d[:4])
	}
	toggles, rest := d[16], d[17:]
	if toggles&^0x1f != 0 {
		return nil, malformed("jumd toggles %#02x set reserved bits", toggles)
	}
	if toggles&0x02 != 0 {
		end := bytes.IndexByte(rest, 0)
		if end < 0 {
			return nil, malformed("jumd label is not NUL-terminated")
		}
		sb.label, rest = string(rest[:end]), rest[end+1:]
	}
	for _, f := range []struct {
		bit  byte
		size int
	}{{0x04, 4}, {0x08, 32}} { // an ID, a SHA-256 of the content
		if toggles&f.bit != 0 {
			if len(rest) < f.size {
				return nil, malformed("jumd box too short for the fields its toggles announce")
			}
			rest = rest[f.size:]
		}
	}
	if len(rest) > 0 && toggles&0x10 == 0 {
		return nil, malformed("%d stray bytes in a jumd box", len(rest))
	}
	return sb, nil
}

// children parses the content boxes of sb that are superboxes.
func (sb *superbox) children(count *int) ([]*superbox, error) {
	var out []*superbox
	for _, bx := range sb.content {
		if bx.typ != "jumb" {
			continue
		}
		c, err := parseSuperBox(bx, sb.depth+1, count)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// firstContent returns the payload of sb's first content box of type typ.
func (sb *superbox) firstContent(typ string) ([]byte, bool) {
	for _, bx := range sb.content {
		if bx.typ == typ {
			return bx.payload, true
		}
	}
	return nil, false
}
