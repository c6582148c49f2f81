package store

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"lukechampine.com/blake3"
)

// Artefacts (artefact_put and friends) park a tool's output for later.
//
// An artefact is content addressed: its id is "art_" followed by the hex of
// the BLAKE3-256 hash of its bytes, so identical bytes always have the same
// id. It is owned per passport: the record key is (tenant, owner, id), so
// two passports that park identical bytes each hold their own copy, with
// their own metadata and deadline, under the same id; neither can read or
// list the other's. A second put of the same bytes by the same owner
// refreshes the metadata (mime type, tool origin) and the deadline and
// keeps created_at.
//
// Expired artefacts are never returned. They are reclaimed when a reader
// meets them (in its own write transaction) and by a bounded sweep of the
// expiry index that every put runs ([SweepArtefacts]).
const (
	bucketArtefacts       = "artefacts"         // tenant, owner, id → JSON Artefact
	bucketArtefactContent = "artefacts.content" // tenant, owner, id → raw bytes
	bucketArtefactByTime  = "artefacts.bytime"  // tenant, owner, 0, created (8 bytes BE), id → primary key
	bucketArtefactHolders = "artefacts.holders" // tenant, id, owner → primary key
	bucketArtefactExpiry  = "artefacts.expiry"  // expiry (8 bytes BE), primary key → primary key
)

// ArtefactIDPrefix starts every artefact id.
const ArtefactIDPrefix = "art_"

// ErrArtefactExpired reports an artefact whose deadline has passed. It wraps
// ErrNotFound: an expired artefact does not exist for its readers.
var ErrArtefactExpired = fmt.Errorf("%w: artefact expired", ErrNotFound)

// Artefact is the metadata of one parked artefact; its bytes are kept
// apart and read with [GetArtefact].
type Artefact struct {
	ID         string     `json:"artefact_id"`
	Tenant     string     `json:"tenant_id"`
	Owner      string     `json:"owner"`
	MimeType   string     `json:"mime_type"`
	ToolOrigin string     `json:"tool_origin"`
	SizeBytes  int        `json:"size_bytes"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	ExpiresAt  *time.Time `json:"expires_at"` // nil: never expires
}

// Expired reports whether the artefact's deadline is at or before now.
func (a *Artefact) Expired(now time.Time) bool {
	return a.ExpiresAt != nil && !a.ExpiresAt.After(now)
}

// ArtefactID is the id of content: "art_" + hex(BLAKE3-256(content)).
func ArtefactID(content []byte) string {
	h := blake3.Sum256(content)
	return ArtefactIDPrefix + hex.EncodeToString(h[:])
}

func artefactKey(tenant, owner, id string) []byte { return indexKey(tenant, owner, id) }

func artefactTimeKey(a *Artefact) []byte {
	k := append(indexKey(a.Tenant, a.Owner), 0)
	k = binary.BigEndian.AppendUint64(k, uint64(a.CreatedAt.UnixNano()))
	return append(k, a.ID...)
}

func artefactExpiryKey(at time.Time, primary []byte) []byte {
	k := binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano()))
	return append(k, primary...)
}

func getArtefactRaw(tx Tx, tenant, owner, id string) (*Artefact, error) {
	if tenant == "" || id == "" {
		return nil, ErrNotFound
	}
	b, err := tx.Get(bucketArtefacts, artefactKey(tenant, owner, id))
	if err != nil {
		return nil, err
	}
	a := new(Artefact)
	if err := json.Unmarshal(b, a); err != nil {
		return nil, fmt.Errorf("store: artefact %s: %w", id, err)
	}
	return a, nil
}

// PutArtefact parks content for owner in tenant with the given metadata.
// ttl 0 means the artefact never expires. It returns the stored metadata
// and whether the artefact is new to this owner (false: an existing one
// was refreshed).
func PutArtefact(tx Tx, s Scope, mimeType, toolOrigin string, content []byte, ttl time.Duration, now time.Time) (*Artefact, bool, error) {
	if s.Tenant == "" || s.Agent == "" {
		return nil, false, errors.New("store: artefact needs a s.Tenant and an s.Agent")
	}
	id := ArtefactID(content)
	a, err := getArtefactRaw(tx, s.Tenant, s.Agent, id)
	created := false
	switch {
	case errors.Is(err, ErrNotFound):
		created = true
	case err != nil:
		return nil, false, err
	case a.Expired(now):
		// An expired copy is reclaimed and parked afresh.
		if err := DeleteArtefact(tx, a); err != nil {
			return nil, false, err
		}
		created = true
	}
	if created {
		a = &Artefact{ID: id, Tenant: s.Tenant, Owner: s.Agent, SizeBytes: len(content), CreatedAt: now}
		if err := tx.Put(bucketArtefactContent, artefactKey(s.Tenant, s.Agent, id), content); err != nil {
			return nil, false, err
		}
		if err := tx.Put(bucketArtefactByTime, artefactTimeKey(a), artefactKey(s.Tenant, s.Agent, id)); err != nil {
			return nil, false, err
		}
		if err := tx.Put(bucketArtefactHolders, indexKey(s.Tenant, id, s.Agent), artefactKey(s.Tenant, s.Agent, id)); err != nil {
			return nil, false, err
		}
	} else if a.ExpiresAt != nil {
		if err := tx.Delete(bucketArtefactExpiry, artefactExpiryKey(*a.ExpiresAt, artefactKey(s.Tenant, s.Agent, id))); err != nil {
			return nil, false, err
		}
	}
	a.MimeType, a.ToolOrigin, a.UpdatedAt, a.ExpiresAt = mimeType, toolOrigin, now, nil
	if ttl > 0 {
		exp := now.Add(ttl)
		a.ExpiresAt = &exp
		if err := tx.Put(bucketArtefactExpiry, artefactExpiryKey(exp, artefactKey(s.Tenant, s.Agent, id)), artefactKey(s.Tenant, s.Agent, id)); err != nil {
			return nil, false, err
		}
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, false, err
	}
	if err := tx.Put(bucketArtefacts, artefactKey(s.Tenant, s.Agent, id), b); err != nil {
		return nil, false, err
	}
	return a, created, nil
}

// GetArtefact returns owner's artefact id in tenant and its bytes. A
// missing artefact is ErrNotFound; an expired one is ErrArtefactExpired,
// together with its metadata (no bytes) so a writable caller can reclaim
// it with [DeleteArtefact].
func GetArtefact(tx Tx, s Scope, id string, now time.Time) (*Artefact, []byte, error) {
	a, err := getArtefactRaw(tx, s.Tenant, s.Agent, id)
	if err != nil {
		return nil, nil, err
	}
	if a.Expired(now) {
		return a, nil, ErrArtefactExpired
	}
	b, err := tx.Get(bucketArtefactContent, artefactKey(s.Tenant, s.Agent, id))
	if err != nil {
		return nil, nil, err
	}
	return a, append([]byte(nil), b...), nil
}

// ArtefactHolders lists the owners in tenant that hold a live (unexpired)
// artefact id.
func ArtefactHolders(tx Tx, tenant, id string, now time.Time) ([]string, error) {
	if tenant == "" || id == "" {
		return nil, nil
	}
	var owners []string
	err := tx.Scan(bucketArtefactHolders, append(indexKey(tenant, id), 0), false, func(k, v []byte) error {
		owner := string(k[len(tenant)+1+len(id)+1:])
		a, err := getArtefactRaw(tx, tenant, owner, id)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !a.Expired(now) {
			owners = append(owners, owner)
		}
		return nil
	})
	return owners, err
}

// ListArtefacts calls fn with owner's live artefacts in tenant, newest
// (by created_at) first, until fn returns ErrStop. It returns the expired
// artefacts it passed over, for a writable caller to reclaim.
func ListArtefacts(tx Tx, s Scope, now time.Time, fn func(*Artefact) error) ([]*Artefact, error) {
	if s.Tenant == "" || s.Agent == "" {
		return nil, nil
	}
	var expired []*Artefact
	err := tx.Scan(bucketArtefactByTime, append(indexKey(s.Tenant, s.Agent), 0), true, func(_, v []byte) error {
		b, err := tx.Get(bucketArtefacts, v)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		a := new(Artefact)
		if err := json.Unmarshal(b, a); err != nil {
			return err
		}
		if a.Expired(now) {
			expired = append(expired, a)
			return nil
		}
		return fn(a)
	})
	return expired, err
}

// DeleteArtefact removes a and its bytes and index entries.
func DeleteArtefact(tx Tx, a *Artefact) error {
	pk := artefactKey(a.Tenant, a.Owner, a.ID)
	for _, d := range []struct {
		bucket string
		key    []byte
	}{
		{bucketArtefacts, pk},
		{bucketArtefactContent, pk},
		{bucketArtefactByTime, artefactTimeKey(a)},
		{bucketArtefactHolders, indexKey(a.Tenant, a.ID, a.Owner)},
	} {
		if err := tx.Delete(d.bucket, d.key); err != nil {
			return err
		}
	}
	if a.ExpiresAt != nil {
		return tx.Delete(bucketArtefactExpiry, artefactExpiryKey(*a.ExpiresAt, pk))
	}
	return nil
}

// SweepArtefacts reclaims at most limit artefacts (of any tenant) whose
// deadline is at or before now, earliest first, and returns how many it
// removed. It reads only the expiry index and the records it removes.
func SweepArtefacts(tx Tx, now time.Time, limit int) (int, error) {
	var due, pks [][]byte
	err := tx.Scan(bucketArtefactExpiry, nil, false, func(k, v []byte) error {
		if len(due) >= limit || len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])) > now.UnixNano() {
			return ErrStop
		}
		due = append(due, append([]byte(nil), k...))
		pks = append(pks, append([]byte(nil), v...))
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for i, pk := range pks {
		b, err := tx.Get(bucketArtefacts, pk)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return n, err
		}
		a := new(Artefact)
		if err == nil {
			if err := json.Unmarshal(b, a); err != nil {
				return n, err
			}
		}
		if err != nil || !a.Expired(now) {
			// A stale index entry: drop it so the sweep moves on.
			if err := tx.Delete(bucketArtefactExpiry, due[i]); err != nil {
				return n, err
			}
			continue
		}
		if err := DeleteArtefact(tx, a); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
