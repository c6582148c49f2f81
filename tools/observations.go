package tools

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Session observations: signed, per-session chained records of what an
// agent's host saw (Observe), read back and re-verified with
// list_observations, get_observation and verify_observation.

// Bounds of an observation.
const (
	MaxObservationLabel   = 64       // bytes of its provider and of its kind
	MaxObservationPayload = 16 << 10 // bytes of its payload, as compact JSON
	observationsLimit     = 50       // default observations per list_observations page
	observationsMaxLimit  = 500      // largest limit
)

// ObservationSchema names the canonical body of an observation.
const ObservationSchema = "crux.observation.v1"

// Observation is what a host reports to crux.Server.Observe: something
// that happened in one of the caller's sessions.
type Observation struct {
	SessionID string          // the session, required
	Provider  string          // who saw it, such as claude-code or openai; required
	Kind      string          // what it is, such as tool_call; required
	Payload   json.RawMessage // a JSON value; nil means null
	TS        time.Time       // when it happened; zero means now
}

// ErrObservationsOff is the error of Observe while CORECRUXD_OBSERVE is off.
var ErrObservationsOff = errors.New("crux: session observations are off (CORECRUXD_OBSERVE)")

// observationBody is the canonical body that is hashed and signed, in
// deterministic CBOR.
type observationBody struct {
	Schema        string `cbor:"schema"`
	ObservationID string `cbor:"observation_id"`
	TenantID      string `cbor:"tenant_id"`
	SessionID     string `cbor:"session_id"`
	Seq           uint64 `cbor:"seq"`
	TS            string `cbor:"ts"`
	Provider      string `cbor:"provider"`
	Principal     string `cbor:"principal"`
	Kind          string `cbor:"kind"`
	Payload       string `cbor:"payload"` // compact JSON
	PrevHash      string `cbor:"prev_hash"`
}

// canonical returns the body of o and its BLAKE3 hash.
func canonical(o *store.SessionObservation) ([]byte, [32]byte, error) {
	var payload bytes.Buffer
	if err := json.Compact(&payload, o.Payload); err != nil {
		return nil, [32]byte{}, fmt.Errorf("observation %s: payload: %w", o.ObservationID, err)
	}
	body, err := detCBOR.Marshal(observationBody{
		Schema: ObservationSchema, ObservationID: o.ObservationID, TenantID: o.Tenant, SessionID: o.SessionID,
		Seq: o.Seq, TS: o.TS.UTC().Format(time.RFC3339Nano), Provider: o.Provider, Principal: o.Principal,
		Kind: o.Kind, Payload: payload.String(), PrevHash: o.PrevHash,
	})
	if err != nil {
		return nil, [32]byte{}, err
	}
	return body, blake3.Sum256(body), nil
}

// checkObservation checks what a host reported; the error names the field.
func checkObservation(o *Observation) error {
	if o.SessionID == "" {
		return errors.New("crux: observe: session_id is required")
	}
	if err := checkName("observe", "session_id", o.SessionID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"provider", o.Provider}, {"kind", o.Kind}} {
		switch {
		case f.v == "":
			return fmt.Errorf("crux: observe: %s is required", f.name)
		case len(f.v) > MaxObservationLabel:
			return fmt.Errorf("crux: observe: %s: longer than %d bytes", f.name, MaxObservationLabel)
		case !utf8.ValidString(f.v):
			return fmt.Errorf("crux: observe: %s: not valid UTF-8", f.name)
		}
	}
	if len(o.Payload) > 0 && !json.Valid(o.Payload) {
		return errors.New("crux: observe: payload: not a JSON value")
	}
	return nil
}

// recordObservation signs o as the next observation of c's session and
// stores it in tx.
func recordObservation(tx store.Tx, env *toolkit.Env, c toolkit.Caller, o Observation) (*store.SessionObservation, error) {
	payload := json.RawMessage("null")
	if len(o.Payload) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, o.Payload); err != nil {
			return nil, fmt.Errorf("crux: observe: payload: %w", err)
		}
		payload = b.Bytes()
	}
	if len(payload) > MaxObservationPayload {
		return nil, fmt.Errorf("crux: observe: payload: larger than %d bytes", MaxObservationPayload)
	}
	ts := o.TS
	if ts.IsZero() {
		ts = env.Time()
	}
	tenant, agent := c.TenantID(), c.Identity()
	seq, prev, err := store.SessionObservationHead(tx, tenant, agent, o.SessionID)
	if err != nil {
		return nil, err
	}
	prevHex := hex.EncodeToString(make([]byte, 32))
	if prev != nil {
		prevHex = hex.EncodeToString(prev)
	}
	rec := &store.SessionObservation{
		ObservationID: store.NewID("obs_"), Tenant: tenant, SessionID: o.SessionID, Seq: seq + 1, TS: ts.UTC(),
		Provider: o.Provider, Principal: c.Name(), Kind: o.Kind, Payload: payload, PrevHash: prevHex,
	}
	body, sum, err := canonical(rec)
	if err != nil {
		return nil, err
	}
	sig, err := env.Signer.Sign(body)
	if err != nil {
		return nil, fmt.Errorf("crux: observe: sign: %w", err)
	}
	rec.Receipt = store.ObservationReceipt{Alg: receipts.AlgEd25519, SignedBy: env.Signer.KeyID(),
		BodyHash: hex.EncodeToString(sum[:]), Signature: hex.EncodeToString(sig)}
	if err := store.PutSessionObservation(tx, agent, rec, sum[:]); err != nil {
		return nil, err
	}
	return rec, nil
}

// Observe records o as an observation of c's session: signed with the
// server's key and chained to the session's previous observation, in one
// transaction. It fails with ErrObservationsOff while Flags.Observe is
// off, and with an error naming the field for a bad observation (see the
// Max* bounds).
func Observe(ctx context.Context, env *toolkit.Env, c toolkit.Caller, o Observation) (*store.SessionObservation, error) {
	if !env.Flags.Observe {
		return nil, ErrObservationsOff
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := checkObservation(&o); err != nil {
		return nil, err
	}
	var rec *store.SessionObservation
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		rec, err = recordObservation(tx, env, c, o)
		return err
	})
	return rec, err
}

// observationsOff is the answer of the observation tools while the flag is
// off.
func observationsOff(tool string) *toolkit.Result {
	return toolkit.ErrorResult("%s: session observations are off; set CORECRUXD_OBSERVE=1 to record and read them", tool)
}

type listObservationsArgs struct {
	SessionID string `json:"session_id" schema:"minLength=1"`
	Since     string `json:"since,omitempty" schema:"minLength=1"`
	Provider  string `json:"provider,omitempty" schema:"minLength=1"`
	Limit     *int   `json:"limit,omitempty" schema:"default=50;maximum=500;minimum=1"`
	Cursor    string `json:"cursor,omitempty" schema:"minLength=1"`
}

// ListObservationsOutput is what list_observations returns.
type ListObservationsOutput struct {
	SessionID    string                      `json:"session_id"`
	Count        int                         `json:"count"`
	Observations []*store.SessionObservation `json:"observations"`
	NextCursor   string                      `json:"next_cursor,omitempty"`
	Truncated    bool                        `json:"truncated"`
}

func listObservations() *toolkit.Tool {
	const name = "list_observations"
	return &toolkit.Tool{
		Name:        name,
		Description: "Your signed, chained observations of one session, oldest first. Flag CORECRUXD_OBSERVE.",
		Annotations: toolkit.Annotations{Title: "List observations", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[ListObservationsOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *listObservationsArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "session_id", in.SessionID, "provider", in.Provider); err != nil {
				return nil, err
			}
			var since time.Time
			if in.Since != "" {
				t, err := time.Parse(time.RFC3339Nano, in.Since)
				if err != nil {
					return nil, toolkit.InvalidParams(name, "since", "must be an RFC 3339 date-time")
				}
				since = t
			}
			var from uint64
			if in.Cursor != "" {
				n, err := strconv.ParseUint(in.Cursor, 10, 64)
				if err != nil || n == 0 {
					return nil, toolkit.InvalidParams(name, "cursor", "is not a next_cursor of list_observations")
				}
				from = n
			}
			if !env.Flags.Observe {
				return observationsOff(name), nil
			}
			limit := observationsLimit
			if in.Limit != nil {
				limit = *in.Limit
			}
			out := &ListObservationsOutput{SessionID: in.SessionID, Observations: []*store.SessionObservation{}}
			rc := newRowCap(limit, &ListObservationsOutput{SessionID: in.SessionID, Observations: []*store.SessionObservation{},
				NextCursor: strconv.FormatUint(1<<63, 10), Truncated: true})
			err := env.Store.View(ctx, func(tx store.Tx) error {
				return store.SessionObservations(tx, c.TenantID(), c.Identity(), in.SessionID, func(o *store.SessionObservation) error {
					if o.Seq < from || !since.IsZero() && o.TS.Before(since) || in.Provider != "" && o.Provider != in.Provider {
						return nil
					}
					if !rc.take(o) {
						out.NextCursor, out.Truncated = strconv.FormatUint(o.Seq, 10), true
						return store.ErrStop
					}
					out.Observations = append(out.Observations, o)
					return nil
				})
			})
			if err != nil {
				return nil, err
			}
			out.Count = len(out.Observations)
			return toolkit.JSONResult(out)
		}),
	}
}

type observationArgs struct {
	SessionID     string `json:"session_id" schema:"minLength=1"`
	ObservationID string `json:"observation_id" schema:"minLength=1"`
}

// readObservation reads one of c's observations for tool. When there is
// none to show (observations are off, or no such observation) it returns
// the answer that says so instead.
func readObservation(ctx context.Context, env *toolkit.Env, c toolkit.Caller, tool string, in *observationArgs) (*store.SessionObservation, *toolkit.Result, error) {
	if err := checkNames(tool, "session_id", in.SessionID, "observation_id", in.ObservationID); err != nil {
		return nil, nil, err
	}
	if !env.Flags.Observe {
		return nil, observationsOff(tool), nil
	}
	var o *store.SessionObservation
	err := env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		o, err = store.GetSessionObservation(tx, c.TenantID(), c.Identity(), in.SessionID, in.ObservationID)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, toolkit.ErrorResult("observation %s not found in session %s", in.ObservationID, in.SessionID), nil
	case err != nil:
		return nil, nil, err
	}
	return o, nil, nil
}

// GetObservationOutput is what get_observation returns: the observation
// as stored, with its signature.
type GetObservationOutput = store.SessionObservation

func getObservation() *toolkit.Tool {
	const name = "get_observation"
	return &toolkit.Tool{
		Name:        name,
		Description: "One of your observations of a session, with its signature. Flag CORECRUXD_OBSERVE.",
		Annotations: toolkit.Annotations{Title: "Get observation", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[GetObservationOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *observationArgs) (*toolkit.Result, error) {
			o, answer, err := readObservation(ctx, env, c, name, in)
			if o == nil {
				return answer, err
			}
			return toolkit.JSONResult(o)
		}),
	}
}

func verifyObservation() *toolkit.Tool {
	const name = "verify_observation"
	return &toolkit.Tool{
		Name:        name,
		Description: "Re-verify one of your observations: body hash and signature; reason says what failed. Flag CORECRUXD_OBSERVE.",
		Annotations: toolkit.Annotations{Title: "Verify observation", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[VerifyObservationOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *observationArgs) (*toolkit.Result, error) {
			o, answer, err := readObservation(ctx, env, c, name, in)
			if o == nil {
				return answer, err
			}
			return toolkit.JSONResult(checkObservationSignature(o, receipts.NewKeyring(env.Signer.Public())))
		}),
	}
}

// VerifyObservationOutput is the answer of verify_observation.
type VerifyObservationOutput struct {
	ObservationID  string `json:"observation_id"`
	OK             bool   `json:"ok"`
	HashMatch      bool   `json:"hash_match"`
	SignatureValid bool   `json:"signature_valid"`
	RecomputedHash string `json:"recomputed_hash"`
	ReceiptHash    string `json:"receipt_hash"`
	Reason         string `json:"reason,omitempty"`
}

// checkObservationSignature rebuilds o's body and checks its hash and
// signature with kr.
func checkObservationSignature(o *store.SessionObservation, kr *receipts.Keyring) VerifyObservationOutput {
	out := VerifyObservationOutput{ObservationID: o.ObservationID, ReceiptHash: o.Receipt.BodyHash}
	body, sum, err := canonical(o)
	if err != nil {
		out.Reason = err.Error()
		return out
	}
	out.RecomputedHash = hex.EncodeToString(sum[:])
	out.HashMatch = out.RecomputedHash == o.Receipt.BodyHash
	pub, ok := kr.Lookup(o.Receipt.SignedBy)
	sig, serr := hex.DecodeString(o.Receipt.Signature)
	switch {
	case o.Receipt.Alg != receipts.AlgEd25519:
		out.Reason = fmt.Sprintf("unknown signature algorithm %q", o.Receipt.Alg)
	case !ok:
		out.Reason = fmt.Sprintf("%s: no key %s in the keyring", receipts.KeyNotFound, o.Receipt.SignedBy)
	case serr != nil || len(sig) != ed25519.SignatureSize:
		out.Reason = "the signature is not 64 bytes of hex"
	default:
		out.SignatureValid = ed25519.Verify(pub, body, sig)
	}
	out.OK = out.HashMatch && out.SignatureValid
	if out.Reason == "" && !out.OK {
		switch {
		case !out.HashMatch:
			out.Reason = string(receipts.BodyHashMismatch) + ": the record does not hash to the signed body hash"
		default:
			out.Reason = string(receipts.SigInvalid) + ": the signature does not verify"
		}
	}
	return out
}
