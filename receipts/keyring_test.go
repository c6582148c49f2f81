package receipts_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/receipts"
)

func TestKeyringJSON(t *testing.T) {
	a, b := signerFromByte(1), signerFromByte(2)
	kr := receipts.NewKeyring(a.Public(), b.Public(), a.Public())
	assert.Equal(t, 2, kr.Len(), "adding a key twice is a no-op")

	out, err := json.Marshal(kr)
	require.NoError(t, err)
	want := `{"v":1,"keys":[` +
		`{"keyId":"` + a.KeyID() + `","pubKeyBase64":"` + base64.StdEncoding.EncodeToString(a.Public()) + `"},` +
		`{"keyId":"` + b.KeyID() + `","pubKeyBase64":"` + base64.StdEncoding.EncodeToString(b.Public()) + `"}]}`
	assert.JSONEq(t, want, string(out))

	back, err := receipts.ParseKeyring(out)
	require.NoError(t, err)
	for _, s := range []*receipts.Ed25519Signer{a, b} {
		pub, ok := back.Lookup(s.KeyID())
		require.True(t, ok)
		assert.Equal(t, s.Public(), pub)
	}
	_, ok := back.Lookup("p_missing")
	assert.False(t, ok)

	// Keyring also implements json.Unmarshaler, for config structs.
	var cfg struct {
		Keyring *receipts.Keyring `json:"keyring"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"keyring":`+string(out)+`}`), &cfg))
	assert.Equal(t, 2, cfg.Keyring.Len())
	assert.Error(t, json.Unmarshal([]byte(`{"keyring":{"v":2,"keys":[]}}`), &cfg))

	// A lookup result is a copy.
	pub, _ := back.Lookup(a.KeyID())
	pub[0] ^= 0xff
	again, _ := back.Lookup(a.KeyID())
	assert.Equal(t, a.Public(), again)

	// An arbitrary id.
	require.NoError(t, back.Add("kms-1", a.Public()))
	require.NoError(t, back.Add("kms-1", a.Public()))
	assert.ErrorContains(t, back.Add("kms-1", b.Public()), "already bound")
	assert.ErrorContains(t, back.Add("", b.Public()), "empty key id")

	var nilRing *receipts.Keyring
	_, ok = nilRing.Lookup(a.KeyID())
	assert.False(t, ok)
	assert.Equal(t, 0, nilRing.Len())
}

func TestParseKeyringErrors(t *testing.T) {
	pub := base64.StdEncoding.EncodeToString(signerFromByte(1).Public())
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"not JSON", `nope`, "keyring"},
		{"missing v", `{"keys":[{"keyId":"k","pubKeyBase64":"` + pub + `"}]}`, `missing version`},
		{"v 2", `{"v":2,"keys":[{"keyId":"k","pubKeyBase64":"` + pub + `"}]}`, "version 2"},
		{"v 0", `{"v":0,"keys":[{"keyId":"k","pubKeyBase64":"` + pub + `"}]}`, "version 0"},
		{"no keys", `{"v":1,"keys":[]}`, "no keys"},
		{"keys missing", `{"v":1}`, "no keys"},
		{"empty keyId", `{"v":1,"keys":[{"keyId":"","pubKeyBase64":"` + pub + `"}]}`, "empty keyId"},
		{"duplicate keyId", `{"v":1,"keys":[{"keyId":"k","pubKeyBase64":"` + pub + `"},{"keyId":"k","pubKeyBase64":"` + pub + `"}]}`, "duplicate keyId"},
		{"bad base64", `{"v":1,"keys":[{"keyId":"k","pubKeyBase64":"***"}]}`, "pubKeyBase64"},
		{"url base64", `{"v":1,"keys":[{"keyId":"k","pubKeyBase64":"-_-_"}]}`, "pubKeyBase64"},
		{"unknown field", `{"v":1,"keys":[{"keyId":"k","pubkeyBase64":"` + pub + `"}]}`, "unknown field"},
		{"private key field", `{"v":1,"keys":[{"keyId":"k","pubKeyBase64":"` + pub + `","privKeyBase64":"x"}]}`, "unknown field"},
		{"field name in another case", `{"v":1,"keys":[{"KeyId":"k","pubKeyBase64":"` + pub + `"}]}`, "unknown field"},
		{"repeated field", `{"v":1,"keys":[{"keyId":"k","keyId":"j","pubKeyBase64":"` + pub + `"}]}`, "repeated field"},
		{"repeated v", `{"v":1,"v":1,"keys":[{"keyId":"k","pubKeyBase64":"` + pub + `"}]}`, "repeated field"},
		{"missing keyId", `{"v":1,"keys":[{"pubKeyBase64":"` + pub + `"}]}`, "empty keyId"},
		{"missing pubKeyBase64", `{"v":1,"keys":[{"keyId":"k"}]}`, "not a string"},
		{"pubKeyBase64 a number", `{"v":1,"keys":[{"keyId":"k","pubKeyBase64":7}]}`, "not a string"},
		{"v a string", `{"v":"1","keys":[{"keyId":"k","pubKeyBase64":"` + pub + `"}]}`, "not an integer"},
		{"keys an object", `{"v":1,"keys":{}}`, "keys"},
		{"array", `[]`, "not a JSON object"},
		{"truncated", `{"v":1,"keys":[`, "keyring"},
		{"trailing data", `{"v":1,"keys":[{"keyId":"k","pubKeyBase64":"` + pub + `"}]} {}`, "after the JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := receipts.ParseKeyring([]byte(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	t.Run("malformed key is kept for Verify to report", func(t *testing.T) {
		kr, err := receipts.ParseKeyring([]byte(`{"v":1,"keys":[{"keyId":"k","pubKeyBase64":"AAEC"}]}`))
		require.NoError(t, err)
		pub, ok := kr.Lookup("k")
		require.True(t, ok)
		assert.Equal(t, []byte{0, 1, 2}, []byte(pub))
	})
}
