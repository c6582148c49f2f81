package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// The store refuses to write a fact it could not read back: one holding
// text that is not valid UTF-8.
func TestPutFactRefusesInvalidUTF8(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ok := store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "e", Key: "k", Value: "v", Confidence: 1, Now: now}
	tests := []struct {
		name  string
		edit  func(*store.NewFact)
		field string
	}{
		{"agent", func(n *store.NewFact) { n.Agent = "bad\xff" }, "owner"},
		{"tenant", func(n *store.NewFact) { n.Tenant = "t\xc3" }, "tenant"},
		{"entity", func(n *store.NewFact) { n.Entity = "e\xed\xa0\x80" }, "entity"},
		{"key", func(n *store.NewFact) { n.Key = "\xfe" }, "key"},
		{"value", func(n *store.NewFact) { n.Value = "v\x80" }, "value"},
		{"source receipt", func(n *store.NewFact) { n.SourceReceipt = "r_\xff" }, "source_receipt"},
		{"horizon class", func(n *store.NewFact) { n.HorizonClass = "\xff" }, "horizon_class"},
		{"id", func(n *store.NewFact) { n.ID = "f_\xff" }, "id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ok
			tt.edit(&n)
			err := db.Update(context.Background(), func(tx store.Tx) error {
				_, _, err := store.PutFact(tx, n)
				return err
			})
			require.ErrorIs(t, err, store.ErrInvalidUTF8)
			var te *store.TextError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.field, te.Field)
		})
	}
	// Nothing was written: the bucket of facts is empty.
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return tx.Scan("facts", nil, false, func(k, _ []byte) error {
			t.Errorf("fact %q was written", k)
			return nil
		})
	}))
	putFact(t, db, ok) // and valid text is stored as ever
}

func TestCheckText(t *testing.T) {
	type inner struct {
		Names []string          `json:"names"`
		Tags  map[string]string `cbor:"tags"`
		Raw   []byte            `json:"raw"`
	}
	type outer struct {
		Title string `json:"title,omitempty"`
		In    *inner `json:"in"`
		Any   any
		hide  string
	}
	assert.NoError(t, store.CheckText("r", outer{Title: "☃", In: &inner{Names: []string{"a"}, Raw: []byte{0xff}}, hide: "\xff"}),
		"byte slices and unexported fields are not text")
	for want, v := range map[string]any{
		"title":          outer{Title: "\xff"},
		"in.names.1":     outer{In: &inner{Names: []string{"a", "\xff"}}},
		"in.tags.k":      outer{In: &inner{Tags: map[string]string{"k": "\xff"}}},
		`in.tags."\xff"`: outer{In: &inner{Tags: map[string]string{"\xff": "v"}}},
		"Any":            outer{Any: "\xff"},
		"the value":      "\xff",
	} {
		err := store.CheckText("rec", v)
		var te *store.TextError
		require.ErrorAs(t, err, &te, want)
		assert.Equal(t, want, te.Field)
		assert.Equal(t, "rec", te.Record)
		assert.ErrorIs(t, err, store.ErrInvalidUTF8)
	}
}
