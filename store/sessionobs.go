package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Session observations are signed records of what happened in an agent's
// session (a tool call seen by a host, a handoff), captured through
// crux.Server.Observe. Each belongs to the tenant, the agent (its
// principal; "" for anonymous callers) and the session it was recorded
// for, and only that agent reads it. A session's observations form a hash
// chain: each record's PrevHash is the body hash of the one before it.
const (
	bucketSessionObs     = "observations"      // tenant, agent, session, NUL, seq (8 bytes BE) → JSON SessionObservation
	bucketSessionObsID   = "observations.id"   // tenant, agent, session, observation id → seq (8 bytes BE)
	bucketSessionObsHead = "observations.head" // tenant, agent, session → seq (8 bytes BE), body hash
)

// ObservationReceipt is the signature of an observation: the algorithm,
// the key id of the signer, and the lowercase hex of the BLAKE3 body hash
// and of the Ed25519 signature over the body.
type ObservationReceipt struct {
	Alg       string `json:"alg"`
	SignedBy  string `json:"signed_by"`
	BodyHash  string `json:"body_hash"`
	Signature string `json:"signature"`
}

// SessionObservation is one observation as stored.
type SessionObservation struct {
	ObservationID string             `json:"observation_id"`
	Tenant        string             `json:"tenant_id"`
	SessionID     string             `json:"session_id"`
	Seq           uint64             `json:"seq"`
	TS            time.Time          `json:"ts"`
	Provider      string             `json:"provider"`
	Principal     string             `json:"principal"`
	Kind          string             `json:"kind"`
	Payload       json.RawMessage    `json:"payload"`
	PrevHash      string             `json:"prev_hash"` // hex; 64 zeros for the first
	Receipt       ObservationReceipt `json:"receipt"`
}

// sessionObsPrefix is the prefix of a session's keys in bucketSessionObs:
// the session name is NUL-terminated, so no session's keys run into
// another's.
func sessionObsPrefix(tenant, agent, session string) []byte {
	return indexKey(tenant, agent, session, "")
}

// SessionObservationHead is the last seq of a session's observations and
// its body hash (zero values for none).
func SessionObservationHead(tx Tx, tenant, agent, session string) (uint64, []byte, error) {
	v, err := tx.Get(bucketSessionObsHead, indexKey(tenant, agent, session))
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, nil, nil
	case err != nil:
		return 0, nil, err
	case len(v) < 8:
		return 0, nil, &CorruptRecordError{Bucket: bucketSessionObsHead, Key: indexKey(tenant, agent, session),
			Err: fmt.Errorf("a head of %d bytes", len(v))}
	}
	return binary.BigEndian.Uint64(v), append([]byte(nil), v[8:]...), nil
}

// PutSessionObservation stores o, the next of its session, for agent, and
// moves the session's head to it, whose body hash is hash.
func PutSessionObservation(tx Tx, agent string, o *SessionObservation, hash []byte) error {
	if o.ObservationID == "" || o.SessionID == "" {
		return ErrEmptyKey
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	seq := binary.BigEndian.AppendUint64(nil, o.Seq)
	if err := tx.Put(bucketSessionObs, append(sessionObsPrefix(o.Tenant, agent, o.SessionID), seq...), b); err != nil {
		return err
	}
	if err := tx.Put(bucketSessionObsID, indexKey(o.Tenant, agent, o.SessionID, o.ObservationID), seq); err != nil {
		return err
	}
	return tx.Put(bucketSessionObsHead, indexKey(o.Tenant, agent, o.SessionID), append(seq, hash...))
}

// GetSessionObservation reads the observation id of agent's session in
// tenant, or returns ErrNotFound.
func GetSessionObservation(tx Tx, tenant, agent, session, id string) (*SessionObservation, error) {
	seq, err := tx.Get(bucketSessionObsID, indexKey(tenant, agent, session, id))
	if err != nil {
		return nil, err
	}
	key := append(sessionObsPrefix(tenant, agent, session), seq...)
	v, err := tx.Get(bucketSessionObs, key)
	if err != nil {
		return nil, err
	}
	return decodeSessionObservation(key, v)
}

func decodeSessionObservation(key, v []byte) (*SessionObservation, error) {
	o := new(SessionObservation)
	if err := json.Unmarshal(v, o); err != nil {
		return nil, &CorruptRecordError{Bucket: bucketSessionObs, Key: append([]byte(nil), key...), Err: err}
	}
	return o, nil
}

// SessionObservations calls fn for each observation of agent's session in
// tenant, oldest first, until fn returns ErrStop (the walk then ends
// without error) or another error.
func SessionObservations(tx Tx, tenant, agent, session string, fn func(*SessionObservation) error) error {
	return tx.Scan(bucketSessionObs, sessionObsPrefix(tenant, agent, session), false, func(k, v []byte) error {
		o, err := decodeSessionObservation(k, v)
		if err != nil {
			return err
		}
		return fn(o)
	})
}
