package memio

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/crux-go/crux/store"
)

// The reference MCP memory server (@modelcontextprotocol/server-memory)
// keeps a knowledge graph in a JSONL file, one line per entity or
// relation:
//
//	{"type":"entity","name":"Ada Lovelace","entityType":"person","observations":["Born in London in 1815"]}
//	{"type":"relation","from":"Ada Lovelace","to":"Analytical Engine","relationType":"wrote notes on"}
//
// [ReadMCPMemory] maps them to crux facts, all shared, under the entity's
// name:
//
//   - an entity's type: key "entity_type", value the type;
//   - each observation: key "observation:" and the first 16 hex digits of
//     the SHA-256 of its text, value the text, so that one observation is
//     one fact however the list is ordered, and importing again finds it;
//   - a relation: under its from entity, key "relation:" and the first 16
//     hex digits of the SHA-256 of relationType, NUL, to; value
//     "<from> <relationType> <to>", which queries for any of the three
//     words find.
//
// Entity names must be names crux stores: at most 1024 bytes, no control
// characters, not starting with "__".

// mcpLine is either kind of line.
type mcpLine struct {
	Type         string   `json:"type"`
	Name         *string  `json:"name"`
	EntityType   *string  `json:"entityType"`
	Observations []string `json:"observations"`
	From         *string  `json:"from"`
	To           *string  `json:"to"`
	RelationType *string  `json:"relationType"`
}

// MCPEntityType and the others are the keys of the facts an MCP memory
// file maps to (see the package documentation of this file).
const (
	MCPEntityType        = "entity_type"
	MCPObservationPrefix = "observation:"
	MCPRelationPrefix    = "relation:"
)

// shortHash is the first 16 hex digits of the SHA-256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// ReadMCPMemory reads an MCP memory server's file from r and calls fn
// with the facts of each line (checked with [store.CheckFactValue]) and
// its line number. An empty file holds no facts. A line that is neither an entity nor a relation, that
// lacks a field, or whose facts crux cannot store ends the read with a
// [*LineError]; so does an error of fn.
func ReadMCPMemory(r io.Reader, fn func(line int, vals []store.FactValue) error) error {
	return lines(r, func(n int, b []byte) error {
		var l mcpLine
		if err := decodeStrict(b, &l); err != nil {
			return fmt.Errorf("not an MCP memory line {\"type\":\"entity\"|\"relation\", ...}: %w", err)
		}
		var vals []store.FactValue
		switch l.Type {
		case "entity":
			if l.Name == nil || l.EntityType == nil || l.From != nil || l.To != nil || l.RelationType != nil {
				return errors.New(`an entity line has "name", "entityType" and "observations", and no other field`)
			}
			vals = append(vals, store.FactValue{Entity: *l.Name, Key: MCPEntityType, Value: *l.EntityType})
			for _, o := range l.Observations {
				vals = append(vals, store.FactValue{Entity: *l.Name, Key: MCPObservationPrefix + shortHash(o), Value: o})
			}
		case "relation":
			if l.From == nil || l.To == nil || l.RelationType == nil || l.Name != nil || l.EntityType != nil || l.Observations != nil {
				return errors.New(`a relation line has "from", "to" and "relationType", and no other field`)
			}
			vals = append(vals, store.FactValue{Entity: *l.From, Key: MCPRelationPrefix + shortHash(*l.RelationType+"\x00"+*l.To),
				Value: strings.Join([]string{*l.From, *l.RelationType, *l.To}, " ")})
		default:
			return fmt.Errorf(`type %q is neither "entity" nor "relation"`, l.Type)
		}
		for i := range vals {
			if err := store.CheckFactValue(&vals[i]); err != nil {
				return err
			}
		}
		return fn(n, vals)
	})
}
