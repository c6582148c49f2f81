package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Sync: the change log a replica serves, and the rules by which a replica
// applies the facts another one sends.
//
// # The change log
//
// Every version of a tenant's shared client facts (not private, not
// reserved) is numbered in the order its transaction committed: bucket
// sync.log holds tenant, NUL, seq (8 bytes big-endian) → fact id, written
// by [PutFact] and by [ApplySyncFacts] in the transaction that stores the
// version. seq is one more than the tenant's last; a transaction reads
// that last entry, so two concurrent writers of one tenant conflict in the
// store and the log has no gaps and never goes back. (A backend that keeps
// the log itself, [ChangeLogger], numbers it its own way, with the
// guarantees that interface states, and its writers read nothing.) The newest entries
// (from format 7) wait in bucket sync.log.new, laid out alike, and move to
// sync.log syncStageMax at a time: sync.log is a tree three levels deep
// once it holds a few thousand entries, and an entry appended to it costs
// a commit three pages to write, where the small bucket costs one. Every
// seq in sync.log.new is above every seq of its tenant in sync.log, so a
// reader walks sync.log, then sync.log.new. A replica's cursor is
// a seq: [SyncChanges] returns the versions logged after it. A store
// written before the log existed has its facts logged once, in id order,
// by [Upgrade].
//
// # Applying another replica's facts
//
// Fact ids are the same on every replica: a version keeps the id it was
// written with. [ApplySyncFacts] applies each version it is given, in
// order:
//
//   - A version whose id the store holds already is a duplicate and
//     changes nothing.
//   - When its chain (tenant, entity, key) has no current version here, or
//     the current one is the version it names as superseded, it follows
//     it: it becomes the chain's new current version, as a write would.
//   - Otherwise the two replicas wrote the chain concurrently: a conflict.
//     The version with the later stored_at wins (the greater fact id when
//     the times are equal). An incoming winner becomes current and retires
//     the local one; an incoming loser is kept as a retired version,
//     superseded by the local one. Either way both versions stay in the
//     chain's history, and every replica that receives both resolves them
//     alike.
//
// Applied versions keep their stored_at, are owned by the replica they
// came from ([SyncOwner]), not by the agent they name, and are marked as
// come by sync (bucket sync.origin: tenant, NUL, fact id → the replica
// they came from), so that they are never pushed back as local writes;
// they enter the change log, so a replica serves what it received as well
// as what it wrote.
//
// A replica may assert only what it can: a version stored more than
// [MaxSyncClockSkew] after the receiver's clock, or superseding a version
// the change log never carried (a private one, another tenant's, one of
// another chain), is rejected, and a version written locally after a
// received one is never stored before it (see [NewFact].Received).
//
// Deletes and forgets are not synced: a version deleted here stays
// deleted, and one deleted on another replica is not sent.
//
// # State
//
// Bucket sync.state holds, per replica and tenant, the [SyncState] of the
// exchange: cursors, times and counts (JSON).
const (
	bucketSyncLog    = "sync.log"     // tenant, NUL, seq (8 bytes BE) → fact id, named as the entity index names it (see entityValue; format 8), or the id itself
	bucketSyncNew    = "sync.log.new" // the same, for the newest entries (see syncStageMax)
	bucketSyncOrigin = "sync.origin"  // tenant, NUL, fact id → replica name
	bucketSyncState  = "sync.state"   // replica, NUL, tenant → JSON SyncState
)

// SyncFact is a fact version as replicas exchange it (the JSON wire form).
type SyncFact struct {
	ID            string    `json:"fact_id"`
	Entity        string    `json:"entity"`
	Key           string    `json:"key"`
	Value         string    `json:"value"`
	SourceReceipt string    `json:"source_receipt,omitempty"`
	Confidence    float64   `json:"confidence"`
	StoredAt      time.Time `json:"stored_at"`
	HorizonClass  string    `json:"horizon_class"`
	// Supersedes is the version this one replaced where it was written.
	Supersedes string `json:"supersedes,omitempty"`
	// Owner is the agent that stored it there.
	Owner string `json:"owner,omitempty"`
}

// syncable reports whether f is a version the change log carries: a
// shared client fact.
func syncable(f *Fact) bool { return !f.Private && !IsReserved(f.Entity) }

// syncLogKey is tenant, NUL, seq.
func syncLogKey(tenant string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(tenant), 0), seq)
}

// SyncHead returns the seq of the last entry of tenant's change log (0
// for none): the cursor of a reader that has read it all. In the store's
// own log it is also how many versions it has logged; a backend that keeps
// the log ([ChangeLogger]) may number it with gaps (see [SyncCount]).
func SyncHead(tx Tx, tenant string) (uint64, error) {
	head, _, err := changeHead(tx, tenant)
	return head, err
}

// SyncCount returns how many versions tenant's change log holds.
func SyncCount(tx Tx, tenant string) (uint64, error) {
	_, count, err := changeHead(tx, tenant)
	return count, err
}

// changeHead is [ChangeLogger.ChangeHead] on any Tx: in the store's own
// log the head's seq is the count.
func changeHead(tx Tx, tenant string) (head, count uint64, err error) {
	if c, ok := tx.(ChangeLogger); ok {
		return c.ChangeHead(tenant)
	}
	var seq uint64
	prefix := append([]byte(tenant), 0)
	last := func(k, _ []byte) error {
		if len(k) == len(prefix)+8 {
			seq = binary.BigEndian.Uint64(k[len(prefix):])
		}
		return ErrStop
	}
	if err := tx.Scan(bucketSyncNew, prefix, true, last); err != nil || seq != 0 {
		return seq, seq, err
	}
	err = tx.Scan(bucketSyncLog, prefix, true, last)
	return seq, seq, err
}

// prefetchChangeHead announces the reads of changeHead (see Prefetcher).
func prefetchChangeHead(tx Tx, tenant string) {
	if c, ok := tx.(ChangeLogger); ok {
		c.PrefetchChangeHead(tenant)
		return
	}
	prefix := append([]byte(tenant), 0)
	prefetchScan(tx, bucketSyncNew, prefix, true)
	prefetchScan(tx, bucketSyncLog, prefix, true)
}

// syncStageMax is how many entries sync.log.new holds at most: the write
// that brings it there moves them all to sync.log. They fit one page.
const syncStageMax = 48

// scanLog calls fn with each entry of tenant's change log from seq from
// on, in seq order (see [ChangeLogger.ScanChanges]): in the store's own
// log, those of sync.log, then those of sync.log.new. fn returning
// ErrStop ends the walk without error.
func scanLog(tx Tx, tenant string, from uint64, fn func(seq uint64, v []byte) error) error {
	if c, ok := tx.(ChangeLogger); ok {
		return c.ScanChanges(tenant, from, fn)
	}
	stopped := false
	prefix := append([]byte(tenant), 0)
	visit := func(k, v []byte) error {
		if len(k) != len(prefix)+8 {
			return nil // not an entry of tenant's: crux doctor reports it
		}
		err := fn(binary.BigEndian.Uint64(k[len(prefix):]), v)
		if errors.Is(err, ErrStop) {
			stopped = true
		}
		return err
	}
	if err := scanFrom(tx, bucketSyncLog, prefix, syncLogKey(tenant, from), visit); err != nil || stopped {
		return err
	}
	return scanFrom(tx, bucketSyncNew, prefix, syncLogKey(tenant, from), visit)
}

// flushSyncLog moves the entries of sync.log.new to sync.log once it holds
// syncStageMax of them.
func flushSyncLog(tx Tx) error {
	n := 0
	err := tx.Scan(bucketSyncNew, nil, false, func(_, _ []byte) error {
		if n++; n == syncStageMax {
			return ErrStop
		}
		return nil
	})
	if err != nil || n < syncStageMax {
		return err
	}
	var keys, vals [][]byte
	if err := tx.Scan(bucketSyncNew, nil, false, func(k, v []byte) error {
		keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
		return nil
	}); err != nil {
		return err
	}
	hintWriteOnce(tx, bucketSyncLog)
	for i, k := range keys {
		if err := tx.Put(bucketSyncLog, k, vals[i]); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := tx.Delete(bucketSyncNew, k); err != nil {
			return err
		}
	}
	return nil
}

// logFact appends f to its tenant's change log when the log carries it.
func logFact(tx Tx, f *Fact) error {
	if !syncable(f) {
		return nil
	}
	return appendChange(tx, f.Tenant, entityValue(f.ID))
}

// appendChange is [ChangeLogger.AppendChange] on any Tx: in the store's
// own log, the entry takes the seq after the tenant's head.
func appendChange(tx Tx, tenant string, entry []byte) error {
	if c, ok := tx.(ChangeLogger); ok {
		return c.AppendChange(tenant, entry)
	}
	last, _, err := changeHead(tx, tenant)
	if err != nil {
		return err
	}
	if last == math.MaxUint64 {
		return fmt.Errorf("store: the change log of tenant %q is full", tenant)
	}
	hintAppend(tx, bucketSyncNew)
	if err := tx.Put(bucketSyncNew, syncLogKey(tenant, last+1), entry); err != nil {
		return err
	}
	return flushSyncLog(tx)
}

// backfillSyncLog logs, in id order, every syncable version not yet in its
// tenant's log: the upgrade of a store written before the log existed.
func backfillSyncLog(tx Tx) error {
	byTenant := map[string][]*Fact{}
	var tenants []string
	if err := tx.Scan(bucketFacts, nil, false, func(k, v []byte) error {
		f := new(Fact)
		if err := decodeFact(v, string(k), f); err != nil {
			return nil // crux doctor reports it
		}
		if syncable(f) {
			if byTenant[f.Tenant] == nil {
				tenants = append(tenants, f.Tenant)
			}
			byTenant[f.Tenant] = append(byTenant[f.Tenant], f)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, tenant := range tenants {
		logged := make(map[string]bool)
		if err := scanLog(tx, tenant, 0, func(_ uint64, v []byte) error {
			logged[entityID(v)] = true
			return nil
		}); err != nil {
			return err
		}
		for _, f := range byTenant[tenant] {
			if logged[f.ID] {
				continue
			}
			if err := logFact(tx, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// SyncChanges returns the versions of tenant's change log after seq after
// whose entity starts with entityPrefix, at most limit of them, at most
// maxBytes of them in their JSON wire form (see [SyncFact.WireSize]; the
// first version is returned whatever its size) and at most maxScan log
// entries read, with the seq to resume from and whether more entries
// follow. Versions deleted since they were logged, or purged, are passed
// over. A version's Supersedes is the version it replaced here.
func SyncChanges(tx Tx, tenant string, after uint64, entityPrefix string, limit, maxBytes, maxScan int) (facts []SyncFact, next uint64, more bool, err error) {
	next = after
	scanned, size := 0, 0
	err = scanLog(tx, tenant, after+1, func(seq uint64, v []byte) error {
		if len(facts) == limit || scanned == maxScan {
			more = true
			return ErrStop
		}
		scanned++
		f, err := GetFact(tx, entityID(v))
		if errors.Is(err, ErrNotFound) {
			next = seq
			return nil // purged by a forget
		}
		if err != nil {
			if err := SkipCorrupt(tx, err); err != nil {
				return err
			}
			next = seq
			return nil
		}
		if f.Deleted || !syncable(f) || f.Tenant != tenant || !strings.HasPrefix(f.Entity, entityPrefix) {
			next = seq
			return nil
		}
		sf := ToSyncFact(f)
		n := sf.WireSize()
		if len(facts) > 0 && size+n > maxBytes {
			more = true // this version starts the next page
			return ErrStop
		}
		size += n
		next = seq
		facts = append(facts, sf)
		return nil
	})
	return facts, next, more, err
}

// WireSize is the length of f's JSON wire form, as encoding/json writes
// it, and an estimate of what it adds to a page of versions.
func (f *SyncFact) WireSize() int {
	b, err := json.Marshal(f)
	if err != nil {
		return len(f.Value) * 6 // cannot happen: every field encodes
	}
	return len(b) + 1 // and the comma
}

// ToSyncFact is f in its wire form.
func ToSyncFact(f *Fact) SyncFact {
	return SyncFact{
		ID: f.ID, Entity: f.Entity, Key: f.Key, Value: f.Value, SourceReceipt: f.SourceReceipt,
		Confidence: f.Confidence, StoredAt: f.StoredAt.UTC(), HorizonClass: f.HorizonClass,
		Supersedes: f.Supersedes, Owner: f.Owner,
	}
}

// SyncPending walks tenant's change log after seq after, as sync_push
// does, and calls visit with each seq and version, and whether it came by
// sync. visit returns whether to go on. It reads at most maxScan entries
// and returns the last seq it read and whether entries remain.
func SyncPending(tx Tx, tenant string, after uint64, maxScan int, visit func(seq uint64, f *Fact, synced bool) bool) (last uint64, more bool, err error) {
	last = after
	scanned := 0
	err = scanLog(tx, tenant, after+1, func(seq uint64, v []byte) error {
		if scanned == maxScan {
			more = true
			return ErrStop
		}
		scanned++
		f, err := GetFact(tx, entityID(v))
		if errors.Is(err, ErrNotFound) {
			last = seq
			return nil
		}
		if err != nil {
			if err := SkipCorrupt(tx, err); err != nil {
				return err
			}
			last = seq
			return nil
		}
		_, err = tx.Get(bucketSyncOrigin, indexKey(tenant, f.ID))
		synced := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if !visit(seq, f, synced) {
			more = true
			return ErrStop
		}
		last = seq
		return nil
	})
	return last, more, err
}

// SyncConflict is a chain that two replicas wrote concurrently, as
// [ApplySyncFacts] resolved it.
type SyncConflict struct {
	Entity string `json:"entity"`
	Key    string `json:"key"`
	// Incoming is the version received, Existing the chain's current
	// version here; Kept names the winner: "incoming" or "existing".
	Incoming string `json:"incoming_fact_id"`
	Existing string `json:"existing_fact_id"`
	Kept     string `json:"kept"`
}

// SyncRejected is a version [ApplySyncFacts] refused, and why.
type SyncRejected struct {
	ID     string `json:"fact_id"`
	Reason string `json:"reason"`
}

// SyncApplied is the outcome of [ApplySyncFacts].
type SyncApplied struct {
	Applied    int            `json:"applied"`
	Duplicates int            `json:"duplicates"`
	Conflicts  []SyncConflict `json:"conflicts"`
	Rejected   []SyncRejected `json:"rejected"`
	// AppliedIDs are the ids of the versions stored, in order.
	AppliedIDs []string `json:"-"`
}

// validSyncID reports whether id is a fact id: "f_" and 32 lowercase hex
// digits.
func validSyncID(id string) bool {
	if len(id) != 34 || !strings.HasPrefix(id, "f_") {
		return false
	}
	_, err := hex.DecodeString(id[2:])
	return err == nil && strings.ToLower(id) == id
}

// checkSyncFact returns why f cannot be applied, or "".
func checkSyncFact(f *SyncFact) string {
	switch {
	case !validSyncID(f.ID):
		return "fact_id is not f_ and 32 lowercase hex digits"
	case f.Entity == "" || f.Key == "":
		return "entity and key must not be empty"
	case IsReserved(f.Entity):
		return "entities starting with " + ReservedPrefix + " are not synced"
	case len(f.Entity) > maxSyncName || len(f.Key) > maxSyncName:
		return fmt.Sprintf("entity or key longer than %d bytes", maxSyncName)
	case strings.ContainsRune(f.Entity, 0) || strings.ContainsRune(f.Key, 0):
		return "entity or key contains a NUL byte"
	case !(f.Confidence >= 0 && f.Confidence <= 1):
		return "confidence is not in [0, 1]"
	case f.HorizonClass != "" && !ValidHorizon(f.HorizonClass):
		return "horizon_class is not volatile, medium, stable or none"
	case f.StoredAt.IsZero():
		return "stored_at is missing"
	case f.Supersedes != "" && !validSyncID(f.Supersedes):
		return "supersedes is not a fact id"
	case !utf8.ValidString(f.Entity) || !utf8.ValidString(f.Key) || !utf8.ValidString(f.Value) ||
		!utf8.ValidString(f.SourceReceipt) || !utf8.ValidString(f.Owner):
		return "a text is not valid UTF-8"
	case len(f.Owner) > maxSyncName || strings.ContainsRune(f.Owner, 0) || len(f.SourceReceipt) > maxSyncName:
		return "owner or source_receipt is too long or contains a NUL byte"
	case len(f.Value) > MaxSyncValueBytes:
		return fmt.Sprintf("value longer than %d bytes", MaxSyncValueBytes)
	}
	return ""
}

// maxSyncName bounds an entity or key received by sync, as the tools bound
// those they store.
const maxSyncName = 1024

// MaxSyncValueBytes bounds the value of a version received by sync: 1 MiB,
// the bound the tools put on a value they store (toolkit.MaxValueBytes).
const MaxSyncValueBytes = 1 << 20

// maxRejectedListed bounds the rejected versions a [SyncApplied] lists.
const maxRejectedListed = 32

// MaxSyncClockSkew is how far past this replica's clock a version
// received by sync may have been stored: 5 minutes. A version stored
// later is rejected: its stored_at would win every conflict on its chain
// until then.
const MaxSyncClockSkew = 5 * time.Minute

// SyncSource is where a batch of versions for [ApplySyncFacts] comes from.
type SyncSource struct {
	// Replica names the replica that sent them: "peer:" and the name of
	// its credential for a replica that pushed, the remote's name for a
	// pull. It is recorded as their origin, and their owner here is
	// [SyncOwner] of it.
	Replica string
	// Now is this replica's clock, against which stored_at is checked.
	Now time.Time
}

// SyncOwner is the owner a version received from replica has here:
// "sync::" and the replica's name. No agent can have it: an agent's name
// never contains "::".
func SyncOwner(replica string) string { return "sync::" + replica }

// ApplySyncFacts applies facts, received from the replica src names, to
// tenant in tx, by the rules in the package documentation of sync (see
// [SyncFact]): duplicates are passed over, a version that follows the
// chain's current one becomes current, and a conflict is resolved by
// stored_at.
//
// A replica is trusted with the tenant's shared facts, not with who wrote
// them or when beyond what it can show, so each version is held to what
// its sender may assert:
//
//   - owner: a replica's credential vouches for the replica, not for the
//     agents behind it, so the owner a version names is never taken: every
//     version applied is owned here by SyncOwner(src.Replica), whatever
//     its owner field said (an agent of this replica reading or forgetting
//     its own facts never meets it; an export says which replica sent it).
//   - stored_at: no later than src.Now plus MaxSyncClockSkew, else the
//     version is rejected. (A version written here after one received is
//     stored no earlier than it, see NewFact.Received, so a stored_at
//     within the skew never makes a chain go back in time.)
//   - supersedes: when the store holds the version named, it must be one
//     the sync API could have sent: a shared version of this tenant, of
//     the same entity and key, not of a reserved entity. A private
//     version, another tenant's, or another chain's is rejected. A
//     version the store does not hold is allowed: the sender's history
//     may hold versions that never came here.
//
// A version that breaks these or a rule of the store (an id that is not a
// fact id, a reserved entity, a confidence outside [0, 1], text that is
// not valid UTF-8, an id another tenant holds) is rejected and listed in
// Rejected with the reason (the first 32); the others still apply. facts
// is not modified.
func ApplySyncFacts(tx Tx, tenant string, src SyncSource, facts []SyncFact) (SyncApplied, error) {
	if src.Replica == "" || src.Now.IsZero() {
		return SyncApplied{}, errors.New("store: sync: ApplySyncFacts needs the replica's name and the clock")
	}
	out := SyncApplied{Conflicts: []SyncConflict{}, Rejected: []SyncRejected{}}
	reject := func(id, reason string) {
		if len(out.Rejected) < maxRejectedListed {
			out.Rejected = append(out.Rejected, SyncRejected{ID: id, Reason: reason})
		}
	}
	latest := src.Now.Add(MaxSyncClockSkew)
	owner := SyncOwner(src.Replica)
	for i := range facts {
		v := facts[i]
		in := &v
		if reason := checkSyncFact(in); reason != "" {
			reject(in.ID, reason)
			continue
		}
		old, err := GetFact(tx, in.ID)
		switch {
		case err == nil && old.Tenant == tenant:
			out.Duplicates++
			continue
		case err == nil:
			reject(in.ID, "another tenant holds a fact with this id")
			continue
		case !errors.Is(err, ErrNotFound):
			var ce *CorruptRecordError
			if errors.As(err, &ce) {
				reject(in.ID, "a record with this id is unreadable here")
				continue
			}
			return SyncApplied{}, err
		}
		if in.StoredAt.After(latest) {
			reject(in.ID, fmt.Sprintf("stored_at %s is more than %s after this replica's clock (%s)",
				in.StoredAt.UTC().Format(time.RFC3339Nano), MaxSyncClockSkew, src.Now.UTC().Format(time.RFC3339)))
			continue
		}
		if reason, err := checkSyncSupersedes(tx, tenant, in); err != nil {
			return SyncApplied{}, err
		} else if reason != "" {
			reject(in.ID, reason)
			continue
		}
		in.Owner = owner
		current, err := currentShared(tx, tenant, in.Entity, in.Key)
		if err != nil {
			return SyncApplied{}, err
		}
		class := in.HorizonClass
		if class == "" {
			class = DefaultHorizon(in.Entity)
		}
		incomingWins := true
		if current != nil && current.ID != in.Supersedes {
			incomingWins = in.StoredAt.After(current.StoredAt) ||
				(in.StoredAt.Equal(current.StoredAt) && in.ID > current.ID)
			kept := "existing"
			if incomingWins {
				kept = "incoming"
			}
			out.Conflicts = append(out.Conflicts, SyncConflict{Entity: in.Entity, Key: in.Key,
				Incoming: in.ID, Existing: current.ID, Kept: kept})
		}
		var f *Fact
		if incomingWins {
			f, _, err = PutFact(tx, NewFact{Scope: Scope{Tenant: tenant, Agent: in.Owner}, Entity: in.Entity, Key: in.Key,
				Value: in.Value, SourceReceipt: in.SourceReceipt, Confidence: in.Confidence, HorizonClass: class,
				Now: in.StoredAt, ID: in.ID, Received: true})
		} else {
			f, err = putRetiredVersion(tx, tenant, in, class, current)
		}
		var te *TextError
		if errors.As(err, &te) {
			return SyncApplied{}, fmt.Errorf("store: sync: version %s: %w", in.ID, err)
		}
		if err != nil {
			return SyncApplied{}, err
		}
		if err := tx.Put(bucketSyncOrigin, indexKey(tenant, f.ID), []byte(src.Replica)); err != nil {
			return SyncApplied{}, err
		}
		out.Applied++
		out.AppliedIDs = append(out.AppliedIDs, f.ID)
	}
	return out, nil
}

// checkSyncSupersedes returns why in may not name the version it
// supersedes, or "": the version, when the store holds it, must be one
// the change log of tenant carries (shared, not reserved) and of in's
// chain.
func checkSyncSupersedes(tx Tx, tenant string, in *SyncFact) (string, error) {
	if in.Supersedes == "" {
		return "", nil
	}
	prev, err := GetFact(tx, in.Supersedes)
	var ce *CorruptRecordError
	switch {
	case errors.Is(err, ErrNotFound):
		return "", nil
	case errors.As(err, &ce):
		return "supersedes names a record that is unreadable here", nil
	case err != nil:
		return "", err
	case prev.Tenant != tenant || !syncable(prev):
		return "supersedes names a version this replica was never sent: only a shared version of this tenant may be superseded by sync", nil
	case prev.Entity != in.Entity || prev.Key != in.Key:
		return "supersedes names a version of another entity or key", nil
	}
	return "", nil
}

// currentShared returns the current version of the shared chain (entity,
// key) of tenant, or nil.
func currentShared(tx Tx, tenant, entity, key string) (*Fact, error) {
	var current *Fact
	err := tx.Scan(bucketEntity, indexKey(tenant, entity, key, ""), true, func(_, v []byte) error {
		f, err := entryFact(tx, v)
		if err != nil {
			return SkipCorrupt(tx, err)
		}
		if f.Current() && !f.Private {
			current = f
			return ErrStop
		}
		return nil
	})
	return current, err
}

// putRetiredVersion stores in as a version of its chain that winner, the
// chain's current version, supersedes: the next version number, valid
// from its stored_at until winner's, indexed as any retired version is.
func putRetiredVersion(tx Tx, tenant string, in *SyncFact, class string, winner *Fact) (*Fact, error) {
	var top uint32
	if err := tx.Scan(bucketEntity, indexKey(tenant, in.Entity, in.Key, ""), true, func(k, _ []byte) error {
		top = binary.BigEndian.Uint32(k[len(k)-4:])
		return ErrStop
	}); err != nil {
		return nil, err
	}
	until := winner.StoredAt
	if until.Before(in.StoredAt) {
		until = in.StoredAt
	}
	f := &Fact{
		ID: in.ID, Tenant: tenant, Entity: in.Entity, Key: in.Key, Value: in.Value,
		SourceReceipt: in.SourceReceipt, Confidence: in.Confidence, StoredAt: in.StoredAt.UTC(),
		Tokens: EstimateTokens(in.Value), Owner: in.Owner, HorizonClass: class,
		ValidFrom: in.StoredAt.UTC(), ValidTo: &until, Version: top + 1, SupersededBy: winner.ID,
	}
	if in.Supersedes != "" {
		// checkSyncSupersedes let it through: absent, or of this chain.
		if _, err := GetFact(tx, in.Supersedes); err == nil {
			f.Supersedes = in.Supersedes
		}
	}
	if f.Confidence == 0 {
		f.Confidence = 0
	}
	if err := writeFact(tx, f); err != nil {
		return nil, err
	}
	if err := tx.Put(bucketEntity, indexKey(tenant, f.Entity, f.Key, version(f.Version)), entityValue(f.ID)); err != nil {
		return nil, err
	}
	if err := indexLive(tx, f, true); err != nil {
		return nil, err
	}
	return f, logFact(tx, f)
}

// SyncState is the state of the exchange between this store and one
// replica, for one tenant.
type SyncState struct {
	Remote string `json:"remote"`
	Tenant string `json:"tenant"`
	// PullCursors are the replica's cursors, by the entity prefix pulled
	// ("" for all); PushCursor is the seq of this store's change log up
	// to which every version was pushed or passed over.
	PullCursors map[string]string `json:"pull_cursors"`
	PushCursor  uint64            `json:"push_cursor"`
	LastPullAt  *time.Time        `json:"last_pull_at,omitempty"`
	LastPushAt  *time.Time        `json:"last_push_at,omitempty"`
	PullCount   uint64            `json:"pull_count"`
	PushCount   uint64            `json:"push_count"`
	// ConflictCount counts the conflicts resolved, here and on the
	// replica, over every exchange.
	ConflictCount uint64 `json:"conflict_count"`
	// LastError is the failure of the last exchange that failed, at
	// LastErrorAt; an exchange that succeeds later leaves it, and
	// comparing the times tells whether sync is failing now.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// MaxPullCursors bounds the entity prefixes a [SyncState] keeps a pull
// cursor for.
const MaxPullCursors = 64

func syncStateKey(remote, tenant string) []byte { return indexKey(remote, tenant) }

// GetSyncState returns the state of the exchange with remote for tenant;
// a fresh state when there is none.
func GetSyncState(tx Tx, remote, tenant string) (*SyncState, error) {
	v, err := tx.Get(bucketSyncState, syncStateKey(remote, tenant))
	if errors.Is(err, ErrNotFound) {
		return &SyncState{Remote: remote, Tenant: tenant, PullCursors: map[string]string{}}, nil
	}
	if err != nil {
		return nil, err
	}
	s := new(SyncState)
	if err := json.Unmarshal(v, s); err != nil {
		return nil, &CorruptRecordError{Bucket: bucketSyncState, Key: syncStateKey(remote, tenant), ID: remote, Err: err}
	}
	if s.PullCursors == nil {
		s.PullCursors = map[string]string{}
	}
	return s, nil
}

// PutSyncState stores s. The remote name must not contain a NUL byte.
func PutSyncState(tx Tx, s *SyncState) error {
	if strings.ContainsRune(s.Remote, 0) || s.Remote == "" {
		return fmt.Errorf("store: sync state: invalid remote name %q", s.Remote)
	}
	if len(s.PullCursors) > MaxPullCursors {
		return fmt.Errorf("store: sync state: more than %d pull cursors", MaxPullCursors)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return tx.Put(bucketSyncState, syncStateKey(s.Remote, s.Tenant), b)
}

// SyncStates returns the states of tenant's exchanges with every replica,
// at most max of them, sorted by replica name, and whether there are more.
func SyncStates(tx Tx, tenant string, max int) ([]*SyncState, bool, error) {
	var out []*SyncState
	more := false
	err := tx.Scan(bucketSyncState, nil, false, func(k, v []byte) error {
		remote, t, ok := bytes.Cut(k, []byte{0})
		if !ok || string(t) != tenant {
			return nil
		}
		if len(out) == max {
			more = true
			return ErrStop
		}
		s := new(SyncState)
		if err := json.Unmarshal(v, s); err != nil {
			return SkipCorrupt(tx, &CorruptRecordError{Bucket: bucketSyncState, Key: bytes.Clone(k), ID: string(remote), Err: err})
		}
		out = append(out, s)
		return nil
	})
	return out, more, err
}

// FormatSyncCursor and ParseSyncCursor convert a change-log seq to and
// from the cursor a replica hands out: its decimal digits.
func FormatSyncCursor(seq uint64) string { return strconv.FormatUint(seq, 10) }

// ParseSyncCursor reads a cursor made by [FormatSyncCursor]; "" is 0.
func ParseSyncCursor(c string) (uint64, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("store: sync cursor %q is not a change-log position", c)
	}
	return n, nil
}
