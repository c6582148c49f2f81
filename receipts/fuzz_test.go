package receipts_test

import (
	"testing"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/receipts"
)

// FuzzDecode feeds arbitrary body, hash and signature bytes, and arbitrary
// stored fields, to every decoder and to Verify. Nothing may panic; a valid
// signature means the body is one this target's setup minted (fuzz workers
// are separate processes, each minting its own, all with the same key);
// and Verify says OK only for such a body under its own id, tenant, kind
// and seq. The signature record is not itself signed, so it may vary.
func FuzzDecode(f *testing.F) {
	db := openDB(f)
	s := signerFromByte(1)
	kr := receipts.NewKeyring(s.Public())
	payload := forgetPayload{Reason: "r", Facts: []string{"f_1"}}
	good := appendOne(f, db, s, "acme", "forget", payload)

	// minted reports whether r's body is shaped like the one setup mints.
	minted := func(r *receipts.Receipt) bool {
		h, err := r.Header()
		if err != nil || h.TenantID != "acme" || h.Kind != "forget" || h.Seq != 1 || h.Actor != "agent-7" || !h.CreatedAt.Equal(testNow) {
			return false
		}
		var p forgetPayload
		return r.Payload(&p) == nil && p.Reason == payload.Reason && len(p.Facts) == 1 && p.Facts[0] == payload.Facts[0]
	}

	f.Add(good.Body, []byte(nil), good.Sig, good.ID, good.Tenant, good.Kind, good.Seq)
	f.Add(good.Body, good.PayloadHash, good.Sig, good.ID, "globex", good.Kind, good.Seq)
	f.Add(good.Body, good.PayloadHash, good.Sig, "r_x", good.Tenant, good.Kind, good.Seq)
	f.Add(good.Body[:len(good.Body)-1], []byte(nil), good.Sig, good.ID, good.Tenant, good.Kind, good.Seq)
	f.Add(good.Body, []byte(nil), good.Sig[:len(good.Sig)-3], good.ID, good.Tenant, good.Kind, good.Seq)
	f.Add([]byte{0xa1, 0x66, 's', 'c', 'h', 'e', 'm', 'a', 0xf6}, []byte(nil), []byte{0xa0}, "", "", "", uint64(0))
	f.Add([]byte("garbage"), []byte{1, 2, 3}, []byte("\xff\xff"), "r_1", "t", "k", uint64(1))
	f.Add([]byte{0x9f, 0x9f, 0x9f, 0xff, 0xff, 0xff}, []byte(nil), []byte{0xbf, 0xff}, "r_1", "t", "k", uint64(1))

	f.Fuzz(func(t *testing.T, body, hash, sig []byte, id, tenant, kind string, seq uint64) {
		if len(hash) == 0 {
			sum := blake3.Sum256(body)
			hash = sum[:]
		}
		r := &receipts.Receipt{ID: id, Tenant: tenant, Kind: kind, Seq: seq, Body: body, PayloadHash: hash, Sig: sig}

		_, _ = r.Header()
		_, _ = r.SigRecord()
		var v any
		_ = r.Payload(&v)
		_ = receipts.VerifyChain([]*receipts.Receipt{r, r})
		back, err := receipts.Export(r).Receipt()
		if err != nil {
			t.Fatalf("export round trip: %v", err)
		}

		for _, k := range []*receipts.Keyring{kr, nil} {
			rep := receipts.Verify(back, k, testNow)
			if rep.ErrorCode == "" {
				t.Fatal("empty error code")
			}
			if rep.SignatureValid && !minted(back) {
				t.Fatalf("signature valid over a body that was never signed: %+v", rep)
			}
			if !rep.OK() {
				continue
			}
			h, err := back.Header()
			if k == nil || !minted(back) || err != nil || h.ReceiptID != id || h.TenantID != tenant || h.Kind != kind || h.Seq != seq {
				t.Fatalf("Verify says OK for a receipt that is not genuine: %+v", rep)
			}
		}
	})
}
