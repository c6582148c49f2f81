package store

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Engrams: pre-execution overlays (instructions a host puts in front of a
// model before it acts), kept per tenant under name@version.
//
//   - engrams: tenant, name, NUL, version → the CBOR record.

const bucketEngrams = "engrams"

// Limits of an engram.
const (
	// MaxEngramBytes caps an engram's content.
	MaxEngramBytes = 64 << 10
	// MaxEngramNameBytes caps its name and its version.
	MaxEngramNameBytes = 128
	// MaxEngramWhyBytes caps its applicable_why and its intent bucket.
	MaxEngramWhyBytes = 1024
)

// Capability classes of models, weakest first. An engram names the least
// class that may read its content.
const (
	ClassFast     = "fast"
	ClassCapable  = "capable"
	ClassFrontier = "frontier"
)

// ClassRank orders the capability classes: fast 0, capable 1, frontier 2;
// -1 for an unknown class.
func ClassRank(class string) int {
	switch class {
	case ClassFast:
		return 0
	case ClassCapable:
		return 1
	case ClassFrontier:
		return 2
	}
	return -1
}

// Engram is one overlay.
type Engram struct {
	Name          string    `cbor:"1,keyasint" json:"name"`
	Version       string    `cbor:"2,keyasint" json:"version"`
	IntentBucket  string    `cbor:"3,keyasint,omitempty" json:"intent_bucket,omitempty"`
	Content       string    `cbor:"4,keyasint" json:"content"`
	MinClass      string    `cbor:"5,keyasint,omitempty" json:"min_class,omitempty"` // "" means fast: any model
	ApplicableWhy string    `cbor:"6,keyasint,omitempty" json:"applicable_why,omitempty"`
	UpdatedAt     time.Time `cbor:"7,keyasint" json:"-"`
}

// Ref is the engram's name@version.
func (e *Engram) Ref() string { return e.Name + "@" + e.Version }

// engramPart is the form of a name and of a version.
var engramPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)

// ParseEngramRef splits "name@version", reporting whether both parts are
// well formed (letters, digits, and . _ + - after the first character, at
// most MaxEngramNameBytes each).
func ParseEngramRef(ref string) (name, version string, ok bool) {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '@' {
			name, version = ref[:i], ref[i+1:]
			return name, version, checkEngramPart(name) == nil && checkEngramPart(version) == nil
		}
	}
	return "", "", false
}

func checkEngramPart(s string) error {
	if len(s) > MaxEngramNameBytes || !engramPart.MatchString(s) {
		return fmt.Errorf("must be 1 to %d letters, digits, '.', '_', '+' or '-', starting with a letter or digit", MaxEngramNameBytes)
	}
	return nil
}

// CheckEngram reports what is wrong with e, naming the field.
func CheckEngram(e *Engram) error {
	switch {
	case checkEngramPart(e.Name) != nil:
		return fmt.Errorf("engram name %q: %w", e.Name, checkEngramPart(e.Name))
	case checkEngramPart(e.Version) != nil:
		return fmt.Errorf("engram %s version %q: %w", e.Name, e.Version, checkEngramPart(e.Version))
	case e.Content == "":
		return fmt.Errorf("engram %s: empty content", e.Ref())
	case len(e.Content) > MaxEngramBytes:
		return fmt.Errorf("engram %s: content longer than %d bytes", e.Ref(), MaxEngramBytes)
	case len(e.IntentBucket) > MaxEngramWhyBytes || len(e.ApplicableWhy) > MaxEngramWhyBytes:
		return fmt.Errorf("engram %s: intent_bucket and applicable_why are at most %d bytes", e.Ref(), MaxEngramWhyBytes)
	case e.MinClass != "" && ClassRank(e.MinClass) < 0:
		return fmt.Errorf("engram %s: min_class %q is not fast, capable or frontier", e.Ref(), e.MinClass)
	}
	return CheckText("engram "+e.Ref(), e)
}

func engramKey(tenant, name, version string) []byte { return indexKey(tenant, name, version) }

// PutEngram stores e in tenant, replacing the engram of the same
// name@version.
func PutEngram(tx Tx, tenant string, e Engram, now time.Time) error {
	if err := CheckEngram(&e); err != nil {
		return err
	}
	e.UpdatedAt = now.UTC()
	b, err := encodeRecord("engram "+e.Ref(), e)
	if err != nil {
		return err
	}
	return tx.Put(bucketEngrams, engramKey(tenant, e.Name, e.Version), b)
}

// DeleteEngram removes name@version from tenant, reporting whether it was
// there.
func DeleteEngram(tx Tx, tenant, name, version string) (bool, error) {
	k := engramKey(tenant, name, version)
	if _, err := tx.Get(bucketEngrams, k); errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, tx.Delete(bucketEngrams, k)
}

// Engrams calls fn with tenant's engrams in name, then version order. A
// record that does not decode is passed over (crux doctor reports it).
func Engrams(tx Tx, tenant string, fn func(*Engram) error) error {
	return tx.Scan(bucketEngrams, indexKey(tenant, ""), false, func(k, v []byte) error {
		var e Engram
		if err := factDec.Unmarshal(v, &e); err != nil {
			return nil
		}
		return fn(&e)
	})
}
