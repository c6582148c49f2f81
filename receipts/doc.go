// Package receipts mints, stores and verifies crux's signed receipts.
//
// Every receipt crux mints (forget, refusal, session plan, memory use,
// reverify, consolidation, decision, ...) is signed with Ed25519, chained to
// the previous receipt of its tenant, written in the same store transaction
// as the change it attests, and verifiable offline with nothing but the
// public keyring.
//
// # Wire model
//
// A receipt is two byte strings, in the CueCrux signed-receipt wire model
// ("bytes-first": the stored bytes are the signed bytes):
//
//   - The body: a CBOR map whose keys appear in this order: schema
//     ("crux.receipt.body.v1"), kind, receipt_id, tenant_id, seq, prev_hash,
//     created_at, actor, payload. seq is the 1-based position in the
//     tenant's chain; prev_hash is the 32-byte BLAKE3 of the previous
//     receipt's body bytes (32 zero bytes for seq 1); created_at is RFC 3339
//     in UTC with nine fractional digits. payload is the kind-specific value
//     the caller passed, encoded with RFC 8949 core deterministic encoding
//     (maps and struct fields sorted, shortest forms), so equal payloads
//     always encode alike; the body's own keys keep the declared order. The
//     body is encoded once: the stored bytes are the bytes that were hashed
//     and signed, and verifiers never re-encode them.
//   - The signature record: a CBOR map with the fields of the CueCrux receipt
//     signature record: schema ("crux.receipt.sig.v1"), receipt_id, alg
//     ("ed25519"), key_id, signed_at (RFC 3339), signature (64 bytes, Ed25519
//     over the raw body bytes) and signed_payload_hash (32 bytes, BLAKE3 of
//     the body).
//
// The stored payload hash (BLAKE3 of the body, kept next to it) is what the
// signature record's signed_payload_hash must equal.
//
// # Keys
//
// A [Signer] signs; [Ed25519Signer] is the default implementation, and an
// embedder may implement Signer over an HSM or a KMS. A key id is the
// key's [Fingerprint]: "p_" and the lowercase hex of the first 16 bytes of
// BLAKE3 of the public key (CueCrux's passport-fingerprint format).
// [LoadOrCreateKey] keeps the seed in <dir>/signing.key (lowercase hex and a
// newline, mode 0600), created once, atomically, and never replaced. A
// [Keyring] holds public keys only; its JSON form is the CueCrux keyring
// format, version 1: {"v":1,"keys":[{"keyId":"…","pubKeyBase64":"…"}]}.
//
// # Storage layout
//
// [Append] writes, in the caller's [store.Tx], so that the receipt commits
// or rolls back with the change it attests:
//
//   - bucket "receipts": receipt id → CBOR record {tenant_id, kind, seq,
//     body, payload_hash, sig}; body and sig are the exact wire bytes.
//   - bucket "receipts.chain": tenant, NUL, seq (8 bytes big-endian) →
//     receipt id. A tenant's keys sort in chain order.
//   - bucket "receipts.head": tenant, NUL → seq (8 bytes big-endian) and the
//     BLAKE3 of that receipt's body (32 bytes): the tenant's chain head.
//   - bucket "receipts.actors": tenant, NUL, actor → the actor's
//     [Standing]: the tenant's receipts naming it, refusals and their
//     summaries excepted, and its credit, at most [DailyCredit] of them a
//     UTC day, with the day of the latest and its count (8, 8, 4 and 4
//     bytes big-endian), kept by Append; and the key 0xff 0x01 once the
//     standings cover every receipt ([BuildActorCounts] works out those of
//     a store written before they existed, or when they were 8-byte counts
//     of receipts alone under the key 0xff). [ActorStanding] reads one.
//   - bucket "receipts.coalesce": tenant, NUL, BLAKE3 of (kind, actor,
//     payload) → the open window of [AppendCoalesced] for them (the
//     window's receipt id, kind, actor, count, start, end and last append;
//     CBOR, unsigned). Retiring a window deletes its entry.
//
// Tenants may be empty but must not contain a NUL byte (keys would become
// ambiguous). Append reads the head and writes the next receipt in one
// transaction, so concurrent appends to one tenant serialize in the store
// and the chain has no gaps. Append has no side effects outside the
// transaction, as [store.Backend.Update] requires; it signs inside the
// transaction, so a slow remote signer lengthens every write transaction.
//
// # Verification
//
// [Verify] checks a receipt the way CueCrux receipt verification (version 1)
// does and reports one [Code]:
//
//  1. BLAKE3 of the body is compared with the stored payload hash
//     (integrity.payload_hash_matches).
//  2. The body must be one well-formed CBOR item
//     (integrity.canonical_bytes_parse_ok); key order is not checked.
//  3. The signature record must be present ([SigMissing]) and decode
//     ([SigParseError]); then, in order: alg is "ed25519"
//     ([SigAlgUnsupported]); its receipt_id is the receipt's
//     ([SigReceiptIDMismatch]); signed_payload_hash is 32 bytes and equals
//     the stored payload hash ([SigPayloadHashMismatch]); a keyring is given
//     ([KeyringMissing]); it holds key_id ([KeyNotFound]); the key is a valid
//     public key ([PubkeyInvalid]); the signature is 64 bytes and verifies
//     strictly over the body bytes ([SigInvalid]).
//  4. A body hash mismatch wins over every other code, but the signature
//     checks still run, so signature_valid tells storage corruption (a
//     valid signature) from forgery. Otherwise a CBOR parse error wins over
//     the signature codes, and the first failing signature check gives the
//     code.
//  5. Only when all of that passes, the body's header must be a
//     crux.receipt.body.v1 header whose receipt_id, tenant_id, kind and seq
//     equal the receipt's ([BodyHeaderMismatch]). This check is crux's
//     addition: the receipt's id, tenant, kind and seq are stored (and
//     exported) next to the body unsigned, and without it a receipt could be
//     relabelled, or a signature over some other message passed off as a
//     receipt, and still verify.
//
// Strictness: Go's [ed25519.Verify] rejects signatures whose S is not
// canonical (S ≥ ℓ) and, because it compares the encoding of the recomputed R
// with the signature's bytes, non-canonical R encodings; it accepts
// small-order public keys and R points and non-canonical public-key
// encodings. Verify adds what Rust's verify_strict checks on top: the public
// key must be a canonical encoding of a curve point that is not of small
// order (else [PubkeyInvalid], which names the key rather than the signature
// as the defect), and R must not be of small order (else [SigInvalid]). With
// the identity as public key, for example, Go's Verify accepts the
// signature R = identity, S = 0 for every message; Verify does not.
//
// Chains: [VerifyChain] checks that receipts of one tenant, in the order
// given, have consecutive seqs and that each prev_hash is the BLAKE3 of the
// previous body (and zero for seq 1), and reports a *[ChainError] otherwise;
// [VerifyStoredChain] does the same for a tenant's stored chain and checks
// its head, so a dropped, reordered or altered receipt is detected. An
// attacker able to rewrite the store can still cut the tail of a chain and
// its head together; anchoring head hashes elsewhere (an exported audit
// bundle, say) closes that gap.
//
// [AuditChain] does both for a stored chain in one pass: each receipt as
// Verify checks it, then its link, then the head. It reports the first
// defect as a [ChainAudit]: its seq and a code, Verify's for a receipt
// that fails on its own, else a chain code (CHAIN_GAP, CHAIN_SEQ_ORDER,
// CHAIN_PREV_HASH_MISMATCH, CHAIN_HEAD_MISMATCH, CHAIN_RECEIPT_MISSING,
// CHAIN_RECORD_MISMATCH, CHAIN_RECORD_UNREADABLE). A body altered in
// place is thus reported at its own seq, as BODY_HASH_MISMATCH, rather
// than at the next seq, whose prev_hash no longer links.
//
// # Coalescing
//
// An event that can repeat at a caller's whim (a refused call) must not
// grow the store with every repetition, yet each repetition must be
// answered with a receipt, and nothing signed may be rewritten or chained
// receipt deleted. [AppendCoalesced] squares this with windows: the first
// append of a (tenant, kind, actor, payload) mints a receipt and opens a
// window of a given length from its created_at; identical appends within
// the window return that receipt and the count so far, kept in an
// unsigned window record; once the window has ended, the next append
// that mints a receipt in the tenant retires it (the identical one
// first, then up to 8 others), minting a summary receipt of kind
// "<kind>_summary" (payload [Summary]: the window's receipt id, count,
// start, end and last append) when the window counted more than one
// append. The stored receipts then grow with time, not with appends: at
// most two per window per (tenant, kind, actor, payload). A receipt
// without a summary stood for one append, unless its window has not been
// retired yet, in which case the count is still in the window record.
//
// [Export] and [Exported.Receipt] move a receipt through JSON, so it can be
// verified from a file offline.
package receipts
