package receipts_test

import (
	"context"
	"testing"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

var benchPayload = forgetPayload{Reason: "user request", Facts: []string{"f_0123456789abcdef0123456789abcdef", "f_fedcba9876543210fedcba9876543210"}}

// BenchmarkAppend: one Update per receipt, on a bbolt store without fsync.
func BenchmarkAppend(b *testing.B) {
	db := openDB(b)
	s := signerFromByte(1)
	b.ReportAllocs()
	for b.Loop() {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			_, err := receipts.Append(tx, s, "acme", "forget", "agent-7", benchPayload, testNow)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendParallel: concurrent writers to one tenant, coalesced by
// the bbolt backend's group commit.
func BenchmarkAppendParallel(b *testing.B) {
	db := openDB(b)
	s := signerFromByte(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			err := db.Update(context.Background(), func(tx store.Tx) error {
				_, err := receipts.Append(tx, s, "acme", "forget", "agent-7", benchPayload, testNow)
				return err
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkVerify: full verification of one receipt.
func BenchmarkVerify(b *testing.B) {
	db := openDB(b)
	s := signerFromByte(1)
	kr := receipts.NewKeyring(s.Public())
	r := appendOne(b, db, s, "acme", "forget", benchPayload)
	b.ReportAllocs()
	for b.Loop() {
		if rep := receipts.Verify(r, kr, testNow); !rep.OK() {
			b.Fatal(rep.ErrorMessage)
		}
	}
}

// BenchmarkVerifyStoredChain: links of a 1000-receipt chain, per receipt.
func BenchmarkVerifyStoredChain(b *testing.B) {
	db := openDB(b)
	s := signerFromByte(1)
	const n = 1000
	for i := 0; i < n; i += 100 {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			for range 100 {
				if _, err := receipts.Append(tx, s, "acme", "forget", "", benchPayload, testNow); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		err := db.View(context.Background(), func(tx store.Tx) error { return receipts.VerifyStoredChain(tx, "acme") })
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/receipt")
}
