// Package rcx implements RCX capability tokens (spec rcx-ct/1.0) and the
// router that decides, per call, whether a token authorises a capability: the
// token model, its deterministic CBOR encoding, BLAKE3 token hash and Ed25519
// signature, the free-local token every installation mints for itself, and
// the decision algorithm of the CueCrux tool contract with its reason codes,
// X-Crux-Mode stamps and refusal receipts.
//
// The package knows nothing of MCP, storage or tools: callers hand it
// capability strings, both to mint a token and to decide a call.
//
// # Tokens
//
// A [Token] names its issuer, subject and tenant, its tier and receipt
// class, and lists backends, each with the capabilities it permits there
// (egress classes, required attestations, credit cost), plus credits,
// fallbacks and revocation pointers. [Token.Encode] writes RFC 8949 §4.2.1
// core deterministic CBOR (map keys sorted bytewise by their encoding,
// which is length first; shortest heads; no indefinite lengths, floats or
// tags), the encoding rules of CueCrux's rcx-ct/1.0 token format. Optional
// values are CBOR null; team_scope and enterprise_scope are left out when
// absent. The encoding reproduces the format's golden token vector byte for
// byte (the package tests hold it).
//
// The token hash ([Token.Hash]) is BLAKE3-256 of [Token.SigningBytes], the
// encoding with signature.sig zeroed; the signature is Ed25519 over those
// 32 bytes. [Sign] signs with any [Signer] (the method set of package
// receipts' signer, so one key serves both); [Token.Verify] verifies
// strictly (canonical S, no small-order key or R).
//
// [Decode] is strict: one CBOR map of exactly the token's fields, no
// duplicate keys, indefinite lengths or tags, known enumeration values
// only, and the input must be the deterministic encoding of what it
// decodes to, so a token has exactly one accepted encoding. Unknown fields
// are rejected rather than skipped: they would not be covered by a
// re-encoded hash, and spec rcx-ct/1.0 has none. Decode never panics
// (FuzzDecodeToken).
//
// [Token.ValidateBasic] reports structural defects with the issue codes of
// the rcx-ct/1.0 format.
//
// # The free-local token
//
// [MintFreeLocal] builds and signs the token a local installation runs
// under: tier free, one backend "local", the capabilities the caller
// names (crux names those of its local tools), no credits, every fallback
// refuse. It has no hosted backend, so a hosted-gated tool, whose
// capability the caller leaves out, is both missing from the token and
// unroutable.
//
// # Routing
//
// [Router] is what the crux server consults: [Router.Decide] for a
// [Call] (capability, preferred backend, egress classes, attestations,
// estimated cost) returns a [Decision]: authorised or not, the [Mode], a
// reason code, an X-Crux-Mode [Stamp], and for refusals an unsigned
// [RefusalReceipt] that the server signs and persists. [ToolCall] builds
// the Call an MCP tool makes; [UpgradeHintFor] gives the upgrade hint of
// the five metered service scopes.
//
// [NewRouter] returns the built-in router, [TokenRouter]. It verifies the
// token's signature once against the trusted issuer key and precomputes
// the token hash and a capability index, so an authorised Decide is a few
// map lookups with no allocation. A token that fails verification does not
// make NewRouter fail; the router refuses everything with
// denied:token_invalid ([TokenRouter.Err] says why), so a misconfigured
// embedder fails closed rather than running without a router.
//
// # Strictness
//
//   - Every backend, local included, relies on the signature verified at
//     construction, so a token that fails verification is refused even
//     when expired with an on_expiry of degrade_to_local.
//   - An expired token with on_expiry degrade_to_local authorises only
//     capabilities the token lists on some backend: expiry never widens
//     the grant.
//   - Backend reachability comes from [RouterOptions].Reachable rather
//     than from each call.
//   - [Sign] checks the signer's output against its public key.
//   - Upgrade hints name no vendor and no hosted service.
//
// on_expiry queue refuses: only on_backend_unreachable and
// on_credits_exhausted honour queue. A token whose issued_at is in the
// future has issue token_not_yet_valid, which the router treats as
// denied:token_invalid.
package rcx
