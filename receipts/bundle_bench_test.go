package receipts_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// benchChain fills a store with n receipts of tenant acme, in one
// transaction.
func benchChain(b *testing.B, n int) store.Backend {
	b.Helper()
	db := openDB(b)
	s := signerFromByte(1)
	if err := db.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			if _, err := receipts.Append(tx, s, "acme", "forget", "agent-7", benchPayload, testNow.Add(time.Duration(i)*time.Millisecond)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkBundle10kReceipts: reading a chain of 10,000 receipts and writing
// them as one sealed, signed bundle (zstd level 3) in memory; bytes/bundle is
// the file's size.
//
//	go test -run '^$' -bench 'Bundle10k' -count 5 ./receipts
func BenchmarkBundle10kReceipts(b *testing.B) {
	db := benchChain(b, 10000)
	s := signerFromByte(1)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		var w *receipts.Window
		if err := db.View(context.Background(), func(tx store.Tx) error {
			var err error
			w, err = receipts.ChainWindow(tx, "acme", time.Time{}, testNow.Add(time.Hour), 10000)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if len(w.Receipts) != 10000 {
			b.Fatalf("%d receipts", len(w.Receipts))
		}
		var buf bytes.Buffer
		if _, err := receipts.WriteBundle(&buf, &receipts.Bundle{Receipts: w.Receipts, Manifest: receipts.BundleManifest{
			BundleID: "bundle-bench", GeneratedAt: testNow.Format(time.RFC3339Nano), Chain: w.Anchor("acme"),
			Scope: receipts.BundleScope{TenantID: "acme"}}}, s); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "bytes/bundle")
}

// BenchmarkVerifyBundle10kReceipts: crux verify bundle's work on that
// bundle: the seal, the manifest signature, and every receipt and link.
func BenchmarkVerifyBundle10kReceipts(b *testing.B) {
	db := benchChain(b, 10000)
	s := signerFromByte(1)
	var w *receipts.Window
	if err := db.View(context.Background(), func(tx store.Tx) error {
		var err error
		w, err = receipts.ChainWindow(tx, "acme", time.Time{}, testNow.Add(time.Hour), 10000)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := receipts.WriteBundle(&buf, &receipts.Bundle{Receipts: w.Receipts, Manifest: receipts.BundleManifest{
		BundleID: "bundle-bench", GeneratedAt: testNow.Format(time.RFC3339Nano), Chain: w.Anchor("acme"),
		Scope: receipts.BundleScope{TenantID: "acme"}}}, s); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	for b.Loop() {
		if rep := receipts.VerifyBundle(data, nil, testNow); !rep.OK() {
			b.Fatal(rep.ErrorCode, rep.ErrorMessage)
		}
	}
}
