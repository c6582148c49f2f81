package receipts

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
)

// KeyringVersion is the only keyring format version ("v") there is.
const KeyringVersion = 1

// Keyring maps key ids to Ed25519 public keys: all a verifier needs. It
// holds public keys only. Its JSON form is the CueCrux keyring format,
// version 1:
//
//	{"v":1,"keys":[{"keyId":"p_…","pubKeyBase64":"<std base64 of 32 bytes>"}]}
//
// A Keyring may hold a malformed public key (of the wrong length, not a
// curve point, or of small order); [Verify] reports it as [PubkeyInvalid]
// when a receipt needs it. The zero Keyring is empty and ready to use.
// Lookups may run concurrently; [Keyring.Add] must not run concurrently
// with anything else on the same Keyring.
type Keyring struct {
	keys  []keyEntry     // in insertion order
	index map[string]int // key id → position in keys
}

type keyEntry struct {
	id  string
	pub ed25519.PublicKey
	bad string // why pub is not a usable public key; "" when it is
}

// NewKeyring returns a keyring holding pubs, each under its
// [Fingerprint].
func NewKeyring(pubs ...ed25519.PublicKey) *Keyring {
	k := &Keyring{}
	for _, pub := range pubs {
		_ = k.Add(Fingerprint(pub), pub) // a fingerprint id is never empty, nor taken by another key
	}
	return k
}

// Add puts pub into the keyring under keyID, keeping a copy. Adding a key
// again under the same id does nothing; an empty id, or an id already
// bound to a different key, is an error.
func (k *Keyring) Add(keyID string, pub ed25519.PublicKey) error {
	if keyID == "" {
		return errors.New("receipts: keyring: empty key id")
	}
	if i, ok := k.index[keyID]; ok {
		if bytes.Equal(k.keys[i].pub, pub) {
			return nil
		}
		return fmt.Errorf("receipts: keyring: key id %q is already bound to another key", keyID)
	}
	if k.index == nil {
		k.index = make(map[string]int)
	}
	pub = bytes.Clone(pub)
	k.index[keyID] = len(k.keys)
	k.keys = append(k.keys, keyEntry{id: keyID, pub: pub, bad: checkPublicKey(pub)})
	return nil
}

// Lookup returns a copy of the public key stored under keyID.
func (k *Keyring) Lookup(keyID string) (ed25519.PublicKey, bool) {
	e, ok := k.entry(keyID)
	if !ok {
		return nil, false
	}
	return bytes.Clone(e.pub), true
}

// Len is the number of keys in the keyring.
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	return len(k.keys)
}

func (k *Keyring) entry(keyID string) (keyEntry, bool) {
	if k == nil {
		return keyEntry{}, false
	}
	i, ok := k.index[keyID]
	if !ok {
		return keyEntry{}, false
	}
	return k.keys[i], true
}

type keyringJSON struct {
	V    int           `json:"v"`
	Keys []keyringItem `json:"keys"`
}

type keyringItem struct {
	KeyID        string `json:"keyId"`
	PubKeyBase64 string `json:"pubKeyBase64"`
}

// MarshalJSON encodes the keyring in the keyring v1 format, keys in the
// order they were added.
func (k *Keyring) MarshalJSON() ([]byte, error) {
	out := keyringJSON{V: KeyringVersion, Keys: make([]keyringItem, 0, k.Len())}
	if k != nil {
		for _, e := range k.keys {
			out.Keys = append(out.Keys, keyringItem{KeyID: e.id, PubKeyBase64: base64.StdEncoding.EncodeToString(e.pub)})
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON replaces the keyring with the one [ParseKeyring] reads
// from b.
func (k *Keyring) UnmarshalJSON(b []byte) error {
	p, err := ParseKeyring(b)
	if err != nil {
		return err
	}
	*k = *p
	return nil
}

// ParseKeyring reads a keyring in the keyring v1 JSON format. v must be 1,
// keys non-empty, every keyId non-empty and distinct, and every
// pubKeyBase64 standard base64. Field names must match exactly (Go's
// encoding/json would accept any case), and unknown or repeated fields are
// rejected, so that no two readers of one keyring can disagree about it.
// Whether each key is a valid Ed25519 public key is checked by [Verify]
// when the key is used.
func ParseKeyring(b []byte) (*Keyring, error) {
	top, err := strictObject(b, "v", "keys")
	if err != nil {
		return nil, fmt.Errorf("receipts: keyring: %w", err)
	}
	var v int
	var items []json.RawMessage
	switch {
	case top["v"] == nil:
		return nil, errors.New("receipts: keyring: missing version \"v\"")
	case json.Unmarshal(top["v"], &v) != nil:
		return nil, fmt.Errorf("receipts: keyring: version %s is not an integer", top["v"])
	case v != KeyringVersion:
		return nil, fmt.Errorf("receipts: keyring: version %d, want %d", v, KeyringVersion)
	}
	if top["keys"] != nil {
		if err := json.Unmarshal(top["keys"], &items); err != nil {
			return nil, fmt.Errorf("receipts: keyring: keys: %w", err)
		}
	}
	if len(items) == 0 {
		return nil, errors.New("receipts: keyring: no keys")
	}
	k := &Keyring{}
	for i, raw := range items {
		fields, err := strictObject(raw, "keyId", "pubKeyBase64")
		if err != nil {
			return nil, fmt.Errorf("receipts: keyring: key %d: %w", i, err)
		}
		var id, pub64 string
		if err := json.Unmarshal(fields["keyId"], &id); err != nil || id == "" {
			return nil, fmt.Errorf("receipts: keyring: key %d: empty keyId", i)
		}
		if _, dup := k.index[id]; dup {
			return nil, fmt.Errorf("receipts: keyring: key %d: duplicate keyId %q", i, id)
		}
		if err := json.Unmarshal(fields["pubKeyBase64"], &pub64); err != nil {
			return nil, fmt.Errorf("receipts: keyring: key %q: pubKeyBase64 is not a string", id)
		}
		pub, err := base64.StdEncoding.DecodeString(pub64)
		if err != nil {
			return nil, fmt.Errorf("receipts: keyring: key %q: pubKeyBase64: %w", id, err)
		}
		if err := k.Add(id, pub); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// strictObject reads b as one JSON object whose keys are among allowed,
// each at most once, and returns their raw values.
func strictObject(b []byte, allowed ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	out := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string) // object keys are always strings
		if !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("unknown field %q", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("repeated field %q", name)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return out, nil
}

// checkPublicKey reports why pub is not a usable Ed25519 public key, or ""
// when it is: it must be 32 bytes, the canonical encoding (RFC 8032
// §5.1.3) of a point on the curve, and that point must not be of small
// order.
func checkPublicKey(pub []byte) string {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Sprintf("public key is %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	if isSmallOrder(pub) {
		return "public key is a point of small order"
	}
	// Field prime p = 2^255 - 19 and curve constant d = -121665/121666.
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	d := new(big.Int).ModInverse(big.NewInt(121666), p)
	d.Mul(d, big.NewInt(-121665)).Mod(d, p)

	var le [32]byte
	copy(le[:], pub)
	sign := le[31] >> 7
	le[31] &= 0x7f
	y := new(big.Int).SetBytes(reversed(le[:]))
	if y.Cmp(p) >= 0 {
		return "public key is not canonically encoded (y ≥ p)"
	}
	// x² = (y² - 1) / (d·y² + 1); the denominator is never 0 as d is not a square.
	y2 := new(big.Int).Mul(y, y)
	y2.Mod(y2, p)
	u := new(big.Int).Sub(y2, big.NewInt(1))
	v := new(big.Int).Mul(d, y2)
	v.Add(v, big.NewInt(1)).Mod(v, p)
	x2 := new(big.Int).Mul(u, new(big.Int).ModInverse(v, p))
	x2.Mod(x2, p)
	if x2.Sign() == 0 {
		if sign == 1 {
			return "public key is not canonically encoded (x = 0 with the sign bit set)"
		}
		return ""
	}
	if big.Jacobi(x2, p) != 1 {
		return "public key is not a point on the curve"
	}
	return ""
}

func reversed(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[len(b)-1-i] = c
	}
	return out
}

// isSmallOrder reports whether the 32-byte point encoding enc, canonical or
// not, encodes a point of order 1, 2, 4 or 8, ignoring the sign bit. Those
// points have y ∈ {1, -1, 0, ±y8} (mod p); the list holds their canonical
// encodings and the non-canonical ones (y + p < 2^255 only for y = 0, 1).
func isSmallOrder(enc []byte) bool {
	if len(enc) != 32 {
		return false
	}
	var y [32]byte
	copy(y[:], enc)
	y[31] &= 0x7f
	switch hex.EncodeToString(y[:]) {
	case "0000000000000000000000000000000000000000000000000000000000000000", // y = 0: order 4
		"0100000000000000000000000000000000000000000000000000000000000000", // y = 1: the identity
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = -1: order 2
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p ≡ 0
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f": // y = p+1 ≡ 1
		return true
	}
	return false
}
