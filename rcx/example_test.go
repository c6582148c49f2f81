package rcx_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/rcx"
)

// key is a minimal rcx.Signer over an in-memory Ed25519 key.
type key struct{ priv ed25519.PrivateKey }

func (k key) KeyID() string {
	sum := blake3.Sum256(k.Public())
	return "p_" + hex.EncodeToString(sum[:16])
}
func (k key) Public() ed25519.PublicKey       { return k.priv.Public().(ed25519.PublicKey) }
func (k key) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(k.priv, msg), nil }

func Example() {
	k := key{ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))}

	// Mint the free-local token and route calls with it.
	// The token grants the capabilities of the tools served locally.
	tok, err := rcx.MintFreeLocal(k, rcx.FreeLocalOptions{
		DaemonInstanceID: "node-1",
		Capabilities:     []string{"crux-mcp.store_fact", "corecrux.query.local"},
	})
	if err != nil {
		panic(err)
	}
	r, err := rcx.NewRouter(tok, k.Public(), nil)
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	for _, c := range []struct {
		tool, capability string
		hosted           bool
	}{
		{"store_fact", "crux-mcp.store_fact", false},
		{"query_scan", "corecrux.query.local", false},
		{"sync_pull", "crux-mcp.sync_pull", true},
	} {
		tool := c.tool
		d := r.Decide(ctx, rcx.ToolCall(c.capability, c.hosted))
		why := ""
		if !d.Authorised {
			why = " " + d.ReasonCode
		}
		fmt.Printf("%s: %s%s\n", tool, d.Mode, why)
	}
	// Output:
	// store_fact: local
	// query_scan: local
	// sync_pull: refused denied:capability_not_permitted
}

func ExampleNewRouter_otherKey() {
	issuer := key{ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))}
	stranger := key{ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, ed25519.SeedSize))}
	tok, _ := rcx.MintFreeLocal(stranger, rcx.FreeLocalOptions{})

	// The router is built, but refuses everything: fail closed.
	r, err := rcx.NewRouter(tok, issuer.Public(), nil)
	fmt.Println(err)
	fmt.Println(r.Err())
	fmt.Println(r.Decide(context.Background(), rcx.ToolCall("crux-mcp.store_fact", false)).ReasonCode)
	// Output:
	// <nil>
	// rcx: signature does not verify
	// denied:token_invalid
}

func ExampleToken_HashHex() {
	k := key{ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))}
	tok, _ := rcx.MintFreeLocal(k, rcx.FreeLocalOptions{IssuedAt: time.Unix(1_800_000_000, 0)})

	enc, _ := tok.Encode()
	back, _ := rcx.Decode(enc)
	h1, _ := tok.HashHex()
	h2, _ := back.HashHex()
	fmt.Println(h1 == h2, back.Verify(k.Public()))
	// Output:
	// true <nil>
}
