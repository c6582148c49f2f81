package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Problem is a record of the store that cannot be read, or an index entry
// that names such a record or one that does not exist, as [Diagnose]
// finds it.
type Problem struct {
	Bucket string // the bucket holding the record or the index entry
	Key    []byte // its key there
	ID     string // the record concerned: a fact id, or a forget's receipt id
	Reason string // why it is a problem
	// Repairable reports whether [Repair] removes it: unreadable facts and
	// the index entries naming them or naming no fact are removed; an
	// unreadable forget record or forgotten fact is only listed, since
	// removing it would lose what restoring that forget needs.
	Repairable bool
}

// String is the problem on one line: bucket, key and reason.
func (p Problem) String() string {
	return fmt.Sprintf("%s %q: %s", p.Bucket, p.Key, p.Reason)
}

// factIndexes are the index buckets of facts, and how to find the fact id
// in each entry.
var factIndexes = []struct {
	bucket string
	id     func(k, v []byte) (string, bool)
}{
	{bucketEntity, func(_, v []byte) (string, bool) { return entityID(v), true }},
	// One entry per chain, with an empty value: checked by keyEntryProblem.
	{bucketKey, func(_, v []byte) (string, bool) { return string(v), true }},
	// Blocks of postings: checked posting by posting by blockProblems.
	{bucketWords, nil},
	// tenant, fact id: the tenant holds no NUL byte.
	{bucketFresh, func(k, _ []byte) (string, bool) {
		i := bytes.IndexByte(k, 0)
		return string(k[i+1:]), i >= 0
	}},
	// tenant, scope, 16 bytes of rank and fact id (see rankEntry): the
	// rank bytes may hold NUL bytes, the tenant and the scope (an agent
	// name) do not.
	{bucketRank, func(k, _ []byte) (string, bool) {
		parts := bytes.SplitN(k, []byte{0}, 3)
		if len(parts) != 3 || len(parts[2]) <= 16 {
			return "", false
		}
		return string(rankOfEntry(parts[2])[16:]), true
	}},
}

// Diagnose reads every fact, forget record and forgotten fact of the store
// and every entry of the fact indexes, and returns the problems it finds:
// records that do not decode, and index entries that name an unreadable
// fact or one that does not exist, in bucket order and, within a bucket,
// in key order. It changes nothing, and reads a store in an older layout
// (one not yet upgraded, see [Upgrade]) as well.
func Diagnose(tx Tx) ([]Problem, error) { return DiagnoseAt(tx, time.Time{}) }

// DiagnoseAt is [Diagnose] that also lists, unless now is zero, the fact
// versions stored more than MaxSyncClockSkew after now, in the same read
// of the facts. No write of this crux stores one: a local write is
// stamped with the server's clock and a version from a replica is refused
// that far ahead (see ApplySyncFacts). One found here came from a replica
// before that check, or from a clock that ran far ahead; it stays the
// newest version of its chain, and every later write of that chain is
// stamped after it, until that time. Such a problem is never Repairable:
// an operator reads the chain with fact_history and corrects it
// (memory_edit, or memory_forget as an operator).
func DiagnoseAt(tx Tx, now time.Time) ([]Problem, error) {
	var out []Problem
	unreadable := make(map[string]bool)
	limit := now.Add(MaxSyncClockSkew)
	err := tx.Scan(bucketFacts, nil, false, func(k, v []byte) error {
		f := new(Fact)
		switch err := decodeFact(v, string(k), f); {
		case err != nil:
			unreadable[string(k)] = true
			out = append(out, Problem{Bucket: bucketFacts, Key: bytes.Clone(k), ID: string(k),
				Reason: "the fact cannot be read: " + err.Error(), Repairable: true})
		case !now.IsZero() && f.StoredAt.After(limit):
			out = append(out, Problem{Bucket: bucketFacts, Key: bytes.Clone(k), ID: f.ID,
				Reason: fmt.Sprintf("stored at %s, %s ahead of this clock (owner %q, entity %q, key %q); fact_history shows its chain",
					f.StoredAt.Format(time.RFC3339), f.StoredAt.Sub(now).Round(time.Second), f.Owner, f.Entity, f.Key)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, ix := range factIndexes {
		err := tx.Scan(ix.bucket, nil, false, func(k, v []byte) error {
			if ix.bucket == bucketWords {
				ps, err := blockProblems(tx, k, v, unreadable)
				out = append(out, ps...)
				return err
			}
			if ix.bucket == bucketKey && len(v) == 0 {
				p, err := keyEntryProblem(tx, k, unreadable)
				if p != nil {
					out = append(out, *p)
				}
				return err
			}
			id, ok := ix.id(k, v)
			p := Problem{Bucket: ix.bucket, Key: bytes.Clone(k), ID: id, Repairable: true}
			switch {
			case !ok:
				p.Reason = "malformed index entry"
			case unreadable[id]:
				p.Reason = "names the unreadable fact " + id
			default:
				if _, err := tx.Get(bucketFacts, []byte(id)); errors.Is(err, ErrNotFound) {
					p.Reason = "names the fact " + id + ", which does not exist"
				} else if err != nil {
					return err
				} else {
					return nil
				}
			}
			out = append(out, p)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	err = tx.Scan(bucketForgets, nil, false, func(k, v []byte) error {
		if err := factDec.Unmarshal(v, new(ForgetRecord)); err != nil {
			out = append(out, Problem{Bucket: bucketForgets, Key: bytes.Clone(k), ID: string(k),
				Reason: "the forget record cannot be read: " + err.Error()})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tx.Scan(bucketForgetFacts, nil, false, func(k, v []byte) error {
		ff := new(ForgottenFact)
		err := factDec.Unmarshal(v, ff)
		if err == nil && ff.Original != nil { // nil once the forget is restored or purged
			err = decodeFact(ff.Original, ff.ID, new(Fact))
		}
		if err != nil {
			id, _, _ := bytes.Cut(k, []byte{0})
			out = append(out, Problem{Bucket: bucketForgetFacts, Key: bytes.Clone(k), ID: string(id),
				Reason: "the forgotten fact cannot be read: " + err.Error()})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// blockProblems checks a block of keyword postings: it must decode, and
// each posting must name a fact that exists and can be read. A problem
// posting is reported with the block's key and the fact's id; [Repair]
// removes that posting alone.
func blockProblems(tx Tx, k, v []byte, unreadable map[string]bool) ([]Problem, error) {
	_, _, last, ok := parseBlockKey(k)
	if ok && len(v) == rankLen && len(last) <= postingIDMax && last != tailMark {
		// One posting, as a store not yet upgraded keeps them (see
		// upgradeWords): the fact id ends the key.
		return blockProblems(tx, k, encodeBlock([]posting{{id: last, rank: v}}), unreadable)
	}
	ps, err := decodeBlock(v)
	if err != nil || !ok {
		return []Problem{{Bucket: bucketWords, Key: bytes.Clone(k), Reason: "malformed index entry", Repairable: true}}, nil
	}
	var out []Problem
	for _, p := range ps {
		reason := ""
		if unreadable[p.id] {
			reason = "names the unreadable fact " + p.id
		} else if _, err := tx.Get(bucketFacts, []byte(p.id)); errors.Is(err, ErrNotFound) {
			reason = "names the fact " + p.id + ", which does not exist"
		} else if err != nil {
			return nil, err
		}
		if reason != "" {
			out = append(out, Problem{Bucket: bucketWords, Key: bytes.Clone(k), ID: p.id, Reason: reason, Repairable: true})
		}
	}
	return out, nil
}

// keyEntryProblem checks the key-index entry k of a version chain: the
// chain must hold a version that exists and can be read.
func keyEntryProblem(tx Tx, k []byte, unreadable map[string]bool) (*Problem, error) {
	i := bytes.IndexByte(k, 0)
	key, stored, ok := "", "", i >= 0
	if ok {
		key, stored, ok = parseKeyEntry(k, string(k[:i]))
	}
	p := &Problem{Bucket: bucketKey, Key: bytes.Clone(k), Repairable: true}
	if !ok {
		p.Reason = "malformed index entry"
		return p, nil
	}
	found := false
	err := tx.Scan(bucketEntity, indexKey(string(k[:i]), stored, key, ""), false, func(_, v []byte) error {
		id := entityID(v)
		if unreadable[id] {
			return nil
		}
		if _, err := tx.Get(bucketFacts, []byte(id)); errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		found = true
		return ErrStop
	})
	if err != nil || found {
		return nil, err
	}
	p.Reason = fmt.Sprintf("names the version chain of %q under key %q, which holds no readable fact", stored, key)
	return p, nil
}

// Repair removes in tx what [Diagnose] finds repairable: each unreadable
// fact, and each index entry that names an unreadable fact or a fact that
// does not exist (entity and key indexes, keyword postings, the confidence
// index), together with the pins of the facts removed. It then recounts
// the current facts of every entity an index entry it removed belonged
// to, so that entity listings stay right. A removed fact's content is
// lost: the version it had retired stays retired, and the next write of
// its (entity, key) starts a new current version. It returns what it
// removed; run it in one Update so that the store is repaired whole or not
// at all. A store in an older layout is first brought to the current one
// ([Upgrade]), in the same transaction.
func Repair(tx Tx) ([]Problem, error) {
	// A store an older crux wrote is upgraded first, so that what is
	// removed is found in the current layout.
	if _, err := Upgrade(tx); err != nil {
		return nil, err
	}
	problems, err := Diagnose(tx)
	if err != nil {
		return nil, err
	}
	var removed []Problem
	removedFacts := make(map[string]bool)
	type entity struct{ tenant, stored string }
	recount := make(map[entity]bool)
	for _, p := range problems {
		if !p.Repairable {
			continue
		}
		if tenant, word, _, ok := parseBlockKey(p.Key); ok && p.Bucket == bucketWords && p.ID != "" {
			// One posting of a block: the others stay.
			if err := removePosting(tx, tenant, word, p.ID); err != nil {
				return nil, err
			}
		} else if err := tx.Delete(p.Bucket, p.Key); err != nil {
			return nil, err
		}
		removed = append(removed, p)
		switch p.Bucket {
		case bucketFacts:
			removedFacts[p.ID] = true
		case bucketEntity:
			// tenant, stored entity, key, version
			if parts := bytes.SplitN(p.Key, []byte{0}, 3); len(parts) == 3 {
				recount[entity{string(parts[0]), string(parts[1])}] = true
			}
		}
	}
	// Pins of the removed facts, both ways.
	var pins []Problem
	err = tx.Scan(bucketPinsByFact, nil, false, func(k, _ []byte) error {
		parts := bytes.SplitN(k, []byte{0}, 3) // tenant, fact id, agent
		if len(parts) == 3 && removedFacts[string(parts[1])] {
			id := string(parts[1])
			pins = append(pins,
				Problem{Bucket: bucketPinsByFact, Key: bytes.Clone(k), ID: id, Reason: "pins the removed fact " + id, Repairable: true},
				Problem{Bucket: bucketPins, Key: indexKey(string(parts[0]), string(parts[2]), id), ID: id, Reason: "pins the removed fact " + id, Repairable: true})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range pins {
		if err := tx.Delete(p.Bucket, p.Key); err != nil {
			return nil, err
		}
	}
	removed = append(removed, pins...)
	entities := make([]entity, 0, len(recount))
	for e := range recount {
		entities = append(entities, e)
	}
	sort.Slice(entities, func(i, j int) bool {
		if entities[i].tenant != entities[j].tenant {
			return entities[i].tenant < entities[j].tenant
		}
		return entities[i].stored < entities[j].stored
	})
	for _, e := range entities {
		if err := recountActive(tx, e.tenant, e.stored); err != nil {
			return nil, err
		}
	}
	return removed, nil
}

// recountActive sets the number of current facts of a stored entity from
// its version chains.
func recountActive(tx Tx, tenant, stored string) error {
	var n uint64
	err := tx.Scan(bucketEntity, indexKey(tenant, stored, ""), false, func(_, v []byte) error {
		f, err := entryFact(tx, v)
		if err != nil {
			return err
		}
		if f.Current() {
			n++
		}
		return nil
	})
	if err != nil {
		return err
	}
	k := indexKey(tenant, stored)
	if n == 0 {
		return tx.Delete(bucketActive, k)
	}
	return tx.Put(bucketActive, k, binary.BigEndian.AppendUint64(nil, n))
}
