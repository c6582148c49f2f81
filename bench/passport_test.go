package bench

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/receipttest"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/tools"
)

// BenchmarkGetPassport is get_passport in a tenant holding 100,000
// receipts, 2,000 of them the caller's, spread over the 40 days that
// credit them: the tier comes from the caller's standing, read from one
// record, so the answer costs the same whatever the tenant holds.
func BenchmarkGetPassport(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	srv, err := crux.NewServer(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	mustCall(b, srv, "issue_passport", []byte(`{}`))
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	signer := receipts.NewEd25519Signer(priv)
	now := time.Now()
	if err := db.Update(context.Background(), func(tx store.Tx) error {
		return receipttest.Earn(tx, signer, crux.DefaultTenant, caller.Agent, 2_000, now)
	}); err != nil {
		b.Fatal(err)
	}
	for range 49 {
		if err := db.Update(context.Background(), func(tx store.Tx) error {
			for i := range 2_000 {
				if _, err := receipts.Append(tx, signer, crux.DefaultTenant, "decision", "someone-else", map[string]int{"i": i}, now); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	res := mustCall(b, srv, "get_passport", []byte(`{}`))
	out, err := crux.Decode[tools.GetPassportOutput](res)
	if err != nil {
		b.Fatal(err)
	}
	if out.ReputationTier != "elite" {
		b.Fatalf("tier %v, want elite (2,000 receipts)", out.ReputationTier)
	}
	var lat []time.Duration
	for b.Loop() {
		t := time.Now()
		mustCall(b, srv, "get_passport", []byte(`{}`))
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
