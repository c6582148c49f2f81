package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/regfile"
	"github.com/crux-go/crux/receipts"
	"github.com/spf13/cobra"
)

// newKeysCmd returns crux keys export: the public keyring of the data
// directory.
func newKeysCmd(a *app) *cobra.Command {
	var cf *commonFlags
	export := &cobra.Command{
		Use:   "export [--data DIR]",
		Short: "Print the public keyring that verifies this data directory's receipts",
		Long: `Print the public keyring (JSON) that verifies this data directory's
receipts, for crux verify --keyring FILE. It holds public keys only.`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := noArgs("keys export", args); err != nil {
				return err
			}
			s, err := resolve(c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			signer, err := s.signer()
			if err != nil {
				return err
			}
			return writeJSON(a.stdout, receipts.NewKeyring(signer.Public()))
		},
	}
	cf = withCommon(export)
	return parentCmd("keys", "Export the public keyring", export)
}

// readReceipt reads receipt id from the data directory's store.
func readReceipt(ctx context.Context, s *setup, logger *slog.Logger, id string) (*receipts.Receipt, error) {
	var e receipts.Exported
	if err := s.withSession(ctx, logger, func(sess *session) error {
		return sess.do(ctx, opReceipt, receiptReq{ID: id}, &e)
	}); err != nil {
		return nil, err
	}
	return e.Receipt()
}

// newExportCmd returns crux export [--tenant T] [--agent A], the tenant's
// memories as JSON Lines (memories.go), and crux export receipt ID, a
// stored receipt as JSON.
func newExportCmd(a *app) *cobra.Command {
	var cf *commonFlags
	receipt := &cobra.Command{
		Use:   "receipt [--data DIR] ID",
		Short: "Print a stored receipt as JSON, for crux verify receipt --file",
		RunE: func(c *cobra.Command, pos []string) error {
			if len(pos) != 1 {
				return usagef("export receipt takes one receipt id")
			}
			s, err := resolve(c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			r, err := readReceipt(a.ctx, s, a.logger, pos[0])
			if err != nil {
				return err
			}
			return writeJSON(a.stdout, receipts.Export(r))
		},
	}
	cf = withCommon(receipt)
	var ecf *commonFlags
	var tenant string
	export := &cobra.Command{
		Use:   "export [--data DIR] [--tenant T] [--agent A] > memories.jsonl",
		Short: "Export a tenant's memories as JSON Lines, or a stored receipt",
		Long: `Print tenant T's memories (default tenant: default) as JSON Lines: a
header {"format":"crux-memories","version":1,...}, then every version of
every fact chain (superseded and deleted ones, decisions included; not the
bootstrap knowledge nor forgotten facts), the sessions that have not
expired, the constraints and the artefacts' metadata (not their bytes), one
record a line. Private facts, sessions and artefacts are exported only with
--agent of their owner. Read a page at a time, each page its own
transaction: a write made meanwhile may or may not be in the export. A
count goes to standard error. crux export receipt ID prints a stored
receipt instead.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, pos []string) error {
			if len(pos) > 0 {
				return usagef(`export takes no arguments (or the subcommand "receipt"), got %q`, pos[0])
			}
			s, err := resolve(c.Flags(), ecf, a.env)
			if err != nil {
				return err
			}
			return exportMemories(a, s, tenant, ecf.agent)
		},
	}
	ecf = withCommon(export)
	export.Flags().StringVar(&tenant, "tenant", crux.DefaultTenant, "the `tenant` to export")
	export.AddCommand(receipt)
	return export
}

// newVerifyCmd returns crux verify: receipt, chain, output and bundle.
func newVerifyCmd(a *app) *cobra.Command {
	return parentCmd("verify", "Verify receipts, chains, C2PA manifests and audit bundles offline",
		newVerifyReceiptCmd(a), newVerifyChainCmd(a), newVerifyOutputCmd(a), newVerifyBundleCmd(a))
}

// newVerifyReceiptCmd returns crux verify receipt: offline verification
// with only the public keyring. Status 0 when the report's code is OK;
// else 1, with the code on stderr.
func newVerifyReceiptCmd(a *app) *cobra.Command {
	var cf *commonFlags
	var file, keyringFile string
	c := &cobra.Command{
		Use:         "receipt [--data DIR] [--keyring FILE] ID",
		Annotations: map[string]string{formsAnnotation: "verify receipt [--data DIR] [--keyring FILE] --file FILE"},
		Short:       "Verify a receipt offline: its body hash, signature and key",
		Long: `Verify a receipt offline: its body hash, signature and key. The keyring is
FILE, else the data directory's own key. Prints the verification report;
exits 0 when the code is OK, else 1 and prints the code on standard error.`,
		RunE: func(c *cobra.Command, pos []string) error {
			if (file == "") == (len(pos) != 1) || len(pos) > 1 {
				return usagef("verify receipt takes one receipt id, or --file FILE")
			}
			s, err := resolve(c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			var r *receipts.Receipt
			if file != "" {
				r, err = readExported(file)
			} else {
				r, err = readReceipt(a.ctx, s, a.logger, pos[0])
			}
			if err != nil {
				return err
			}
			kr, err := loadKeyring(keyringFile, s)
			if err != nil {
				return err
			}
			report := receipts.Verify(r, kr, time.Now())
			if err := writeJSON(a.stdout, report); err != nil {
				return err
			}
			if !report.OK() {
				fmt.Fprintf(a.stderr, "crux: receipt %s: %s: %s\n", r.ID, report.ErrorCode, report.ErrorMessage)
				return &reportedError{}
			}
			return nil
		},
	}
	cf = withCommon(c)
	c.Flags().StringVar(&file, "file", "", "an exported receipt `FILE` (crux export receipt)")
	c.Flags().StringVar(&keyringFile, "keyring", "", "the keyring `FILE` (crux keys export); default: the data directory's key")
	return c
}

func readExported(path string) (*receipts.Receipt, error) {
	b, err := regfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var e receipts.Exported
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%s is not an exported receipt: %w", path, err)
	}
	return e.Receipt()
}

// loadKeyring reads the keyring file, or, without one, derives the keyring
// from the signing key (--key, else the data directory's), which must
// exist: verifying with a fresh key would prove nothing.
func loadKeyring(path string, s *setup) (*receipts.Keyring, error) {
	if path != "" {
		b, err := regfile.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return receipts.ParseKeyring(b)
	}
	if s.keyFile != "" {
		signer, err := s.signer()
		if err != nil {
			return nil, err
		}
		return receipts.NewKeyring(signer.Public()), nil
	}
	dir := s.dir
	if _, err := os.Stat(filepath.Join(dir, receipts.KeyFileName)); err != nil {
		return nil, fmt.Errorf("no keyring: give --keyring FILE, or a --data directory holding %s: %w", receipts.KeyFileName, err)
	}
	signer, err := receipts.LoadOrCreateKey(dir)
	if err != nil {
		return nil, err
	}
	return receipts.NewKeyring(signer.Public()), nil
}
