package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Memories in and out: a tenant's records, read in pages for an export
// and written back, ids and version chains kept, by an import.
//
// # What an export holds
//
// An export of a tenant, for an agent or for none, holds, in this order:
//
//   - every version of every fact chain of the tenant (superseded and
//     deleted versions included), chain by chain in the order of the
//     entity index (stored entity, key, version). Decisions are facts
//     (entities under [DecisionsPrefix]) and come with them, as do crux's
//     other reserved facts, but for the bootstrap knowledge (entities under
//     [BootstrapPrefix]), which every server seeds from its own tool
//     catalogue, and the tombstones of forgotten facts, whose values are
//     gone. A private fact is exported only for its owner.
//   - the working-memory sessions that have not expired: the anonymous
//     ones, and the agent's own.
//   - the tenant's constraints, active and suspended.
//   - the metadata of the agent's live artefacts (not their bytes).
//
// # What an import does
//
// [ImportMemories] writes each record as it was exported: a fact keeps
// its id, version, stored_at, supersession links, validity and deletion,
// and gets its index entries (and its change-log entry, as a write does).
// It never changes or removes what the store holds:
//
//   - a record whose id the store holds already, equal, is unchanged;
//   - one whose id the store holds with different content, or a fact whose
//     version number its chain already gives to another fact, or a current
//     fact whose chain has another current version here, is a conflict: it
//     is left out and counted, and the store's own record stays;
//   - a session that has expired by the time of the import, and every
//     artefact (their bytes are not exported), are skipped.
//
// So importing a file twice changes nothing the second time, and an
// import into a store that already holds some of the records adds the
// others.

// MemoryRecord is one record of a memories export: Type names the one
// field that is set.
type MemoryRecord struct {
	Type       string      `json:"type"` // see the MemoryType constants
	Fact       *Fact       `json:"fact,omitempty"`
	Session    *Session    `json:"session,omitempty"`
	Constraint *Constraint `json:"constraint,omitempty"`
	Artefact   *Artefact   `json:"artefact,omitempty"`
}

// The record types of a memories export.
const (
	MemoryFact       = "fact"
	MemorySession    = "session"
	MemoryConstraint = "constraint"
	MemoryArtefact   = "artefact"
)

// MemoryExportQuery asks [ExportMemories] for one page of an export.
type MemoryExportQuery struct {
	Tenant string
	// Agent is the agent whose private records (private facts, its own
	// sessions and artefacts) the export holds; "" exports shared records
	// only.
	Agent string
	// Cursor is the Next of the previous page; "" starts the export.
	Cursor string
	// MaxRecords caps the records of the page, MaxBytes the size of their
	// texts (values and states; the first record is always taken), and
	// MaxScan the index entries the page reads. Zero or less means the
	// defaults: 1000 records, 8 MiB, and 16 entries per record.
	MaxRecords, MaxBytes, MaxScan int
	Now                           time.Time // for the expiry of sessions and artefacts
}

// MemoryExportPage is one page of an export.
type MemoryExportPage struct {
	Records []MemoryRecord
	// Next is the cursor of the following page, "" when the export is
	// complete. A page may hold no record and still have a Next (its scan
	// passed over records the export leaves out).
	Next string
}

// The phases of an export, in order, with the bucket each walks.
var memoryPhases = []struct {
	name   string
	bucket string
}{
	{MemoryFact, bucketEntity},
	{MemorySession, bucketMemSessions},
	{MemoryConstraint, bucketConstraints},
	{MemoryArtefact, bucketArtefacts},
}

// ErrInvalidCursor reports an export cursor that [ExportMemories] did not
// make for the query's tenant.
var ErrInvalidCursor = errors.New("store: invalid export cursor")

// ExportMemories returns one page of the export q asks for, read in tx.
// Each page is its own read: records written between two pages may or may
// not be in the export, and a chain written meanwhile may be exported with
// two current versions (the import then keeps the first as current and
// reports the second as a conflict). An unreadable record is skipped and
// reported as scans report them.
func ExportMemories(tx Tx, q MemoryExportQuery) (*MemoryExportPage, error) {
	if q.MaxRecords <= 0 {
		q.MaxRecords = 1000
	}
	if q.MaxBytes <= 0 {
		q.MaxBytes = 8 << 20
	}
	if q.MaxScan <= 0 {
		q.MaxScan = 16 * q.MaxRecords
	}
	phase, after, err := parseMemoryCursor(q.Cursor, q.Tenant)
	if err != nil {
		return nil, err
	}
	page := &MemoryExportPage{}
	size, scanned := 0, 0
	for ; phase < len(memoryPhases); phase, after = phase+1, nil {
		p := memoryPhases[phase]
		prefix := append([]byte(q.Tenant), 0)
		from := prefix
		if after != nil {
			from = append(after, 0) // the least key after it
		}
		var last []byte
		full := false
		err := scanFrom(tx, p.bucket, prefix, from, func(k, v []byte) error {
			if len(page.Records) == q.MaxRecords || scanned == q.MaxScan || len(page.Records) > 0 && size >= q.MaxBytes {
				full = true
				return ErrStop
			}
			scanned++
			last = append(last[:0], k...)
			rec, n, err := exportRecord(tx, p.name, q, k[len(prefix):], v)
			if err != nil || rec == nil {
				return err
			}
			page.Records = append(page.Records, *rec)
			size += n
			return nil
		})
		if err != nil {
			return nil, err
		}
		if full {
			page.Next = memoryCursor(phase, last)
			return page, nil
		}
	}
	return page, nil
}

// exportRecord returns the record of the phase named typ under the key
// rest (its tenant removed) with the value v, and the size of its texts,
// or nil when the export leaves it out.
func exportRecord(tx Tx, typ string, q MemoryExportQuery, rest, v []byte) (*MemoryRecord, int, error) {
	switch typ {
	case MemoryFact:
		stored, _, _ := bytes.Cut(rest, []byte{0})
		if bytes.HasPrefix(stored, []byte(BootstrapPrefix)) ||
			bytes.HasPrefix(stored, []byte(PrivatePrefix)) && (q.Agent == "" || !bytes.HasPrefix(stored, []byte(PrivateEntity(q.Agent, "")))) {
			return nil, 0, nil
		}
		f, err := entryFact(tx, v)
		if err != nil {
			return nil, 0, SkipCorrupt(tx, err)
		}
		if f.Tenant != q.Tenant || IsForgotten(f) || !f.VisibleTo(q.Agent) || f.StoredEntity() != string(stored) {
			return nil, 0, nil
		}
		return &MemoryRecord{Type: typ, Fact: f}, len(f.Value) + len(f.Entity) + len(f.Key), nil
	case MemorySession:
		s := new(Session)
		if err := json.Unmarshal(v, s); err != nil {
			return nil, 0, SkipCorrupt(tx, &CorruptRecordError{Bucket: bucketMemSessions, Key: append([]byte(q.Tenant+"\x00"), rest...), Err: err})
		}
		if s.Tenant != q.Tenant || s.Owner != "" && s.Owner != q.Agent || s.Expired(q.Now) {
			return nil, 0, nil
		}
		return &MemoryRecord{Type: typ, Session: s}, len(s.State), nil
	case MemoryConstraint:
		c := new(Constraint)
		if err := json.Unmarshal(v, c); err != nil {
			return nil, 0, SkipCorrupt(tx, &CorruptRecordError{Bucket: bucketConstraints, Key: append([]byte(q.Tenant+"\x00"), rest...), Err: err})
		}
		if c.Tenant != q.Tenant {
			return nil, 0, nil
		}
		return &MemoryRecord{Type: typ, Constraint: c}, len(c.Assertion), nil
	case MemoryArtefact:
		a := new(Artefact)
		if err := json.Unmarshal(v, a); err != nil {
			return nil, 0, SkipCorrupt(tx, &CorruptRecordError{Bucket: bucketArtefacts, Key: append([]byte(q.Tenant+"\x00"), rest...), Err: err})
		}
		if a.Tenant != q.Tenant || q.Agent == "" || a.Owner != q.Agent || a.Expired(q.Now) {
			return nil, 0, nil
		}
		return &MemoryRecord{Type: typ, Artefact: a}, 0, nil
	}
	return nil, 0, fmt.Errorf("store: unknown export phase %q", typ)
}

// memoryCursor is the cursor of an export that stopped after the key last
// of the phase: the phase's name, ":", and the key in base64 (URL alphabet,
// unpadded).
func memoryCursor(phase int, last []byte) string {
	if last == nil {
		return memoryPhases[phase].name + ":" // the phase's start
	}
	return memoryPhases[phase].name + ":" + base64.RawURLEncoding.EncodeToString(last)
}

// parseMemoryCursor returns the phase and the key an export resumes after
// (nil: the phase's start).
func parseMemoryCursor(c, tenant string) (int, []byte, error) {
	if c == "" {
		return 0, nil, nil
	}
	name, enc, ok := strings.Cut(c, ":")
	for i, p := range memoryPhases {
		if !ok || p.name != name {
			continue
		}
		if enc == "" {
			return i, nil, nil
		}
		k, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil || !bytes.HasPrefix(k, append([]byte(tenant), 0)) {
			break
		}
		return i, k, nil
	}
	return 0, nil, ErrInvalidCursor
}

// MemoryImportCounts counts what an import did with the records of one
// type.
type MemoryImportCounts struct {
	Imported  int `json:"imported"`
	Unchanged int `json:"unchanged"`
	Conflicts int `json:"conflicts"`
	Skipped   int `json:"skipped,omitempty"`
}

// add adds o to c.
func (c *MemoryImportCounts) add(o MemoryImportCounts) {
	c.Imported += o.Imported
	c.Unchanged += o.Unchanged
	c.Conflicts += o.Conflicts
	c.Skipped += o.Skipped
}

// MemoryImportResult is what [ImportMemories] did.
type MemoryImportResult struct {
	Facts       MemoryImportCounts `json:"facts"`
	Sessions    MemoryImportCounts `json:"sessions"`
	Constraints MemoryImportCounts `json:"constraints"`
	Artefacts   MemoryImportCounts `json:"artefacts"`
	// Conflicting lists the ids of the first conflicting records (at most
	// [MaxConflictsListed]), each with why.
	Conflicting []MemoryConflict `json:"conflicting,omitempty"`
	// ImportedIDs are the ids of the records written, in order.
	ImportedIDs []string `json:"-"`
}

// Add adds the counts and conflicts of o to r.
func (r *MemoryImportResult) Add(o *MemoryImportResult) {
	r.Facts.add(o.Facts)
	r.Sessions.add(o.Sessions)
	r.Constraints.add(o.Constraints)
	r.Artefacts.add(o.Artefacts)
	for _, c := range o.Conflicting {
		if len(r.Conflicting) < MaxConflictsListed {
			r.Conflicting = append(r.Conflicting, c)
		}
	}
}

// Written reports how many records the import wrote.
func (r *MemoryImportResult) Written() int {
	return r.Facts.Imported + r.Sessions.Imported + r.Constraints.Imported + r.Artefacts.Imported
}

// MemoryConflict is a record an import left out because the store holds
// something else in its place.
type MemoryConflict struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// MaxConflictsListed bounds the conflicts a [MemoryImportResult] lists;
// its counts count them all.
const MaxConflictsListed = 32

// CheckMemoryRecord returns why r cannot be imported into tenant, or nil:
// the type and its one record, ids of the right form, the tenant, names
// and texts within the limits the tools keep, valid UTF-8.
func CheckMemoryRecord(r *MemoryRecord, tenant string) error {
	set := 0
	for _, p := range []bool{r.Fact != nil, r.Session != nil, r.Constraint != nil, r.Artefact != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("a record holds exactly one of fact, session, constraint and artefact")
	}
	if err := CheckText("record", r); err != nil {
		return err
	}
	switch {
	case r.Type == MemoryFact && r.Fact != nil:
		return checkImportFact(r.Fact, tenant)
	case r.Type == MemorySession && r.Session != nil:
		s := r.Session
		switch {
		case s.Tenant != tenant:
			return fmt.Errorf("session %q: tenant_id %q is not the export's tenant %q", s.ID, s.Tenant, tenant)
		case s.ID == "" || len(s.ID) > maxSyncName || strings.ContainsRune(s.ID, 0):
			return fmt.Errorf("session_id is empty, longer than %d bytes or holds a NUL byte", maxSyncName)
		case len(s.Owner) > maxSyncName || strings.ContainsRune(s.Owner, 0):
			return fmt.Errorf("session %q: owner is longer than %d bytes or holds a NUL byte", s.ID, maxSyncName)
		case len(s.State) == 0 || s.State[0] != '{' || !json.Valid(s.State):
			return fmt.Errorf("session %q: state is not a JSON object", s.ID)
		case len(s.State) > MaxImportSessionState:
			return fmt.Errorf("session %q: state is larger than %d bytes", s.ID, MaxImportSessionState)
		case s.UpdatedAt.IsZero():
			return fmt.Errorf("session %q: updated_at is missing", s.ID)
		}
		return nil
	case r.Type == MemoryConstraint && r.Constraint != nil:
		c := r.Constraint
		switch {
		case c.Tenant != tenant:
			return fmt.Errorf("constraint %q: tenant_id %q is not the export's tenant %q", c.ID, c.Tenant, tenant)
		case !validOrderedID(c.ID, "c_"):
			return fmt.Errorf("constraint_id %q is not c_ and 32 lowercase hex digits", c.ID)
		case !ValidConstraintType(c.Type) || SeverityRank(c.Severity) > 3 ||
			c.Status != ConstraintActive && c.Status != ConstraintSuspended:
			return fmt.Errorf("constraint %q: unknown constraint_type, severity or status", c.ID)
		case c.Hash != ConstraintHash(c.Tenant, c.Type, c.Assertion, c.Severity):
			return fmt.Errorf("constraint %q: constraint_hash does not match its content", c.ID)
		case c.CreatedAt.IsZero():
			return fmt.Errorf("constraint %q: created_at is missing", c.ID)
		}
		return nil
	case r.Type == MemoryArtefact && r.Artefact != nil:
		a := r.Artefact
		if a.Tenant != tenant {
			return fmt.Errorf("artefact %q: tenant_id %q is not the export's tenant %q", a.ID, a.Tenant, tenant)
		}
		return nil
	}
	return fmt.Errorf("type %q does not name the record the line holds (fact, session, constraint or artefact)", r.Type)
}

// MaxImportSessionState bounds the state of an imported session, as
// save_session bounds the state it stores.
const MaxImportSessionState = 1 << 20

// validOrderedID reports whether id is prefix and 32 lowercase hex digits.
func validOrderedID(id, prefix string) bool {
	return strings.HasPrefix(id, prefix) && validSyncID("f_"+id[len(prefix):])
}

// checkImportFact returns why f cannot be imported into tenant, or nil.
func checkImportFact(f *Fact, tenant string) error {
	sf := ToSyncFact(f)
	reason := checkSyncFact(&sf)
	if reason == "entities starting with "+ReservedPrefix+" are not synced" {
		reason = "" // an import takes crux's reserved facts, checked below
	}
	switch {
	case reason != "":
	case f.Tenant != tenant:
		reason = fmt.Sprintf("tenant %q is not the export's tenant %q", f.Tenant, tenant)
	case f.Version == 0:
		reason = "version is missing"
	case f.Private && f.Owner == "":
		reason = "a private fact needs an owner"
	case f.Owner == forgottenOwner:
		reason = "the tombstone of a forgotten fact is not imported"
	case strings.HasPrefix(f.Entity, BootstrapPrefix):
		reason = "the bootstrap knowledge is not imported: every server seeds its own"
	case f.Private && IsReserved(f.Entity) && strings.HasPrefix(f.Entity, PrivatePrefix):
		reason = "entity is a stored private name; a private fact holds its logical entity"
	case f.SupersededBy != "" && !validSyncID(f.SupersededBy):
		reason = "superseded_by is not a fact id"
	case !utf8.ValidString(f.Value):
		reason = "value is not valid UTF-8"
	}
	for _, id := range f.Retires {
		if reason == "" && !validSyncID(id) {
			reason = "retires holds an id that is not a fact id"
		}
	}
	if reason != "" {
		return fmt.Errorf("fact %q: %s", f.ID, reason)
	}
	return nil
}

// ImportMemories writes recs, each checked with [CheckMemoryRecord], into
// tenant in tx by the rules in the package documentation of memories:
// records the store holds are unchanged, conflicting ones are left out
// and counted, the others are written as they were exported. now decides
// which sessions have expired.
func ImportMemories(tx Tx, tenant string, recs []MemoryRecord, now time.Time) (*MemoryImportResult, error) {
	res := &MemoryImportResult{}
	conflict := func(c *MemoryImportCounts, typ, id, reason string) {
		c.Conflicts++
		if len(res.Conflicting) < MaxConflictsListed {
			res.Conflicting = append(res.Conflicting, MemoryConflict{Type: typ, ID: id, Reason: reason})
		}
	}
	var hashes map[string]string // active constraints' hashes → ids, read on first use
	for i := range recs {
		r := &recs[i]
		if err := CheckMemoryRecord(r, tenant); err != nil {
			return nil, fmt.Errorf("store: import: record %d: %w", i, err)
		}
		switch r.Type {
		case MemoryFact:
			why, err := importFact(tx, r.Fact)
			switch {
			case err != nil:
				return nil, err
			case why == "":
				res.Facts.Imported++
				res.ImportedIDs = append(res.ImportedIDs, r.Fact.ID)
			case why == reasonSame:
				res.Facts.Unchanged++
			default:
				conflict(&res.Facts, r.Type, r.Fact.ID, why)
			}
		case MemorySession:
			s := r.Session
			old, err := getSessionRaw(tx, s.Tenant, s.Owner, s.ID)
			switch {
			case err == nil:
				if sameJSON(old, s) {
					res.Sessions.Unchanged++
				} else {
					conflict(&res.Sessions, r.Type, s.StoredID(), "the store holds another session under this id")
				}
				continue
			case !errors.Is(err, ErrNotFound):
				return nil, err
			case s.Expired(now):
				res.Sessions.Skipped++
				continue
			}
			if err := PutSession(tx, s); err != nil {
				return nil, err
			}
			res.Sessions.Imported++
			res.ImportedIDs = append(res.ImportedIDs, s.StoredID())
		case MemoryConstraint:
			c := r.Constraint
			old, err := GetConstraint(tx, c.Tenant, c.ID)
			switch {
			case err == nil:
				if sameJSON(old, c) {
					res.Constraints.Unchanged++
				} else {
					conflict(&res.Constraints, r.Type, c.ID, "the store holds another constraint under this id")
				}
				continue
			case !errors.Is(err, ErrNotFound):
				return nil, err
			}
			if hashes == nil {
				hashes = map[string]string{}
				if _, err := Constraints(tx, ConstraintQuery{Tenant: tenant}, func(c *Constraint) error {
					hashes[c.Hash] = c.ID
					return nil
				}); err != nil {
					return nil, err
				}
			}
			if c.Status == ConstraintActive {
				if id, ok := hashes[c.Hash]; ok {
					conflict(&res.Constraints, r.Type, c.ID, "the store holds the same active rule as "+id)
					continue
				}
				if len(hashes) >= MaxConstraints {
					conflict(&res.Constraints, r.Type, c.ID, fmt.Sprintf("the tenant holds %d active constraints, the most it may", MaxConstraints))
					continue
				}
				hashes[c.Hash] = c.ID
			}
			if err := writeConstraint(tx, c); err != nil {
				return nil, err
			}
			res.Constraints.Imported++
			res.ImportedIDs = append(res.ImportedIDs, c.ID)
		case MemoryArtefact:
			res.Artefacts.Skipped++ // the bytes are not exported
		}
	}
	return res, nil
}

// reasonSame is importFact's answer for a fact the store holds already.
const reasonSame = "same"

// importFact writes f, an exported version, with its index entries, and
// returns "", or reasonSame when the store holds it already, or why it
// conflicts with the store.
func importFact(tx Tx, f *Fact) (string, error) {
	// Times as a write stores them, so that a file written with other
	// offsets still finds its facts unchanged the second time.
	f.StoredAt, f.ValidFrom = f.StoredAt.UTC(), f.ValidFrom.UTC()
	for _, t := range []**time.Time{&f.ValidTo, &f.DeletedAt, &f.ReverifiedAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	old, err := GetFact(tx, f.ID)
	switch {
	case err == nil:
		a, err := factEnc.Marshal(old)
		if err != nil {
			return "", err
		}
		b, err := factEnc.Marshal(f)
		if err != nil {
			return "", err
		}
		if bytes.Equal(a, b) {
			return reasonSame, nil
		}
		return "the store holds another version under this id", nil
	case errors.Is(err, ErrNotFound):
	default:
		var ce *CorruptRecordError
		if errors.As(err, &ce) {
			return "the store holds an unreadable record under this id", nil
		}
		return "", err
	}
	stored := f.StoredEntity()
	if f.Supersedes != "" {
		// A chain is imported whole: the version f names as its
		// predecessor came earlier (the file holds chains oldest first)
		// or is in the store, and is the previous version of f's chain.
		prev, err := GetFact(tx, f.Supersedes)
		switch {
		case errors.Is(err, ErrNotFound):
			return "it supersedes " + f.Supersedes + ", which is neither before it in the file nor in the store", nil
		case err != nil:
			return "", err
		case prev.Tenant != f.Tenant || prev.StoredEntity() != stored || prev.Key != f.Key || prev.Version+1 != f.Version ||
			prev.SupersededBy != "" && prev.SupersededBy != f.ID: // a current one is the next check's
			return "it supersedes " + f.Supersedes + ", which is not the previous version of its chain", nil
		}
	}
	slot := indexKey(f.Tenant, stored, f.Key, version(f.Version))
	switch _, err := tx.Get(bucketEntity, slot); {
	case err == nil:
		return fmt.Sprintf("version %d of its chain is another fact here", f.Version), nil
	case !errors.Is(err, ErrNotFound):
		return "", err
	}
	if f.Current() {
		cur, err := chainCurrent(tx, f)
		if err != nil {
			return "", err
		}
		if cur != nil {
			return "its chain has another current version here: " + cur.ID, nil
		}
	}
	if err := writeImported(tx, f, stored, slot); err != nil {
		return "", err
	}
	return "", nil
}

// writeImported writes an imported fact f that passed importFact's checks:
// its record, its entity-index slot, its key entry, its keyword indexes
// when it is not deleted, its sync log entry and, when it is current, the
// count of its entity's current facts.
func writeImported(tx Tx, f *Fact, stored string, slot []byte) error {
	if err := writeFact(tx, f); err != nil {
		return err
	}
	if err := tx.Put(bucketEntity, slot, entityValue(f.ID)); err != nil {
		return err
	}
	if err := putKeyEntry(tx, f.Tenant, f.Key, stored); err != nil {
		return err
	}
	if !f.Deleted {
		if err := indexLive(tx, f, true); err != nil {
			return err
		}
	}
	if err := logFact(tx, f); err != nil {
		return err
	}
	if f.Current() {
		if err := addActive(tx, f.Tenant, stored, 1); err != nil {
			return err
		}
	}
	return nil
}

// sameJSON reports whether a and b encode to the same JSON.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// FactValue is a value to store as the current shared fact of (Entity,
// Key), as store_fact stores it: an importer from another memory system
// makes them (see [ImportFactValues]).
type FactValue struct {
	Entity string `json:"entity"`
	Key    string `json:"key"`
	Value  string `json:"value"`
}

// CheckFactValue returns why v cannot be stored, or nil: an entity and a
// key that are not empty, at most 1024 bytes, free of control characters
// and, for the entity, not reserved for crux; texts of valid UTF-8.
func CheckFactValue(v *FactValue) error {
	for _, n := range []struct{ name, s string }{{"entity", v.Entity}, {"key", v.Key}} {
		switch {
		case n.s == "":
			return fmt.Errorf("%s is empty", n.name)
		case len(n.s) > maxSyncName:
			return fmt.Errorf("%s %.40q… is longer than %d bytes", n.name, n.s, maxSyncName)
		case strings.ContainsFunc(n.s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return fmt.Errorf("%s %q holds a control character", n.name, n.s)
		}
	}
	switch {
	case len(v.Value) > MaxSyncValueBytes:
		return fmt.Errorf("the value of %q %q is %d bytes, longer than %d (the bound on every value crux stores)", v.Entity, v.Key, len(v.Value), MaxSyncValueBytes)
	case IsReserved(v.Entity):
		return fmt.Errorf("entity %q starts with %s, which crux reserves for itself", v.Entity, ReservedPrefix)
	case !utf8.ValidString(v.Entity) || !utf8.ValidString(v.Key) || !utf8.ValidString(v.Value):
		return errors.New("a text is not valid UTF-8")
	}
	return nil
}

// ImportFactValues stores each of vals, checked with [CheckFactValue], as
// a shared fact of tenant with confidence 1, written by no agent at now:
// a value that is its chain's current value already is unchanged, any
// other becomes the chain's new current version, superseding the old one.
// So importing the same values twice changes nothing.
func ImportFactValues(tx Tx, tenant string, vals []FactValue, now time.Time) (*MemoryImportResult, error) {
	res := &MemoryImportResult{}
	for i := range vals {
		v := &vals[i]
		if err := CheckFactValue(v); err != nil {
			return nil, fmt.Errorf("store: import: value %d: %w", i, err)
		}
		cur, err := currentShared(tx, tenant, v.Entity, v.Key)
		if err != nil {
			return nil, err
		}
		if cur != nil && cur.Value == v.Value {
			res.Facts.Unchanged++
			continue
		}
		f, _, err := PutFact(tx, NewFact{Scope: Scope{Tenant: tenant}, Entity: v.Entity, Key: v.Key, Value: v.Value,
			Confidence: 1, Now: now})
		if err != nil {
			return nil, err
		}
		res.Facts.Imported++
		res.ImportedIDs = append(res.ImportedIDs, f.ID)
	}
	return res, nil
}
