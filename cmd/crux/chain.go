package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
)

// The chain commands: crux verify chain and crux receipts list. Both read
// a tenant's receipt chain, read-only, and act for no agent.

// Bounds of crux receipts list.
const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

// chainFlags are the flags of a chain command: the common ones (of which
// --agent is refused: a chain is a tenant's, not an agent's) and --tenant.
type chainFlags struct {
	common commonFlags
	tenant string
	json   bool
}

// newChainFlagSet returns the flag set of the chain command called name.
func newChainFlagSet(name string, cf *chainFlags) *flag.FlagSet {
	fs := newFlagSet(name, &cf.common)
	fs.StringVar(&cf.tenant, "tenant", crux.DefaultTenant, "the `tenant` whose chain to read")
	fs.BoolVar(&cf.json, "json", false, "print JSON")
	return fs
}

// resolveChain parses args with fs and checks the flags every chain
// command shares. It returns the setup and the positional arguments.
func resolveChain(name string, fs *flag.FlagSet, cf *chainFlags, args []string, osenv *environment) (*setup, []string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, nil, err
	}
	agent := false
	fs.Visit(func(f *flag.Flag) { agent = agent || f.Name == "agent" })
	switch {
	case agent:
		return nil, nil, usagef("%s reads a tenant's chain, not an agent's: --agent does not apply (use --tenant)", name)
	case strings.IndexByte(cf.tenant, 0) >= 0:
		return nil, nil, usagef("--tenant must not contain a NUL byte")
	}
	s, err := resolve(fs, &cf.common, osenv)
	if err != nil {
		return nil, nil, err
	}
	return s, pos, nil
}

// verifyChainCmd is crux verify chain: every receipt of a tenant's chain
// verified with the keyring, each link, and the head. Status 0 and one
// summary line when the chain verifies; else 1, with the code and the
// first bad seq on stderr.
func verifyChainCmd(ctx context.Context, args []string, stdout, stderr io.Writer, osenv *environment, logger *slog.Logger) error {
	var cf chainFlags
	fs := newChainFlagSet("verify chain", &cf)
	keyringFile := fs.String("keyring", "", "the keyring `file` (crux keys export); default: the data directory's key")
	s, pos, err := resolveChain("verify chain", fs, &cf, args, osenv)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("verify chain takes no arguments, got %q (name the tenant with --tenant)", pos[0])
	}
	if s.storeURL == "" {
		if _, err := existingStore(s.dir); err != nil {
			return err // before the keyring's error: there is nothing to verify
		}
	}
	kr, err := loadKeyring(*keyringFile, s)
	if err != nil {
		return err
	}
	krJSON, err := json.Marshal(kr)
	if err != nil {
		return err
	}
	var a receipts.ChainAudit
	if err := s.withSession(ctx, logger, func(sess *session) error {
		return sess.do(ctx, opChain, chainReq{Tenant: cf.tenant, Keyring: krJSON}, &a)
	}); err != nil {
		return err
	}
	if cf.json {
		if err := writeJSON(stdout, a); err != nil {
			return err
		}
	} else if a.OK() {
		if a.Receipts == 0 {
			fmt.Fprintf(stdout, "OK: chain of tenant %q: no receipts\n", a.TenantID)
		} else {
			fmt.Fprintf(stdout, "OK: chain of tenant %q: %d receipts verified, seq 1 to %d, head hash %s\n",
				a.TenantID, a.Receipts, a.HeadSeq, a.HeadHash)
		}
	}
	if !a.OK() {
		fmt.Fprintf(stderr, "crux: chain of tenant %q: %s at seq %d: %s\n", a.TenantID, a.ErrorCode, a.ErrorSeq, a.ErrorMessage)
		return &reportedError{}
	}
	return nil
}

// listedReceipt is one line of crux receipts list.
type listedReceipt struct {
	ReceiptID string `json:"receipt_id"`
	TenantID  string `json:"tenant_id"`
	Seq       uint64 `json:"seq"`
	Kind      string `json:"kind"`
	Actor     string `json:"actor"`
	CreatedAt string `json:"created_at"`
}

// receiptsCmd is crux receipts list: a tenant's receipts, newest first.
func receiptsCmd(ctx context.Context, args []string, stdout io.Writer, osenv *environment, logger *slog.Logger) error {
	args, err := subcommand("receipts", "list", args)
	if err != nil {
		return err
	}
	var cf chainFlags
	fs := newChainFlagSet("receipts list", &cf)
	kind := fs.String("kind", "", "list only receipts of this `kind` (refusal, forget, ...)")
	limit := fs.Int("limit", defaultListLimit, fmt.Sprintf("list at most `N` receipts (1 to %d)", maxListLimit))
	s, pos, err := resolveChain("receipts list", fs, &cf, args, osenv)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("receipts list takes no arguments, got %q", pos[0])
	case *limit < 1 || *limit > maxListLimit:
		return usagef("--limit must be between 1 and %d, got %d", maxListLimit, *limit)
	}

	var ans receiptsAnswer
	if err := s.withSession(ctx, logger, func(sess *session) error {
		return sess.do(ctx, opReceipts, receiptsReq{Tenant: cf.tenant, Kind: *kind, Limit: *limit}, &ans)
	}); err != nil {
		return err
	}
	if ans.WalkError != "" {
		return fmt.Errorf("%s (crux verify chain --tenant %q checks the whole chain)", ans.WalkError, cf.tenant)
	}
	list := ans.Receipts
	if cf.json {
		return writeJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	for _, l := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", l.ReceiptID, l.Seq, l.Kind, orDash(l.Actor), orDash(l.CreatedAt))
	}
	return tw.Flush()
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
