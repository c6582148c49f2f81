package store

import (
	"encoding/hex"
	"encoding/json"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/internal/codec"
)

// Decisions are shared facts under [DecisionsPrefix]<session_id>, one key
// per decision (its id), so none supersedes another; clients cannot write
// reserved entities, so the log is append-only.

// DecisionsPrefix starts the entity of every decision:
// __decisions__::<session_id>.
const DecisionsPrefix = "__decisions__::"

// DecisionContent is what a decision hash covers. Its canonical JSON has
// the keys in this (alphabetical) order, no whitespace, no HTML escaping,
// empty arrays as [] and the confidence in Go's shortest float form.
type DecisionContent struct {
	Action       string   `json:"action"`
	Alternatives []string `json:"alternatives"`
	Confidence   float64  `json:"confidence"`
	ContextRefs  []string `json:"context_refs"`
	Rationale    string   `json:"rationale"`
	SessionID    string   `json:"session_id"`
}

// DecisionHash is the lowercase hex BLAKE3 of d's canonical JSON.
func DecisionHash(d DecisionContent) (string, error) {
	if d.Alternatives == nil {
		d.Alternatives = []string{}
	}
	if d.ContextRefs == nil {
		d.ContextRefs = []string{}
	}
	b, err := codec.MarshalNoEscape(d)
	if err != nil {
		return "", err
	}
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// DecisionRecord is the value of a decision fact, as JSON, and the payload
// of its receipt (kind "decision").
type DecisionRecord struct {
	DecisionID   string   `json:"decision_id" cbor:"decision_id"`
	DecisionHash string   `json:"decision_hash" cbor:"decision_hash"`
	FactID       string   `json:"fact_id" cbor:"fact_id"`
	Entity       string   `json:"entity" cbor:"entity"`
	Action       string   `json:"action" cbor:"action"`
	Rationale    string   `json:"rationale" cbor:"rationale"`
	Alternatives []string `json:"alternatives" cbor:"alternatives"`
	Confidence   float64  `json:"confidence" cbor:"confidence"`
	ContextRefs  []string `json:"context_refs" cbor:"context_refs"`
	SessionID    string   `json:"session_id" cbor:"session_id"`
	RecordedBy   string   `json:"recorded_by" cbor:"recorded_by"`
	RecordedAt   string   `json:"recorded_at" cbor:"recorded_at"`
	ReceiptID    string   `json:"receipt_id,omitempty" cbor:"-"`
}

// NewDecisionID returns a new random decision id, "dec_" and 32 hex digits.
func NewDecisionID() string { return NewID("dec_") }

// PutDecision stores rec as a shared fact of s.Tenant, written by s.Agent
// ("" for an anonymous caller), under rec.Entity with key rec.DecisionID and id
// rec.FactID; its value is rec as JSON with receiptID, the id of the
// decision's receipt, which is also the fact's source_receipt.
func PutDecision(tx Tx, s Scope, rec DecisionRecord, receiptID string, now time.Time) error {
	rec.ReceiptID = receiptID
	value, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, _, err = PutFact(tx, NewFact{Scope: s,
		Entity: rec.Entity, Key: rec.DecisionID,
		Value: string(value), SourceReceipt: receiptID, Confidence: rec.Confidence, Now: now, ID: rec.FactID,
	})
	return err
}
