package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
	common *commonFlags
	tenant string
	json   bool
}

// withChain registers the flags of a chain command on c and returns them.
func withChain(c *cobra.Command) *chainFlags {
	cf := &chainFlags{common: withCommon(c)}
	_ = c.Flags().MarkHidden("agent")
	c.Flags().StringVar(&cf.tenant, "tenant", crux.DefaultTenant, "the `TENANT` whose chain to read")
	c.Flags().BoolVar(&cf.json, "json", false, "print JSON")
	return cf
}

// resolveChain checks the flags every chain command shares and resolves
// them.
func resolveChain(name string, fs *pflag.FlagSet, cf *chainFlags, osenv *environment) (*setup, error) {
	switch {
	case fs.Changed("agent"):
		return nil, usagef("%s reads a tenant's chain, not an agent's: --agent does not apply (use --tenant)", name)
	case strings.IndexByte(cf.tenant, 0) >= 0:
		return nil, usagef("--tenant must not contain a NUL byte")
	}
	return resolve(fs, cf.common, osenv)
}

// newVerifyChainCmd returns crux verify chain: every receipt of a tenant's
// chain verified with the keyring, each link, and the head. Status 0 and
// one summary line when the chain verifies; else 1, with the code and the
// first bad seq on stderr.
func newVerifyChainCmd(a *app) *cobra.Command {
	var cf *chainFlags
	var keyringFile string
	c := &cobra.Command{
		Use:   "chain [--data DIR] [--tenant T] [--keyring FILE] [--json]",
		Short: "Verify a tenant's whole receipt chain, every receipt and link",
		Long: `Verify a tenant's whole receipt chain (default tenant: default): every
receipt as verify receipt does, in seq order, each one's link to the one
before (its prev_hash is the BLAKE3 of that body) and the chain head. Exits 0
and prints one summary line when it verifies; else exits 1 and prints the
code of the first defect and its seq on standard error (a receipt's own
code, such as BODY_HASH_MISMATCH, or a chain code: CHAIN_GAP,
CHAIN_SEQ_ORDER, CHAIN_PREV_HASH_MISMATCH, CHAIN_HEAD_MISMATCH,
CHAIN_RECEIPT_MISSING, CHAIN_RECORD_MISMATCH, CHAIN_RECORD_UNREADABLE).
--json prints the audit as JSON.`,
		RunE: func(c *cobra.Command, pos []string) error {
			s, err := resolveChain("verify chain", c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			if len(pos) > 0 {
				return usagef("verify chain takes no arguments, got %q (name the tenant with --tenant)", pos[0])
			}
			return a.verifyChain(s, cf, keyringFile)
		},
	}
	cf = withChain(c)
	c.Flags().StringVar(&keyringFile, "keyring", "", "the keyring `FILE` (crux keys export); default: the data directory's key")
	return c
}

func (a *app) verifyChain(s *setup, cf *chainFlags, keyringFile string) error {
	ctx, stdout, stderr := a.ctx, a.stdout, a.stderr
	if s.storeURL == "" {
		if _, err := existingStore(s.dir); err != nil {
			return err // before the keyring's error: there is nothing to verify
		}
	}
	kr, err := loadKeyring(keyringFile, s)
	if err != nil {
		return err
	}
	krJSON, err := json.Marshal(kr)
	if err != nil {
		return err
	}
	var au receipts.ChainAudit
	if err := s.withSession(ctx, a.logger, func(sess *session) error {
		return sess.do(ctx, opChain, chainReq{Tenant: cf.tenant, Keyring: krJSON}, &au)
	}); err != nil {
		return err
	}
	if cf.json {
		if err := writeJSON(stdout, au); err != nil {
			return err
		}
	} else if au.OK() {
		if au.Receipts == 0 {
			fmt.Fprintf(stdout, "OK: chain of tenant %q: no receipts\n", au.TenantID)
		} else {
			fmt.Fprintf(stdout, "OK: chain of tenant %q: %d receipts verified, seq 1 to %d, head hash %s\n",
				au.TenantID, au.Receipts, au.HeadSeq, au.HeadHash)
		}
	}
	if !au.OK() {
		fmt.Fprintf(stderr, "crux: chain of tenant %q: %s at seq %d: %s\n", au.TenantID, au.ErrorCode, au.ErrorSeq, au.ErrorMessage)
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

// newReceiptsCmd returns crux receipts list: a tenant's receipts, newest
// first.
func newReceiptsCmd(a *app) *cobra.Command {
	var cf *chainFlags
	var kind string
	var limit int
	list := &cobra.Command{
		Use:   "list [--data DIR] [--tenant T] [--kind K] [--limit N] [--json]",
		Short: "List a tenant's receipts, newest first",
		Long: fmt.Sprintf(`List a tenant's receipts, newest first: id, seq, kind, actor and
created_at, one line each, or with --json a JSON array. --kind keeps one
kind (refusal, refusal_summary, forget, decision, ...); --limit lists at
most N (default %d, at most %d); when more receipts match, standard error
says so. Listing verifies nothing: crux verify receipt and crux verify
chain do.`, defaultListLimit, maxListLimit),
		RunE: func(c *cobra.Command, pos []string) error {
			switch {
			case len(pos) > 0:
				return usagef("receipts list takes no arguments, got %q", pos[0])
			case limit < 1 || limit > maxListLimit:
				return usagef("--limit must be between 1 and %d, got %d", maxListLimit, limit)
			}
			s, err := resolveChain("receipts list", c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			return a.listReceipts(s, cf, kind, limit)
		},
	}
	cf = withChain(list)
	list.Flags().StringVar(&kind, "kind", "", "list only receipts of this `KIND` (refusal, forget, ...)")
	list.Flags().IntVar(&limit, "limit", defaultListLimit, fmt.Sprintf("list at most `N` receipts (1 to %d)", maxListLimit))
	return parentCmd("receipts", "List receipts", list)
}

func (a *app) listReceipts(s *setup, cf *chainFlags, kind string, limit int) error {
	ctx := a.ctx
	var ans receiptsAnswer
	if err := s.withSession(ctx, a.logger, func(sess *session) error {
		return sess.do(ctx, opReceipts, receiptsReq{Tenant: cf.tenant, Kind: kind, Limit: limit}, &ans)
	}); err != nil {
		return err
	}
	if ans.WalkError != "" {
		return fmt.Errorf("%s (crux verify chain --tenant %q checks the whole chain)", ans.WalkError, cf.tenant)
	}
	list := ans.Receipts
	if cf.json {
		if err := writeJSON(a.stdout, list); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(a.stdout, 0, 8, 2, ' ', 0)
		for _, l := range list {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", l.ReceiptID, l.Seq, l.Kind, orDash(l.Actor), orDash(l.CreatedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if ans.Truncated {
		truncatedNotice(a.stderr, len(list), "receipts", maxListLimit)
	}
	return nil
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
