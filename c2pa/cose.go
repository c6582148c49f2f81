package c2pa

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/crux-go/crux/receipts"
)

// COSE (RFC 9052) as C2PA signs claims: a COSE_Sign1 with CBOR tag 18,
// the algorithm and the certificate chain in the protected header, and a
// detached payload (the claim's CBOR, found in the claim box).

// COSE header labels and algorithm identifiers.
const (
	coseTagSign1  = 18
	headerAlg     = 1
	headerX5Chain = 33
	algEdDSA      = -8
	algES256      = -7
	algES384      = -35
	algES512      = -36
)

// coseSign1 is the array of a COSE_Sign1.
type coseSign1 struct {
	_           struct{} `cbor:",toarray"`
	Protected   []byte
	Unprotected map[any]any
	Payload     []byte // nil: detached
	Signature   []byte
}

// sigStructure returns the bytes a COSE_Sign1 signature covers:
// ["Signature1", protected, external_aad (empty), payload].
func sigStructure(protected, payload []byte) ([]byte, error) {
	return detEnc.Marshal([]any{"Signature1", protected, []byte{}, payload})
}

// signCOSE returns the tagged COSE_Sign1 of payload, signed by s, with
// chain as x5chain: a single byte string for one certificate, else an
// array, leaf first.
func signCOSE(s receipts.Signer, chain [][]byte, payload []byte) ([]byte, error) {
	var x5 any = chain[0]
	if len(chain) > 1 {
		x5 = chain
	}
	protected, err := detEnc.Marshal(map[int]any{headerAlg: algEdDSA, headerX5Chain: x5})
	if err != nil {
		return nil, fmt.Errorf("c2pa: protected header: %w", err)
	}
	tbs, err := sigStructure(protected, payload)
	if err != nil {
		return nil, fmt.Errorf("c2pa: Sig_structure: %w", err)
	}
	sig, err := s.Sign(tbs)
	if err != nil {
		return nil, fmt.Errorf("c2pa: signing the claim: %w", err)
	}
	b, err := detEnc.Marshal(cbor.Tag{Number: coseTagSign1, Content: coseSign1{
		Protected: protected, Unprotected: map[any]any{}, Payload: nil, Signature: sig,
	}})
	if err != nil {
		return nil, fmt.Errorf("c2pa: COSE_Sign1: %w", err)
	}
	return b, nil
}
