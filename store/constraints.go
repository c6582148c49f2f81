package store

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"lukechampine.com/blake3"
)

// Constraints are declared rules an agent's actions are checked against
// (declare_constraint, get_constraints, check_constraints). They belong to
// a tenant, not to an agent: every agent of the tenant sees and is checked
// against the same constraints, and no other tenant sees them.
const (
	bucketConstraints     = "constraints"       // tenant, constraint id → JSON Constraint
	bucketConstraintOrder = "constraints.order" // tenant, status, severity rank, created_at, id → empty
)

// Constraint types.
const (
	ConstraintBoundary     = "boundary"
	ConstraintRelationship = "relationship"
	ConstraintPolicy       = "policy"
	ConstraintContextFlag  = "context_flag"
	ConstraintShellPattern = "shell_pattern" // the assertion is a Go (RE2) regular expression
)

// Constraint severities, most severe first.
const (
	SeverityCritical = "critical"
	SeverityHigh     = "high"
	SeverityMedium   = "medium"
	SeverityLow      = "low"
)

// Constraint statuses.
const (
	ConstraintActive    = "active"
	ConstraintSuspended = "suspended"
)

// MaxConstraints caps the active constraints of one tenant, so that
// checking an action against all of them stays bounded.
const MaxConstraints = 1000

// ErrConstraintLimit reports a declaration beyond MaxConstraints.
var ErrConstraintLimit = fmt.Errorf("store: a tenant may hold at most %d active constraints", MaxConstraints)

// ErrInvalidConstraint reports a constraint with an unknown type, severity
// or status.
var ErrInvalidConstraint = errors.New("store: invalid constraint")

// SeverityRank orders severities: 0 for critical up to 3 for low, and 4 for
// anything else.
func SeverityRank(s string) int {
	switch s {
	case SeverityCritical:
		return 0
	case SeverityHigh:
		return 1
	case SeverityMedium:
		return 2
	case SeverityLow:
		return 3
	}
	return 4
}

// ValidConstraintType reports whether t is one of the five constraint types.
func ValidConstraintType(t string) bool {
	switch t {
	case ConstraintBoundary, ConstraintRelationship, ConstraintPolicy, ConstraintContextFlag, ConstraintShellPattern:
		return true
	}
	return false
}

// Constraint is one declared constraint.
type Constraint struct {
	ID         string    `json:"constraint_id"`
	Tenant     string    `json:"tenant_id"`
	Type       string    `json:"constraint_type"`
	Assertion  string    `json:"assertion"`
	Severity   string    `json:"severity"`
	Status     string    `json:"status"`
	Hash       string    `json:"constraint_hash"`
	DeclaredBy string    `json:"declared_by"`
	CreatedAt  time.Time `json:"created_at"`
	ReceiptID  string    `json:"receipt_id,omitempty"`
}

// ConstraintHash is the content hash of a constraint: the BLAKE3 hex of the
// JSON array [tenant, type, assertion, severity]. Two declarations of the
// same rule in the same tenant have the same hash.
func ConstraintHash(tenant, typ, assertion, severity string) string {
	b, _ := json.Marshal([]string{tenant, typ, assertion, severity}) // strings always marshal
	h := blake3.Sum256(b)
	return hex.EncodeToString(h[:])
}

// NewConstraintID returns a fresh constraint id: "c_" and 32 hex digits.
func NewConstraintID() string { return "c_" + NewFactID()[2:] }

func constraintOrderKey(c *Constraint) []byte {
	k := indexKey(c.Tenant, c.Status, "")
	k = append(k, byte(SeverityRank(c.Severity)))
	k = binary.BigEndian.AppendUint64(k, uint64(c.CreatedAt.UnixNano()))
	return append(k, c.ID...)
}

// PutConstraint stores c as a new constraint: it fills in Hash and, when
// empty, ID and Status (active). It returns ErrConstraintLimit when the
// tenant already holds MaxConstraints active constraints, and an
// ErrInvalidConstraint for an unknown type, severity or status.
func PutConstraint(tx Tx, c *Constraint) error {
	if c.Status == "" {
		c.Status = ConstraintActive
	}
	switch {
	case !ValidConstraintType(c.Type):
		return fmt.Errorf("%w: type %q", ErrInvalidConstraint, c.Type)
	case SeverityRank(c.Severity) > 3:
		return fmt.Errorf("%w: severity %q", ErrInvalidConstraint, c.Severity)
	case c.Status != ConstraintActive && c.Status != ConstraintSuspended:
		return fmt.Errorf("%w: status %q", ErrInvalidConstraint, c.Status)
	}
	if c.ID == "" {
		c.ID = NewConstraintID()
	}
	c.CreatedAt = c.CreatedAt.UTC()
	c.Hash = ConstraintHash(c.Tenant, c.Type, c.Assertion, c.Severity)
	if c.Status == ConstraintActive {
		n := 0
		err := tx.Scan(bucketConstraintOrder, indexKey(c.Tenant, ConstraintActive, ""), false, func(_, _ []byte) error {
			if n++; n >= MaxConstraints {
				return ErrStop
			}
			return nil
		})
		if err != nil {
			return err
		}
		if n >= MaxConstraints {
			return ErrConstraintLimit
		}
	}
	return writeConstraint(tx, c)
}

func writeConstraint(tx Tx, c *Constraint) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketConstraints, indexKey(c.Tenant, c.ID), b); err != nil {
		return err
	}
	return tx.Put(bucketConstraintOrder, constraintOrderKey(c), nil)
}

// GetConstraint reads constraint id of tenant, or returns ErrNotFound.
func GetConstraint(tx Tx, tenant, id string) (*Constraint, error) {
	v, err := tx.Get(bucketConstraints, indexKey(tenant, id))
	if err != nil {
		return nil, err
	}
	c := new(Constraint)
	if err := json.Unmarshal(v, c); err != nil {
		return nil, fmt.Errorf("store: constraint %s: %w", id, err)
	}
	return c, nil
}

// SetConstraintStatus moves constraint id of tenant to status (active or
// suspended). Reactivating is refused with ErrConstraintLimit when the
// tenant is full. It returns ErrNotFound for an unknown constraint.
func SetConstraintStatus(tx Tx, tenant, id, status string) (*Constraint, error) {
	if status != ConstraintActive && status != ConstraintSuspended {
		return nil, fmt.Errorf("%w: status %q", ErrInvalidConstraint, status)
	}
	c, err := GetConstraint(tx, tenant, id)
	if err != nil || c.Status == status {
		return c, err
	}
	if err := tx.Delete(bucketConstraintOrder, constraintOrderKey(c)); err != nil {
		return nil, err
	}
	c.Status = status
	if status == ConstraintActive {
		return c, PutConstraint(tx, c)
	}
	return c, writeConstraint(tx, c)
}

// ConstraintQuery selects constraints of a tenant. Zero fields do not filter.
type ConstraintQuery struct {
	Tenant string
	Status string // "" means active
	Type   string
	Limit  int // 0 means no cap
}

// Constraints calls fn for the constraints q selects, most severe first and,
// within a severity, oldest first. It reports whether Limit cut the list.
func Constraints(tx Tx, q ConstraintQuery, fn func(*Constraint) error) (truncated bool, err error) {
	if q.Status == "" {
		q.Status = ConstraintActive
	}
	p := indexKey(q.Tenant, q.Status, "")
	n := 0
	err = tx.Scan(bucketConstraintOrder, p, false, func(k, _ []byte) error {
		id := string(k[len(p)+9:])
		c, err := GetConstraint(tx, q.Tenant, id)
		if err != nil {
			return err
		}
		if q.Type != "" && c.Type != q.Type {
			return nil
		}
		if q.Limit > 0 && n == q.Limit {
			truncated = true
			return ErrStop
		}
		n++
		return fn(c)
	})
	return truncated, err
}
