package receipts_test

import (
	"context"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// A receipt whose body holds text that is not valid UTF-8 could never
// verify (its header does not decode), so Append refuses to mint it.
func TestAppendRefusesInvalidUTF8(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	tests := []struct {
		name                string
		tenant, kind, actor string
		payload             any
		field               string
	}{
		{"actor", "t", "refusal", "bad\xff", nil, "actor"},
		{"tenant", "t\xc3", "refusal", "a", nil, "tenant_id"},
		{"kind", "t", "re\xfffusal", "a", nil, "kind"},
		{"payload string", "t", "forget", "a", forgetPayload{Reason: "x\xed\xa0\x80"}, "payload"},
		{"payload map key", "t", "forget", "a", map[string]int{"k\xff": 1}, "payload"},
		{"pre-encoded payload", "t", "forget", "a", cbor.RawMessage{0x63, 'a', 0xff, 'b'}, "payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.Update(context.Background(), func(tx store.Tx) error {
				_, err := receipts.Append(tx, s, tt.tenant, tt.kind, tt.actor, tt.payload, testNow)
				return err
			})
			require.ErrorIs(t, err, store.ErrInvalidUTF8)
			var te *store.TextError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.field, te.Field)
		})
	}
	assert.Empty(t, chainOf(t, db, "t", 0), "nothing was minted")

	// Valid text of every kind mints a receipt that verifies.
	r := appendOne(t, db, s, "t", "forget", forgetPayload{Reason: "naïve ☃ \U0001F600", Facts: []string{"\uFFFD"}})
	rep := receipts.Verify(r, receipts.NewKeyring(s.Public()), testNow)
	assert.Equal(t, receipts.OK, rep.ErrorCode, rep.ErrorMessage)
}
