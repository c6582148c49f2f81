// Package c2pa writes and verifies C2PA 2.x sidecar manifest stores for
// arbitrary bytes (an agent's answer, a generated file), signed with crux's
// Ed25519 receipt key, and keeps the local root CA that certifies that key.
//
// # What a manifest holds
//
// [Sign] writes a manifest store (the bytes of a .c2pa sidecar) with one
// manifest, labelled urn:c2pa:<UUID v4>, in JUMBF boxes (ISO/IEC 19566-5):
//
//   - the assertion store, with c2pa.actions.v2 (one c2pa.created action,
//     digital source type trainedAlgorithmicMedia, softwareAgent the
//     generator), c2pa.hash.data (SHA-256 of the whole asset exactly as
//     stored, empty exclusions, an empty pad) and crux's own
//     io.github.crux-go.receipt ([ReceiptBinding]: the crux receipt the
//     asset is bound to, by id and by the BLAKE3 of its signed body, and
//     the receipt key's id), each a CBOR assertion;
//   - a c2pa.claim.v2: instanceID, claim_generator_info, the signature's
//     URI, alg sha256, and created_assertions holding the SHA-256 of each
//     assertion box (without its 8-byte header);
//   - c2pa.signature: a COSE_Sign1 (CBOR tag 18) with the algorithm EdDSA
//     and x5chain (the leaf certificate, then the root) in the protected
//     header, an empty unprotected header, and a detached payload: the
//     signature covers the claim's CBOR bytes.
//
// CBOR is written with RFC 8949 core deterministic encoding. No trusted
// timestamp is added (that needs a time-stamping authority on the
// network), so a verifier checks the certificates at verification time.
//
// # Certificates
//
// Validators reject a self-signed signing certificate. A [CA] is a local
// root (Ed25519, CA:TRUE, path length 0, keyCertSign and cRLSign, 20
// years) that issues the leaf certifying the server's existing receipt key
// (no new signing key): CA:FALSE, a critical digitalSignature key usage,
// the extended key usages emailProtection and documentSigning, subject
// and authority key identifiers, valid a year and reissued, in memory, 30
// days before its end. [LoadOrCreateCA] keeps the root's key and
// certificate in a directory (c2pa-ca.key, c2pa-ca.pem, mode 0600),
// created once; give c2pa-ca.pem to a verifier as its trust anchor.
//
// # Verifying
//
// [Verify] checks a store against the asset offline and reports every
// failure with a crux [Code] and the C2PA validation status code of the
// same defect. Its trust check passes only for a chain that leads to the
// roots given; c2pa-rs and other validators without those roots report
// the same manifest as valid but signingCredential.untrusted.
package c2pa
