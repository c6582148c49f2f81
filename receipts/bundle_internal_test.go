package receipts

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repack rewrites the members of a bundle, after edit, and seals the
// result with s: what a holder of the key could produce. names gives the
// order of the members written.
func repack(t *testing.T, data []byte, s Signer, edit func(m map[string][]byte) []string) []byte {
	t.Helper()
	members, code, msg := readBundle(data[:len(data)-sealLen])
	require.Equal(t, OK, code, msg)
	names := edit(members)
	var file bytes.Buffer
	zw, err := zstd.NewWriter(&file)
	require.NoError(t, err)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(members[n]))}))
		_, err := tw.Write(members[n])
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	seal, err := sealFor(file.Bytes(), s)
	require.NoError(t, err)
	return append(file.Bytes(), seal...)
}

// editManifest changes manifest.json's fields with f.
func editManifest(t *testing.T, f func(m map[string]any)) func(map[string][]byte) []string {
	return func(members map[string][]byte) []string {
		var m map[string]any
		require.NoError(t, json.Unmarshal(members[BundleManifestMember], &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		members[BundleManifestMember] = b
		return []string{BundleManifestMember, BundleEventsMember, BundleReceiptsMember}
	}
}

func TestBundleCodesBehindTheSeal(t *testing.T) {
	s := NewEd25519Signer(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, ed25519.SeedSize)))
	b := &Bundle{
		Manifest: BundleManifest{BundleID: "bundle-x", GeneratedAt: "2026-03-01T12:00:00Z", Scope: BundleScope{TenantID: "t"},
			Chain: BundleChain{TenantID: "t"}},
		Events: []BundleEvent{{FactID: "f_1", Entity: "e", Key: "k", Value: "v", StoredAt: "2026-03-01T12:00:00Z", Version: 1}},
	}
	var buf bytes.Buffer
	_, err := WriteBundle(&buf, b, s)
	require.NoError(t, err)
	data := buf.Bytes()
	now := time.Now()
	require.True(t, VerifyBundle(data, nil, now).OK())
	all := []string{BundleManifestMember, BundleEventsMember, BundleReceiptsMember}

	tests := []struct {
		name string
		edit func(map[string][]byte) []string
		want Code
	}{
		{"same content", func(map[string][]byte) []string { return all }, OK},
		{"member missing", func(map[string][]byte) []string { return all[:2] }, BundleMemberMissing},
		{"member twice", func(map[string][]byte) []string { return append(all, BundleEventsMember) }, BundleMemberMissing},
		{"unknown members are ignored", func(m map[string][]byte) []string {
			m["notes.txt"] = []byte("hello")
			return append(all, "notes.txt")
		}, OK},
		{"manifest not JSON", func(m map[string][]byte) []string { m[BundleManifestMember] = []byte("{"); return all }, BundleManifestInvalid},
		{"manifest unknown field", editManifest(t, func(m map[string]any) { m["extra"] = 1 }), BundleManifestInvalid},
		{"version 2", editManifest(t, func(m map[string]any) { m["bundle_format_version"] = 2 }), BundleVersionUnsupported},
		{"no key class", editManifest(t, func(m map[string]any) { m["key_class"] = "" }), BundleKeyClassMissing},
		{"bad key", editManifest(t, func(m map[string]any) { m["signer_public_key_b64"] = "AAAA" }), PubkeyInvalid},
		{"field changed", editManifest(t, func(m map[string]any) { m["bundle_id"] = "bundle-y" }), SigInvalid},
		{"events changed", func(m map[string][]byte) []string {
			m[BundleEventsMember] = bytes.Replace(m[BundleEventsMember], []byte(`"v"`), []byte(`"w"`), 1)
			return all
		}, BundleEventsHashMismatch},
		{"receipts changed", func(m map[string][]byte) []string { m[BundleReceiptsMember] = []byte{0x9f, 0xff}; return all }, BundleReceiptsHashMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := VerifyBundle(repack(t, data, s, tt.edit), nil, now)
			assert.Equal(t, tt.want, rep.ErrorCode, rep.ErrorMessage)
		})
	}

	// A seal by another key than the manifest's.
	other := NewEd25519Signer(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{6}, ed25519.SeedSize)))
	assert.Equal(t, BundleSealInvalid, VerifyBundle(repack(t, data, other, func(map[string][]byte) []string { return all }), nil, now).ErrorCode)
}
