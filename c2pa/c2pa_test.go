package c2pa

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/receipts"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	signer *receipts.Ed25519Signer
	ca     *CA
	asset  []byte
	m      *Manifest
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	f := &fixture{signer: receipts.NewEd25519Signer(priv), asset: []byte("An agent's answer, to be attested.\n")}
	f.ca, err = NewCA(t0)
	require.NoError(t, err)
	f.m = f.sign(t, f.signer.KeyID())
	return f
}

func (f *fixture) sign(t testing.TB, keyID string) *Manifest {
	t.Helper()
	chain, err := f.ca.Chain(f.signer.Public(), t0)
	require.NoError(t, err)
	sum := sha256.Sum256(f.asset)
	b3 := blake3.Sum256(f.asset)
	m, err := Sign(f.signer, chain, Request{AssetSHA256: sum[:], Title: "answer.txt", Receipt: &ReceiptBinding{
		ReceiptID: "r_0123", ReceiptBodyBLAKE3: bytes.Repeat([]byte{7}, 32), KeyID: keyID,
		SignerPassport: "agent-a", ContentBLAKE3: b3[:], ContentType: "text/plain", CreatedAt: t0.Format(time.RFC3339),
	}})
	require.NoError(t, err)
	return m
}

func (f *fixture) verify(t testing.TB, store, asset []byte, roots *x509.CertPool, now time.Time) Report {
	t.Helper()
	rep, err := Verify(store, bytes.NewReader(asset), VerifyOptions{Roots: roots, Now: now})
	require.NoError(t, err)
	return rep
}

func TestSignVerify(t *testing.T) {
	f := newFixture(t)
	rep := f.verify(t, f.m.Store, f.asset, f.ca.Roots(), t0.Add(time.Hour))
	require.True(t, rep.OK, "%+v", rep.Failures)
	require.Equal(t, OK, rep.Code)
	require.Equal(t, f.m.Label, rep.ManifestLabel)
	require.Regexp(t, `^urn:c2pa:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, rep.ManifestLabel)
	require.Equal(t, "EdDSA", rep.Alg)
	require.Equal(t, SourceTrainedAlgorithmic, rep.DigitalSourceType)
	require.Equal(t, f.signer.KeyID(), rep.Signer.KeyID)
	require.Equal(t, 2, rep.Signer.Chain)
	require.Equal(t, "r_0123", rep.Receipt.ReceiptID)
	require.Equal(t, "answer.txt", rep.Title)
	require.Equal(t, int64(len(f.asset)), rep.AssetBytes)
	for _, c := range []string{"claimSignature.validated", "assertion.hashedURI.match", "assertion.dataHash.match", "signingCredential.trusted"} {
		require.Contains(t, rep.Passed, c)
	}
}

// TestStructure decodes the store by hand and checks what validators
// require of it.
func TestStructure(t *testing.T) {
	f := newFixture(t)
	count := 0
	top, err := parseBoxes(f.m.Store, &count)
	require.NoError(t, err)
	require.Len(t, top, 1)
	store, err := parseSuperBox(top[0], 0, &count)
	require.NoError(t, err)
	require.Equal(t, typeStore, store.ctype)
	ms, err := store.children(&count)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, typeManifest, ms[0].ctype)
	parts, err := ms[0].children(&count)
	require.NoError(t, err)
	require.Len(t, parts, 3)
	require.Equal(t, []string{LabelAssertions, LabelClaim, LabelSignature}, []string{parts[0].label, parts[1].label, parts[2].label})

	as, err := parts[0].children(&count)
	require.NoError(t, err)
	labels := []string{}
	for _, a := range as {
		labels = append(labels, a.label)
		require.Equal(t, typeCBOR, a.ctype)
	}
	require.Equal(t, []string{LabelActions, LabelDataHash, LabelReceipt}, labels)

	var acts map[string][]map[string]any
	require.NoError(t, decodeAssertion(as[0], &acts))
	require.Equal(t, ActionCreated, acts["actions"][0]["action"])
	require.Equal(t, SourceTrainedAlgorithmic, acts["actions"][0]["digitalSourceType"])

	var dh map[string]any
	require.NoError(t, decodeAssertion(as[1], &dh))
	require.Equal(t, []any{}, dh["exclusions"], "an empty array, not null")
	require.Equal(t, []byte{}, dh["pad"], "pad is a byte string")
	sum := sha256.Sum256(f.asset)
	require.Equal(t, sum[:], dh["hash"])

	claimBytes, _ := parts[1].firstContent("cbor")
	var claim map[string]any
	require.NoError(t, cbor.Unmarshal(claimBytes, &claim))
	for _, v1 := range []string{"claim_generator", "dc:format", "assertions"} {
		require.NotContains(t, claim, v1)
	}
	require.IsType(t, map[any]any{}, claim["claim_generator_info"], "a single map in a v2 claim")
	require.Len(t, claim["created_assertions"], 3)
	sha := sha256.Sum256(claimBytes)
	require.Equal(t, sha[:], f.m.ClaimSHA256)

	sigBytes, _ := parts[2].firstContent("cbor")
	require.Equal(t, byte(0xd2), sigBytes[0], "CBOR tag 18")
	var tag cbor.Tag
	require.NoError(t, cbor.Unmarshal(sigBytes, &tag))
	arr := tag.Content.([]any)
	require.Len(t, arr, 4)
	require.Nil(t, arr[2], "detached payload")
	var ph map[int]any
	require.NoError(t, cbor.Unmarshal(arr[0].([]byte), &ph))
	require.EqualValues(t, -8, ph[1])
	chain := ph[33].([]any)
	require.Len(t, chain, 2)
	require.True(t, ed25519.Verify(f.signer.Public(), mustSigStructure(t, arr[0].([]byte), claimBytes), arr[3].([]byte)))
}

func mustSigStructure(t *testing.T, protected, payload []byte) []byte {
	b, err := sigStructure(protected, payload)
	require.NoError(t, err)
	return b
}

func TestTamperedAsset(t *testing.T) {
	f := newFixture(t)
	for name, asset := range map[string][]byte{
		"flipped": append([]byte{f.asset[0] ^ 1}, f.asset[1:]...),
		"longer":  append(bytes.Clone(f.asset), '!'),
		"shorter": f.asset[:len(f.asset)-1],
		"empty":   {},
	} {
		t.Run(name, func(t *testing.T) {
			rep := f.verify(t, f.m.Store, asset, f.ca.Roots(), t0)
			require.False(t, rep.OK)
			require.Equal(t, DataHashMismatch, rep.Code)
			require.Len(t, rep.Failures, 1, "only the binding fails: %+v", rep.Failures)
			require.Equal(t, "assertion.dataHash.mismatch", rep.Failures[0].C2PA)
		})
	}
}

// TestEveryByteFlip flips each byte of the store in two ways; every flip
// must fail verification, except clearing the "requestable" toggle of a
// description box that no hash covers, which changes nothing a verifier
// reads.
func TestEveryByteFlip(t *testing.T) {
	f := newFixture(t)
	harmless := map[int]bool{}
	for _, typ := range []string{typeStore, typeManifest, typeAssertion, typeClaim, typeSignature} {
		i := bytes.Index(f.m.Store, append([]byte(typ), uuidTail...))
		require.GreaterOrEqual(t, i, 0)
		harmless[i+16] = true
	}
	roots := f.ca.Roots()
	for i := range f.m.Store {
		for _, x := range []byte{0x01, 0x80} {
			b := bytes.Clone(f.m.Store)
			b[i] ^= x
			rep := f.verify(t, b, f.asset, roots, t0)
			if x == 0x01 && harmless[i] {
				require.True(t, rep.OK, "byte %d", i)
				continue
			}
			require.False(t, rep.OK, "byte %d ^ %#x went unnoticed", i, x)
		}
	}
}

func TestTrust(t *testing.T) {
	f := newFixture(t)
	other, err := NewCA(t0)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		roots *x509.CertPool
		now   time.Time
		code  Code
	}{
		"no roots":     {nil, t0, CertUntrusted},
		"another root": {other.Roots(), t0, CertUntrusted},
		"expired":      {f.ca.Roots(), t0.Add(leafLifetime + 2*time.Hour), CertExpired},
		"not yet":      {f.ca.Roots(), t0.Add(-2 * clockSkew), CertExpired},
	} {
		t.Run(name, func(t *testing.T) {
			rep := f.verify(t, f.m.Store, f.asset, tc.roots, tc.now)
			require.Equal(t, tc.code, rep.Code)
			require.Len(t, rep.Failures, 1, "everything but trust holds: %+v", rep.Failures)
			require.Contains(t, rep.Passed, "claimSignature.validated")
			require.Contains(t, rep.Passed, "assertion.dataHash.match")
		})
	}
}

func TestLeafProfile(t *testing.T) {
	f := newFixture(t)
	chain, err := f.ca.Chain(f.signer.Public(), t0)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(chain[0])
	require.NoError(t, err)
	require.False(t, leaf.IsCA)
	require.True(t, leaf.BasicConstraintsValid)
	require.Equal(t, x509.KeyUsageDigitalSignature, leaf.KeyUsage)
	require.Contains(t, leaf.ExtKeyUsage, x509.ExtKeyUsageEmailProtection)
	require.Len(t, leaf.UnknownExtKeyUsage, 1)
	require.True(t, leaf.UnknownExtKeyUsage[0].Equal(oidDocumentSigning))
	require.Equal(t, f.ca.Certificate().SubjectKeyId, leaf.AuthorityKeyId)
	require.NotEmpty(t, leaf.SubjectKeyId)
	require.Equal(t, x509.PureEd25519, leaf.SignatureAlgorithm)
	require.True(t, f.signer.Public().Equal(leaf.PublicKey))
	require.NoError(t, leaf.CheckSignatureFrom(f.ca.Certificate()))
	require.Equal(t, chain[1], f.ca.Certificate().Raw)

	again, err := f.ca.Chain(f.signer.Public(), t0.Add(24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, chain[0], again[0], "the leaf is reused")
	renewed, err := f.ca.Chain(f.signer.Public(), t0.Add(leafLifetime-leafRenewal+time.Hour))
	require.NoError(t, err)
	require.NotEqual(t, chain[0], renewed[0], "a leaf close to its end is replaced")
}

func TestSelfSignedLeafRejected(t *testing.T) {
	f := newFixture(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "self"},
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection},
		BasicConstraintsValid: true, SubjectKeyId: []byte{1}, AuthorityKeyId: []byte{1},
	}
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	s := receipts.NewEd25519Signer(priv)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, s.Public(), priv)
	require.NoError(t, err)
	sum := sha256.Sum256(f.asset)
	m, err := Sign(s, [][]byte{der}, Request{AssetSHA256: sum[:]})
	require.NoError(t, err)
	pool := x509.NewCertPool()
	c, _ := x509.ParseCertificate(der)
	pool.AddCert(c)
	rep := f.verify(t, m.Store, f.asset, pool, t0)
	require.Equal(t, CertInvalid, rep.Code)
	require.Contains(t, rep.Message, "self-signed")
}

func TestSignRejectsAnotherKeysChain(t *testing.T) {
	f := newFixture(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	chain, err := f.ca.Chain(priv.Public().(ed25519.PublicKey), t0)
	require.NoError(t, err)
	sum := sha256.Sum256(f.asset)
	_, err = Sign(f.signer, chain, Request{AssetSHA256: sum[:]})
	require.ErrorContains(t, err, "does not certify")
	_, err = Sign(f.signer, chain, Request{AssetSHA256: sum[:8]})
	require.ErrorContains(t, err, "asset hash")
}

func TestReceiptKeyMismatch(t *testing.T) {
	f := newFixture(t)
	m := f.sign(t, "p_00000000000000000000000000000000")
	rep := f.verify(t, m.Store, f.asset, f.ca.Roots(), t0)
	require.Equal(t, ReceiptKeyMismatch, rep.Code)
}

func TestMalformed(t *testing.T) {
	f := newFixture(t)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a manifest at all"),
		"truncated": f.m.Store[:len(f.m.Store)/2],
		"two":       append(bytes.Clone(f.m.Store), f.m.Store...),
		"zero len":  {0, 0, 0, 0, 'j', 'u', 'm', 'b'},
		"huge len":  {0xff, 0xff, 0xff, 0xff, 'j', 'u', 'm', 'b'},
		"ext len":   {0, 0, 0, 1, 'j', 'u', 'm', 'b', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		rep := f.verify(t, b, f.asset, f.ca.Roots(), t0)
		require.False(t, rep.OK, name)
		require.Equal(t, ManifestMalformed, rep.Code, name)
	}
}

func TestLoadOrCreateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var wg sync.WaitGroup
	cas := make([]*CA, 8)
	errs := make([]error, 8)
	for i := range cas {
		wg.Go(func() { cas[i], errs[i] = LoadOrCreateCA(dir, t0) })
	}
	wg.Wait()
	for i := range cas {
		require.NoError(t, errs[i])
		require.Equal(t, cas[0].Certificate().Raw, cas[i].Certificate().Raw, "racing creators agree")
	}
	for _, name := range []string{CAKeyFileName, CACertFileName} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}
	again, err := LoadOrCreateCA(dir, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, cas[0].Certificate().Raw, again.Certificate().Raw, "created once")
	require.True(t, again.Certificate().IsCA)

	// A leaf of the loaded CA verifies under the certificate on disk.
	pemBytes, err := os.ReadFile(filepath.Join(dir, CACertFileName))
	require.NoError(t, err)
	roots, err := ParseRoots(pemBytes)
	require.NoError(t, err)
	f := newFixture(t)
	f.ca = again
	m := f.sign(t, f.signer.KeyID())
	require.True(t, f.verify(t, m.Store, f.asset, roots, t0).OK)

	require.NoError(t, os.Chmod(filepath.Join(dir, CAKeyFileName), 0o644))
	_, err = LoadOrCreateCA(dir, t0)
	require.ErrorContains(t, err, "group or others")
	require.NoError(t, os.Chmod(filepath.Join(dir, CAKeyFileName), 0o600))

	require.NoError(t, os.WriteFile(filepath.Join(dir, CACertFileName), other(t), 0o600))
	_, err = LoadOrCreateCA(dir, t0)
	require.ErrorContains(t, err, "does not certify the CA key")

	_, err = LoadOrCreateCA(t.TempDir(), t0)
	require.NoError(t, err)
	_, err = LoadOrCreateCA(dir, t0.Add(caLifetime+time.Hour))
	require.Error(t, err)
}

// other returns the PEM certificate of an unrelated CA.
func other(t *testing.T) []byte {
	ca, err := NewCA(t0)
	require.NoError(t, err)
	return ca.CertificatePEM()
}

func TestParseRoots(t *testing.T) {
	_, err := ParseRoots([]byte("nothing"))
	require.Error(t, err)
	ca, _ := NewCA(t0)
	p, err := ParseRoots(append(ca.CertificatePEM(), other(t)...))
	require.NoError(t, err)
	require.NotNil(t, p)
}

func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	f.Add(fx.m.Store)
	f.Add([]byte{})
	roots := fx.ca.Roots()
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Verify(b, bytes.NewReader(fx.asset), VerifyOptions{Roots: roots, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK != (rep.Code == OK) || rep.OK != (len(rep.Failures) == 0) {
			t.Fatalf("inconsistent report %+v", rep)
		}
	})
}

func benchAsset() []byte {
	a := make([]byte, 1<<20)
	for i := range a {
		a[i] = byte(i * 7)
	}
	return a
}

// BenchmarkSign1MB hashes a 1 MiB asset and signs its manifest.
func BenchmarkSign1MB(b *testing.B) {
	f := newFixture(b)
	asset := benchAsset()
	chain, err := f.ca.Chain(f.signer.Public(), time.Now())
	require.NoError(b, err)
	b.SetBytes(int64(len(asset)))
	for b.Loop() {
		sum := sha256.Sum256(asset)
		if _, err := Sign(f.signer, chain, Request{AssetSHA256: sum[:]}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify1MB verifies a manifest over a 1 MiB asset.
func BenchmarkVerify1MB(b *testing.B) {
	f := newFixture(b)
	f.asset = benchAsset()
	m := f.sign(b, f.signer.KeyID())
	roots := f.ca.Roots()
	b.SetBytes(int64(len(f.asset)))
	for b.Loop() {
		rep, err := Verify(m.Store, bytes.NewReader(f.asset), VerifyOptions{Roots: roots, Now: t0})
		if err != nil || !rep.OK {
			b.Fatal(err, rep.Failures)
		}
	}
}
