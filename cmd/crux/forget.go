package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/crux-go/crux"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The operator side of memory_forget: crux forget restore and crux purge.
// Both act for no agent (their receipts name the actor "operator"), so
// --agent is refused rather than ignored.

// withOperator registers the flags of an operator command on c: the
// common ones, of which --agent is refused (see resolveOperator).
func withOperator(c *cobra.Command) *commonFlags {
	cf := withCommon(c)
	_ = c.Flags().MarkHidden("agent")
	return cf
}

// resolveOperator resolves the flags of the operator command called name.
func resolveOperator(name string, fs *pflag.FlagSet, cf *commonFlags, osenv *environment) (*setup, error) {
	if fs.Changed("agent") {
		return nil, usagef("%s acts as the operator, not as an agent: --agent does not apply", name)
	}
	return resolve(fs, cf, osenv)
}

// existingStore returns the path of the data directory's store, which must
// exist: an operator command never creates an empty one.
func existingStore(dir string) (string, error) {
	path := filepath.Join(dir, dbFile)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no store at %s", path)
		}
		return "", err
	}
	return path, nil
}

// newForgetCmd returns crux forget restore RECEIPT_ID: puts back what a
// forget forgot, within its recovery window, and prints the restore
// report.
func newForgetCmd(a *app) *cobra.Command {
	var cf *commonFlags
	restore := &cobra.Command{
		Use:   "restore [--data DIR] RECEIPT_ID",
		Short: "Put back the facts a memory_forget forgot, within its recovery window",
		Long: `Put back the facts that the memory_forget with this receipt forgot, exactly
as they were, while its recovery window lasts
(CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS, default 7 days), and only once.
Mints a signed forget_restore receipt and prints the restore report as
JSON. crux forgets list lists the forgets and their state.`,
		RunE: func(c *cobra.Command, pos []string) error {
			s, err := resolveOperator("forget restore", c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			if len(pos) != 1 || pos[0] == "" {
				return usagef("forget restore takes one forget receipt id")
			}
			var rep crux.RestoreReport
			if err := s.withSession(a.ctx, a.logger, func(sess *session) error {
				return sess.do(a.ctx, opRestore, restoreReq{Env: sess.env, ReceiptID: pos[0]}, &rep)
			}); err != nil {
				return err
			}
			return writeJSON(a.stdout, rep)
		},
	}
	cf = withOperator(restore)
	return parentCmd("forget", "Restore forgotten facts", restore)
}

// newPurgeCmd returns crux purge: purges every forget past its recovery
// window and compacts the store, printing the purge report (see
// host.purge), in the process that owns the store.
func newPurgeCmd(a *app) *cobra.Command {
	var cf *commonFlags
	c := &cobra.Command{
		Use:   "purge [--data DIR]",
		Short: "Remove for good the values of every forget past its recovery window",
		Long: `Remove for good the values of every forget whose recovery window has
ended, minting a signed permanent_purge receipt per forget, then compact the
database file so that the values' bytes are gone from it. Prints the purge
report as JSON. Every command that opens the store purges what is due as
well.`,
		RunE: func(c *cobra.Command, pos []string) error {
			s, err := resolveOperator("purge", c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			if err := noArgs("purge", pos); err != nil {
				return err
			}
			var rep crux.PurgeReport
			if err := s.withSession(a.ctx, a.logger, func(sess *session) error {
				return sess.do(a.ctx, opPurge, purgeReq{Env: sess.env}, &rep)
			}); err != nil {
				return err
			}
			return writeJSON(a.stdout, rep)
		},
	}
	cf = withOperator(c)
	return c
}
