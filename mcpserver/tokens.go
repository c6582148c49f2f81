package mcpserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/crux-go/crux"
)

// Limits of a token table.
const (
	// MinTokenLength is the shortest bearer token a table accepts: 16
	// characters. A token is a secret; crux token new makes 43.
	MinTokenLength = 16
	// MaxTokenLength is the longest: 4096 characters.
	MaxTokenLength = 4096
	// MaxTokens bounds the entries of a table.
	MaxTokens = 10000
)

// digestPrefix starts a credential given as the SHA-256 digest of its
// token.
const digestPrefix = "sha256:"

// replicaPrefix marks a token table entry as a sync replica's.
const replicaPrefix = "replica::"

// Tokens maps bearer tokens to the callers they authenticate: each token
// to one agent, or one sync replica, of one tenant. It holds the SHA-256 digest of each token,
// never the token, and compares a presented token's digest with every
// entry's in constant time. A Tokens is safe for concurrent use; it does
// not change once parsed.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	digest [sha256.Size]byte
	caller crux.Caller
}

// ParseTokens reads a token table. The table is a list of entries
// separated by commas, spaces, tabs or newlines; a "#" starts a comment
// that runs to the end of its line. An entry is
//
//	AGENT[@TENANT]=CREDENTIAL
//
// where CREDENTIAL is either the token itself or "sha256:" followed by the
// 64 hexadecimal digits of the SHA-256 digest of the token, so that the
// table need not hold the secret:
//
//	planner=sha256:3b0c...e1a9, reviewer@acme=Zm9vYmFyYmF6cXV4cXV1eA
//
// A token is 16 to 4096 characters of the bearer-token alphabet of RFC
// 6750 (letters, digits, "-", ".", "_", "~", "+", "/"), possibly followed
// by "=" padding. AGENT and TENANT may not contain "=", "@", "#", ","
// or white space (the table's own syntax), and must be names crux accepts
// for an authenticated caller (see crux.Caller.Validate); no TENANT means
// the default tenant. A token may appear once; an agent may have several
// (to rotate them). An error names the entry by its position and never
// repeats a credential.
//
// An entry whose name starts with "replica::" is a sync replica's:
//
//	replica::NAME[@TENANT]=CREDENTIAL
//
// Its token authenticates the replica NAME of TENANT (a caller with
// Replica set), which is served the sync API under /v1/sync/ and nothing
// else: the MCP endpoint refuses it with 403. An agent's token is refused
// by the sync API (-32003, 403): a replica pushes versions that every
// agent of the tenant then reads, so it must hold a credential of its
// own. NAME follows the rules of AGENT; a replica and an agent may have
// the same name. No agent name can contain "::", so a table written
// before replicas had entries of their own reads as it did.
func ParseTokens(table string) (*Tokens, error) {
	t := &Tokens{}
	n := 0
	for lineNo, line := range strings.Split(table, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, entry := range strings.FieldsFunc(line, func(r rune) bool {
			return r == ',' || r == ' ' || r == '\t' || r == '\r'
		}) {
			n++
			if n > MaxTokens {
				return nil, fmt.Errorf("crux: token table: more than %d entries", MaxTokens)
			}
			e, err := parseTokenEntry(entry)
			if err != nil {
				return nil, fmt.Errorf("crux: token table: entry %d (line %d): %w", n, lineNo+1, err)
			}
			for _, o := range t.entries {
				if o.digest == e.digest {
					return nil, fmt.Errorf("crux: token table: entry %d (line %d): the same token as another entry", n, lineNo+1)
				}
			}
			t.entries = append(t.entries, e)
		}
	}
	return t, nil
}

// parseTokenEntry reads one AGENT[@TENANT]=CREDENTIAL.
func parseTokenEntry(entry string) (tokenEntry, error) {
	name, cred, ok := strings.Cut(entry, "=")
	if !ok {
		return tokenEntry{}, fmt.Errorf(`want AGENT[@TENANT]=CREDENTIAL, found no "="`)
	}
	what := "agent"
	bare, replica := strings.CutPrefix(name, replicaPrefix)
	if replica {
		what = "replica"
	}
	agent, tenant, _ := strings.Cut(bare, "@")
	if agent == "" {
		return tokenEntry{}, fmt.Errorf("no %s name before %q", what, "=")
	}
	if strings.Contains(tenant, "@") {
		return tokenEntry{}, fmt.Errorf("%q: more than one %q", name, "@")
	}
	if name[len(name)-1] == '@' {
		return tokenEntry{}, fmt.Errorf("%q: an empty tenant after %q", name, "@")
	}
	c := crux.Caller{Agent: agent, Authenticated: true, Tenant: tenant, Replica: replica}
	if err := c.Validate(); err != nil {
		msg := strings.TrimPrefix(err.Error(), "crux: ")
		if !replica && strings.Contains(agent, "::") {
			msg += fmt.Sprintf("; a replica's entry starts with %q", replicaPrefix)
		}
		return tokenEntry{}, fmt.Errorf("%s", msg)
	}
	e := tokenEntry{caller: c}
	if hexDigest, ok := strings.CutPrefix(cred, digestPrefix); ok {
		b, err := hex.DecodeString(hexDigest)
		if err != nil || len(b) != sha256.Size {
			return tokenEntry{}, fmt.Errorf("the digest after %q is not %d hexadecimal digits", digestPrefix, 2*sha256.Size)
		}
		copy(e.digest[:], b)
		return e, nil
	}
	if err := checkToken(cred); err != nil {
		return tokenEntry{}, err
	}
	e.digest = sha256.Sum256([]byte(cred))
	return e, nil
}

// checkToken checks that tok is a bearer token a table accepts.
func checkToken(tok string) error {
	if len(tok) < MinTokenLength {
		return fmt.Errorf("the token is shorter than %d characters", MinTokenLength)
	}
	if len(tok) > MaxTokenLength {
		return fmt.Errorf("the token is longer than %d characters", MaxTokenLength)
	}
	body := strings.TrimRight(tok, "=")
	if body == "" {
		return fmt.Errorf("the token is only %q padding", "=")
	}
	for i := 0; i < len(body); i++ {
		if !isTokenChar(body[i]) {
			return fmt.Errorf("the token holds a character outside the bearer-token alphabet at position %d", i+1)
		}
	}
	return nil
}

// isTokenChar reports whether c is in the b64token alphabet of RFC 6750,
// "=" aside.
func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
}

// Len is the number of tokens in the table.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Callers lists the callers of the table, one per entry, in table order.
func (t *Tokens) Callers() []crux.Caller {
	if t == nil {
		return nil
	}
	out := make([]crux.Caller, len(t.entries))
	for i, e := range t.entries {
		out[i] = e.caller
	}
	return out
}

// Lookup returns the caller that token authenticates, and whether it
// authenticates one. It compares the token's SHA-256 digest with every
// entry's, in constant time and without stopping at a match, so that the
// time it takes says nothing of which entry, if any, matched.
func (t *Tokens) Lookup(token string) (crux.Caller, bool) {
	if t == nil {
		return crux.Caller{}, false
	}
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(t.entries[i].digest[:], d[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return crux.Caller{}, false
	}
	return t.entries[found].caller, true
}

// TokenDigest returns the credential of a token table entry that stands
// for token without holding it: "sha256:" and its SHA-256 digest in
// hexadecimal.
func TokenDigest(token string) string {
	d := sha256.Sum256([]byte(token))
	return digestPrefix + hex.EncodeToString(d[:])
}
