package receipts_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// A change and the receipt that attests it commit in one transaction.
func ExampleAppend() {
	dir, err := os.MkdirTemp("", "crux-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	signer, err := receipts.LoadOrCreateKey(dir) // dir/signing.key, kept across restarts
	if err != nil {
		panic(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
	if err != nil {
		panic(err)
	}
	defer db.Close()

	var r *receipts.Receipt
	err = db.Update(context.Background(), func(tx store.Tx) error {
		// ... the change itself, e.g. store.DeleteFact(tx, ...), goes here.
		var err error
		r, err = receipts.Append(tx, signer, "acme", "forget", "agent-7",
			map[string]any{"fact_id": "f_1", "reason": "user request"}, time.Now())
		return err
	})
	if err != nil {
		panic(err)
	}

	var payload struct {
		FactID string `cbor:"fact_id"`
	}
	if err := r.Payload(&payload); err != nil {
		panic(err)
	}
	rep := receipts.Verify(r, receipts.NewKeyring(signer.Public()), time.Now())
	fmt.Println(r.Kind, r.Seq, payload.FactID, rep.ErrorCode)
	// Output: forget 1 f_1 OK
}

// Verifying offline needs only the public keyring and the exported receipt.
func ExampleVerify() {
	// On the crux side: mint a receipt, export it and the keyring.
	dir, err := os.MkdirTemp("", "crux-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err)
	}
	signer := receipts.NewEd25519Signer(priv)
	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	var r *receipts.Receipt
	err = db.Update(context.Background(), func(tx store.Tx) error {
		r, err = receipts.Append(tx, signer, "acme", "decision", "agent-7", map[string]string{"choice": "ship"}, time.Now())
		return err
	})
	if err != nil {
		panic(err)
	}
	keyringJSON, _ := json.Marshal(receipts.NewKeyring(signer.Public()))
	receiptJSON, _ := json.Marshal(receipts.Export(r))

	// On the auditor's side, with nothing but the two files.
	kr, err := receipts.ParseKeyring(keyringJSON)
	if err != nil {
		panic(err)
	}
	var e receipts.Exported
	if err := json.Unmarshal(receiptJSON, &e); err != nil {
		panic(err)
	}
	got, err := e.Receipt()
	if err != nil {
		panic(err)
	}
	rep := receipts.Verify(got, kr, time.Now())
	fmt.Println(rep.ErrorCode, rep.SignatureValid)

	got.Body[len(got.Body)-2] ^= 1 // one bit of the payload
	rep = receipts.Verify(got, kr, time.Now())
	fmt.Println(rep.ErrorCode, rep.SignatureValid)
	// Output:
	// OK true
	// BODY_HASH_MISMATCH false
}
