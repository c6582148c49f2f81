package storetest

import (
	"context"
	"errors"

	"github.com/crux-go/crux/store"
)

// Twice wraps a backend so that every Update runs its fn twice: first in
// a transaction that is then rolled back, as a backend does when a group
// commit or a serialization failure makes it run fn again, then in one that
// commits. A caller whose fn has an effect outside the transaction (a
// captured slice it appends to and never resets, a counter it bumps) is
// found out by comparing what it did through Twice with what it does
// alone. A first run that fails is not run again: its error is returned.
func Twice(b store.Backend) store.Backend { return twice{b} }

type twice struct{ store.Backend }

// errAgain rolls the first run back.
var errAgain = errors.New("storetest: run again")

func (t twice) Update(ctx context.Context, fn func(store.Tx) error) error {
	err := t.Backend.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errAgain
	})
	if !errors.Is(err, errAgain) {
		return err
	}
	return t.Backend.Update(ctx, fn)
}
