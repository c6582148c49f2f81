package tools_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/c2pa"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// attestRig is a server with output_attest on, its CA, content root,
// store and clock.
type attestRig struct {
	srv  *crux.Server
	ca   *c2pa.CA
	root string
	db   *bolt.DB
	now  time.Time
}

func newAttestRig(t *testing.T, mutate func(*crux.Flags, *crux.Options)) *attestRig {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ca, err := c2pa.NewCA(start)
	require.NoError(t, err)
	flags := crux.DefaultFlags()
	flags.C2PAOutput = true
	r := &attestRig{ca: ca, root: t.TempDir(), db: db, now: start}
	opts := &crux.Options{Flags: &flags, Now: func() time.Time { return r.now }, Signer: newSigner(t),
		AttestCA: ca, AttestRoot: r.root}
	if mutate != nil {
		mutate(&flags, opts)
	}
	r.srv, err = crux.NewServer(db, opts)
	require.NoError(t, err)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

// decision mints a receipt for c and returns its id.
func (r *attestRig) decision(t *testing.T, c crux.Caller) string {
	t.Helper()
	return call(t, r.srv, c, "record_decision", `{"action":"ship","rationale":"ready"}`)["receipt_id"].(string)
}

func (r *attestRig) manifest(t *testing.T, out map[string]any) (map[string]any, []byte) {
	t.Helper()
	m, ok := out["manifest"].(map[string]any)
	require.True(t, ok, "no manifest in %v", out)
	b, err := base64.StdEncoding.DecodeString(m["manifest_jumbf_base64"].(string))
	require.NoError(t, err)
	return m, b
}

func (r *attestRig) verify(t *testing.T, store, asset []byte) c2pa.Report {
	t.Helper()
	rep, err := c2pa.Verify(store, bytes.NewReader(asset), c2pa.VerifyOptions{Roots: r.ca.Roots(), Now: r.now})
	require.NoError(t, err)
	return rep
}

func inline(receipt string, content []byte, extra string) string {
	return fmt.Sprintf(`{"receipt_id":%q,"content_bytes_base64":%q%s}`, receipt, base64.StdEncoding.EncodeToString(content), extra)
}

func TestOutputAttestFlagOff(t *testing.T) {
	srv, _, db := newTestServer(t)
	require.False(t, srv.Flags().C2PAOutput, "off by default")
	before := receiptCount(t, db)
	got := call(t, srv, alice, "output_attest", `{"receipt_id":"r_x","content_bytes_base64":"aGk="}`)
	assert.Equal(t, false, got["feature_enabled"])
	assert.Equal(t, "CORECRUXD_FEATURE_C2PA_OUTPUT", got["feature_flag"])
	assert.Nil(t, got["manifest"])
	assert.Equal(t, before, receiptCount(t, db))
}

func TestOutputAttestInline(t *testing.T) {
	r := newAttestRig(t, nil)
	crownID := r.decision(t, alice)
	content := []byte("The answer is 42.\n")
	out := call(t, r.srv, alice, "output_attest", inline(crownID, content, `,"content_type":"text/plain","claim_generator":"agent-x/2.1"`))
	assert.Equal(t, true, out["feature_enabled"])
	m, store := r.manifest(t, out)

	rep := r.verify(t, store, content)
	require.True(t, rep.OK, "%+v", rep.Failures)
	assert.Equal(t, m["manifest_id"], rep.ManifestLabel)
	assert.Equal(t, &c2pa.Generator{Name: "agent-x", Version: "2.1"}, rep.ClaimGenerator)
	assert.Equal(t, c2pa.SourceTrainedAlgorithmic, rep.DigitalSourceType)
	crown := getReceipt(t, r.db, crownID)
	crownHash := blake3.Sum256(crown.Body)
	require.NotNil(t, rep.Receipt)
	assert.Equal(t, crownID, rep.Receipt.ReceiptID)
	assert.Equal(t, hex.EncodeToString(crownHash[:]), rep.Receipt.ReceiptBodyBLAKE3)
	assert.Equal(t, "alice", rep.Receipt.SignerPassport)
	assert.Equal(t, "text/plain", rep.Receipt.ContentType)
	assert.Equal(t, r.srv.Keyring().Len(), 1)
	assert.Equal(t, rep.Signer.KeyID, m["signer_key_id"])
	_, known := r.srv.Keyring().Lookup(rep.Signer.KeyID)
	assert.True(t, known, "the certificate certifies the receipt key")

	contentB3 := blake3.Sum256(content)
	assert.Equal(t, hex.EncodeToString(contentB3[:]), m["content_hash_blake3_hex"])
	assert.Equal(t, rep.AssetHash, m["content_hash_sha256_hex"])
	assert.EqualValues(t, len(content), m["content_bytes"])
	assert.EqualValues(t, len(store), m["manifest_bytes"])
	assert.Equal(t, crownID, m["crown_receipt_id"])
	assert.Nil(t, m["verify_url"])
	assert.Contains(t, m, "verify_url")
	assert.Contains(t, m["verify_command"], "crux verify output")

	// The output_attest receipt records the manifest and verifies.
	att := getReceipt(t, r.db, out["attest_receipt_id"].(string))
	assert.Equal(t, "output_attest", att.Kind)
	assert.True(t, receipts.Verify(att, r.srv.Keyring(), r.now).OK())
	var p struct {
		ManifestID             string `cbor:"manifest_id"`
		ClaimSHA256            []byte `cbor:"claim_sha256"`
		ContentBLAKE3          []byte `cbor:"content_blake3"`
		CrownReceiptID         string `cbor:"crown_receipt_id"`
		CrownReceiptBodyBLAKE3 []byte `cbor:"crown_receipt_body_blake3"`
	}
	require.NoError(t, att.Payload(&p))
	assert.Equal(t, m["manifest_id"], p.ManifestID)
	assert.Equal(t, m["claim_sha256_hex"], hex.EncodeToString(p.ClaimSHA256))
	assert.Equal(t, contentB3[:], p.ContentBLAKE3)
	assert.Equal(t, crownID, p.CrownReceiptID)
	assert.Equal(t, crownHash[:], p.CrownReceiptBodyBLAKE3)

	// Other bytes do not pass for these.
	rep = r.verify(t, store, append(content, ' '))
	assert.Equal(t, c2pa.DataHashMismatch, rep.Code)
}

func TestOutputAttestDefaultCA(t *testing.T) {
	// Without Options.AttestCA the server makes a CA of its own; its
	// manifests are well formed but chain to no root the test knows.
	r := newAttestRig(t, func(_ *crux.Flags, o *crux.Options) { o.AttestCA = nil })
	out := call(t, r.srv, alice, "output_attest", inline(r.decision(t, alice), []byte("x"), ""))
	_, store := r.manifest(t, out)
	rep := r.verify(t, store, []byte("x"))
	assert.Equal(t, c2pa.CertUntrusted, rep.Code)
	assert.Len(t, rep.Failures, 1)
	// The same CA signs the next manifest.
	out2 := call(t, r.srv, alice, "output_attest", inline(r.decision(t, alice), []byte("y"), ""))
	assert.Equal(t, out["manifest"].(map[string]any)["certificate_sha256_hex"], out2["manifest"].(map[string]any)["certificate_sha256_hex"])
}

func TestOutputAttestArguments(t *testing.T) {
	r := newAttestRig(t, nil)
	crownID := r.decision(t, alice)
	bobsTenant := crux.Caller{Agent: "bob", Authenticated: true, Tenant: "other"}
	otherID := r.decision(t, bobsTenant)
	before := receiptCount(t, r.db)
	eight := base64.StdEncoding.EncodeToString([]byte("12345678"))
	for _, tc := range []struct {
		caller        crux.Caller
		args          string
		param, reason string
	}{
		{alice, `{"receipt_id":"` + crownID + `"}`, "content_bytes_base64", "one of content_bytes_base64 or content_path is required"},
		{alice, `{"receipt_id":"` + crownID + `","content_bytes_base64":"aGk=","content_path":"a"}`, "content_path", "give content_bytes_base64 or content_path, not both"},
		{alice, `{"receipt_id":"` + crownID + `","content_bytes_base64":"a"}`, "content_bytes_base64", "not valid standard base64: illegal base64 data at input byte 0"},
		{alice, `{"receipt_id":"r_nope","content_bytes_base64":"aGk="}`, "receipt_id", "no receipt r_nope in tenant default"},
		{alice, `{"receipt_id":"` + otherID + `","content_bytes_base64":"aGk="}`, "receipt_id", "no receipt " + otherID + " in tenant default"},
		{alice, `{"receipt_id":"` + crownID + `","content_bytes_base64":"` + eight + `","token_budget":1}`, "token_budget", "content size 8 bytes (~2 tokens) exceeds token_budget 1"},
		{alice, `{"receipt_id":"` + crownID + `","content_bytes_base64":"aGk=","claim_generator":"/1"}`, "claim_generator", `must be "name" or "name/version" with a non-empty name`},
		{alice, `{"receipt_id":"` + crownID + `","content_bytes_base64":"aGk=","content_type":"a\u0007"}`, "content_type", "must not contain control characters"},
		{alice, `{"receipt_id":"` + crownID + `","content_path":"x"}`, "content_path", "no file x under the content root"},
	} {
		e := callErr(t, r.srv, tc.caller, "output_attest", tc.args)
		assertInvalidParam(t, e, "output_attest", tc.param, tc.reason)
	}
	assertNeedsIdentity(t, r.srv, "output_attest", inline(crownID, []byte("x"), ""))
	assert.Equal(t, before, receiptCount(t, r.db), "nothing minted")

	// At the budget: accepted.
	out := call(t, r.srv, alice, "output_attest", `{"receipt_id":"`+crownID+`","content_bytes_base64":"`+eight+`","token_budget":2}`)
	assert.EqualValues(t, 8, out["manifest"].(map[string]any)["content_bytes"])
}

func TestOutputAttestReceiptMustVerify(t *testing.T) {
	r := newAttestRig(t, nil)
	crownID := r.decision(t, alice)
	// A server with another key over the same store cannot vouch for it.
	other, err := crux.NewServer(r.db, &crux.Options{Flags: ptr(r.srv.Flags()), Now: func() time.Time { return r.now }, Signer: newSigner(t)})
	require.NoError(t, err)
	defer other.Close()
	e := callErr(t, other, alice, "output_attest", inline(crownID, []byte("x"), ""))
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "does not verify (KEY_NOT_FOUND")
}

func ptr[T any](v T) *T { return &v }

func TestOutputAttestSignerSettings(t *testing.T) {
	for _, set := range []func(*crux.Flags){
		func(f *crux.Flags) { f.C2PAX509Signer = true },
		func(f *crux.Flags) { f.C2PASignerBackend = "vault-pki-p256" },
		func(f *crux.Flags) { f.C2PAKeyID = "k1" },
		func(f *crux.Flags) { f.C2PASigningKeyB64 = "c2VjcmV0" },
	} {
		r := newAttestRig(t, func(f *crux.Flags, _ *crux.Options) { set(f) })
		crownID := r.decision(t, alice)
		before := receiptCount(t, r.db)
		msg := toolError(t, r.srv, alice, "output_attest", inline(crownID, []byte("x"), ""))
		assert.Contains(t, msg, "signed nothing")
		assert.NotContains(t, msg, "c2VjcmV0", "the key is never echoed")
		assert.Equal(t, before, receiptCount(t, r.db))
	}
}

func TestOutputAttestContentPath(t *testing.T) {
	r := newAttestRig(t, nil)
	crownID := r.decision(t, alice)
	write := func(rel string, b []byte) {
		p := filepath.Join(r.root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, b, 0o600))
	}
	content := bytes.Repeat([]byte("generated report line\n"), 1000)
	write("out/report.txt", content)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(r.root, "escape")))
	require.NoError(t, os.Symlink("out/report.txt", filepath.Join(r.root, "inside")))
	// os.Root treats every absolute symlink as leading out.
	require.NoError(t, os.Symlink(filepath.Join(r.root, "out", "report.txt"), filepath.Join(r.root, "absolute")))
	require.NoError(t, os.Symlink("../..", filepath.Join(r.root, "out", "up")))

	for _, p := range []string{"out/report.txt", filepath.Join(r.root, "out", "report.txt"), "inside", "./out//report.txt"} {
		out := call(t, r.srv, alice, "output_attest", fmt.Sprintf(`{"receipt_id":%q,"content_path":%q}`, crownID, p))
		m, store := r.manifest(t, out)
		assert.EqualValues(t, len(content), m["content_bytes"], p)
		assert.True(t, r.verify(t, store, content).OK, p)
	}
	for p, reason := range map[string]string{
		"../x":                      `must not contain a ".." component`,
		"out/../out/report.txt":     `must not contain a ".." component`,
		filepath.Join(outside, "s"): "is outside the content root",
		r.root:                      "names the content root itself, not a file",
		"out":                       "out is not a regular file (mode drwx------)",
	} {
		e := callErr(t, r.srv, alice, "output_attest", fmt.Sprintf(`{"receipt_id":%q,"content_path":%q}`, crownID, p))
		assertInvalidParam(t, e, "output_attest", "content_path", reason)
	}
	for _, p := range []string{"escape", "out/up/etc/passwd", "absolute"} {
		e := callErr(t, r.srv, alice, "output_attest", fmt.Sprintf(`{"receipt_id":%q,"content_path":%q}`, crownID, p))
		assert.Equal(t, crux.CodeInvalidParams, e.Code, p)
		assert.Contains(t, e.Message, "escapes", p)
	}
	// The budget is applied to the file's size before it is read.
	e := callErr(t, r.srv, alice, "output_attest", fmt.Sprintf(`{"receipt_id":%q,"content_path":"out/report.txt","token_budget":10}`, crownID))
	assertInvalidParam(t, e, "output_attest", "token_budget", "content size 22000 bytes (~5500 tokens) exceeds token_budget 10")

	// Without a content root, no file is read.
	nr := newAttestRig(t, func(_ *crux.Flags, o *crux.Options) { o.AttestRoot = "" })
	e = callErr(t, nr.srv, alice, "output_attest", fmt.Sprintf(`{"receipt_id":%q,"content_path":"out/report.txt"}`, nr.decision(t, alice)))
	assert.Contains(t, e.Message, "no content root")
}

func TestOutputAttestConcurrent(t *testing.T) {
	r := newAttestRig(t, nil)
	crownID := r.decision(t, alice)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			res, err := r.srv.CallTool(context.Background(), alice, "output_attest", []byte(inline(crownID, []byte{byte(i)}, "")))
			if assert.NoError(t, err) {
				ids[i] = structured(t, res)["attest_receipt_id"].(string)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range ids {
		assert.False(t, seen[id])
		seen[id] = true
	}
	require.NoError(t, r.db.View(context.Background(), func(tx store.Tx) error {
		return receipts.VerifyStoredChain(tx, tenant)
	}))
}

// BenchmarkOutputAttest1MB is one output_attest call over a 1 MiB file
// under the content root: read and hashed (SHA-256 and BLAKE3), the bound
// receipt read and verified, the manifest signed, the output_attest
// receipt committed (bbolt, no fsync).
func BenchmarkOutputAttest1MB(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(b, err)
	defer db.Close()
	ca, err := c2pa.NewCA(time.Now())
	require.NoError(b, err)
	root := b.TempDir()
	asset := make([]byte, 1<<20)
	for i := range asset {
		asset[i] = byte(i * 7)
	}
	require.NoError(b, os.WriteFile(filepath.Join(root, "asset.bin"), asset, 0o600))
	flags := crux.DefaultFlags()
	flags.C2PAOutput = true
	srv, err := crux.NewServer(db, &crux.Options{Flags: &flags, Signer: newSigner(b), AttestCA: ca, AttestRoot: root})
	require.NoError(b, err)
	defer srv.Close()
	crown := call(b, srv, alice, "record_decision", `{"action":"a","rationale":"r"}`)["receipt_id"].(string)
	args := []byte(fmt.Sprintf(`{"receipt_id":%q,"content_path":"asset.bin"}`, crown))
	b.SetBytes(int64(len(asset)))
	b.ResetTimer()
	for b.Loop() {
		res, err := srv.CallTool(context.Background(), alice, "output_attest", args)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
