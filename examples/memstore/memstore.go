// Package memstore is an example of writing a store.Backend of one's own,
// and of how a backend proves itself with the conformance suite
// (memstore_test.go is one call to storetest.Run): a map per bucket, and
// a sort of the bucket at every Scan. The supported in-memory backend, for
// tests and for embedding without a disk, is package store/mem; this one
// keeps nothing across restarts and is not meant for use.
//
// Writers are serialised by a mutex; an Update works on an overlay of its
// own changes and publishes them on commit, so readers never see a partial
// transaction.
package memstore

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/crux-go/crux/store"
)

// Store is an in-memory store.Backend. The zero value is not usable: call New.
type Store struct {
	write  sync.Mutex   // one Update at a time
	mu     sync.RWMutex // guards data and closed
	data   map[string]map[string][]byte
	closed bool
}

var _ store.Backend = (*Store)(nil)

// New returns an empty store.
func New() *Store { return &Store{data: map[string]map[string][]byte{}} }

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	t := &tx{ctx: ctx, base: s.data}
	err := fn(t)
	t.done = true
	return err
}

// Update runs fn in a read-write transaction and commits it when fn returns
// nil and the context is still live.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.write.Lock()
	defer s.write.Unlock()
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return store.ErrClosed
	}
	t := &tx{ctx: ctx, base: s.data, overlay: map[string]map[string][]byte{}, writable: true}
	err := fn(t)
	t.done = true
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for b, kv := range t.overlay {
		if s.data[b] == nil {
			s.data[b] = map[string][]byte{}
		}
		for k, v := range kv {
			if v == nil {
				delete(s.data[b], k)
			} else {
				s.data[b][k] = v
			}
		}
	}
	return nil
}

// Close releases the store; later calls fail with store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// tx reads the base data through an overlay of its own writes; a nil value
// in the overlay is a deletion.
type tx struct {
	ctx      context.Context
	base     map[string]map[string][]byte
	overlay  map[string]map[string][]byte
	writable bool
	done     bool
}

var errTxDone = errors.New("memstore: transaction used after it ended")

func (t *tx) check(bucket string, key []byte, needKey bool) error {
	switch {
	case t.done:
		return errTxDone
	case t.ctx.Err() != nil:
		return t.ctx.Err()
	case bucket == "" || needKey && len(key) == 0:
		return store.ErrEmptyKey
	}
	return nil
}

func (t *tx) Get(bucket string, key []byte) ([]byte, error) {
	if err := t.check(bucket, key, true); err != nil {
		return nil, err
	}
	if v, ok := t.overlay[bucket][string(key)]; ok {
		if v == nil {
			return nil, store.ErrNotFound
		}
		return v, nil
	}
	if v, ok := t.base[bucket][string(key)]; ok {
		return v, nil
	}
	return nil, store.ErrNotFound
}

func (t *tx) Put(bucket string, key, value []byte) error {
	if err := t.check(bucket, key, true); err != nil {
		return err
	}
	if !t.writable {
		return store.ErrReadOnly
	}
	if t.overlay[bucket] == nil {
		t.overlay[bucket] = map[string][]byte{}
	}
	t.overlay[bucket][string(key)] = append([]byte{}, value...) // a copy, never nil
	return nil
}

func (t *tx) Delete(bucket string, key []byte) error {
	if err := t.check(bucket, key, true); err != nil {
		return err
	}
	if !t.writable {
		return store.ErrReadOnly
	}
	if t.overlay[bucket] == nil {
		t.overlay[bucket] = map[string][]byte{}
	}
	t.overlay[bucket][string(key)] = nil
	return nil
}

func (t *tx) Scan(bucket string, prefix []byte, reverse bool, fn func(key, value []byte) error) error {
	if err := t.check(bucket, nil, false); err != nil {
		return err
	}
	var keys []string
	for k := range t.base[bucket] {
		if _, shadowed := t.overlay[bucket][k]; !shadowed && bytes.HasPrefix([]byte(k), prefix) {
			keys = append(keys, k)
		}
	}
	for k, v := range t.overlay[bucket] {
		if v != nil && bytes.HasPrefix([]byte(k), prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if reverse {
		for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
	}
	for _, k := range keys {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		v, err := t.Get(bucket, []byte(k))
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted by fn during the scan
		}
		if err != nil {
			return err
		}
		if err := fn([]byte(k), v); err != nil {
			if errors.Is(err, store.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (t *tx) Writable() bool { return t.writable }
