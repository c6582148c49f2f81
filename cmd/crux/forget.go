package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// The operator side of memory_forget: crux forget restore and crux purge.
// Both act for no agent (their receipts name the actor "operator"), so
// --agent is refused rather than ignored.

// operatorFlags parses the flags of an operator command: --data, and
// those that register adds to the flag set.
func operatorFlags(name string, args []string, osenv *environment, register ...func(*flag.FlagSet)) (*setup, []string, error) {
	var cf commonFlags
	fset := newFlagSet(name, &cf)
	for _, r := range register {
		r(fset)
	}
	pos, err := parseArgs(fset, args)
	if err != nil {
		return nil, nil, err
	}
	agent := false
	fset.Visit(func(f *flag.Flag) { agent = agent || f.Name == "agent" })
	if agent {
		return nil, nil, usagef("%s acts as the operator, not as an agent: --agent does not apply", name)
	}
	s, err := resolve(fset, &cf, osenv)
	if err != nil {
		return nil, nil, err
	}
	return s, pos, nil
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

// openExisting opens the store of the data directory dir, which must exist
// (see existingStore); read-only when readOnly is set. Another process
// holding it is a lockedError.
func openExisting(dir string, readOnly bool) (*bolt.DB, error) {
	path, err := existingStore(dir)
	if err != nil {
		return nil, err
	}
	var opts *bolt.Options
	if readOnly {
		opts = &bolt.Options{ReadOnly: true}
	}
	db, err := bolt.Open(path, opts)
	if errors.Is(err, bolt.ErrLocked) {
		return nil, &lockedError{path: path, err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	return db, nil
}

// forgetCmd is crux forget restore RECEIPT_ID: puts back what a forget
// forgot, within its recovery window, and prints the restore report.
func forgetCmd(ctx context.Context, args []string, stdout io.Writer, osenv *environment, logger *slog.Logger) error {
	args, err := subcommand("forget", "restore", args)
	if err != nil {
		return err
	}
	s, pos, err := operatorFlags("forget restore", args, osenv)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		return usagef("forget restore takes one forget receipt id")
	}
	if _, err := existingStore(s.dir); err != nil {
		return err
	}
	srv, closeStore, err := s.open(logger)
	if err != nil {
		return err
	}
	rep, err := srv.RestoreForget(ctx, pos[0])
	if cerr := closeStore(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
	}
	if err != nil {
		return err
	}
	return writeJSON(stdout, rep)
}

// purgeCmd is crux purge: purges every forget past its recovery window and
// compacts the store, printing the purge report. Opening the server already
// purges (crux.NewServer does, as every command that opens the store), so
// the report also lists the forgets that were due when the command started
// and that the opening purged.
func purgeCmd(ctx context.Context, args []string, stdout io.Writer, osenv *environment, logger *slog.Logger) (err error) {
	s, pos, err := operatorFlags("purge", args, osenv)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("purge takes no arguments, got %q", pos[0])
	}
	db, err := openExisting(s.dir, false)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
		}
	}()
	var due []string
	if err := db.View(ctx, func(tx store.Tx) error {
		var err error
		due, err = store.DueForgets(tx, time.Now())
		return err
	}); err != nil {
		return err
	}
	signer, router, err := s.trust()
	if err != nil {
		return err
	}
	flags := s.flags
	srv, err := crux.NewServer(db, &crux.Options{Flags: &flags, Logger: logger, Signer: signer, Router: router})
	if err != nil {
		return err
	}
	defer srv.Close()
	rep, err := srv.Purge(ctx)
	if err != nil {
		return err
	}
	var onOpen []crux.PurgedForget
	for _, id := range due {
		if slices.ContainsFunc(rep.Purged, func(p crux.PurgedForget) bool { return p.ForgetReceiptID == id }) {
			continue
		}
		st, err := srv.ForgetStatus(ctx, id)
		if err != nil {
			return err
		}
		if st.State == "purged" {
			onOpen = append(onOpen, crux.PurgedForget{
				ForgetReceiptID: id, PurgeReceiptID: st.PurgeReceiptID, TenantID: st.TenantID,
				PurgedFactIDs: st.FactIDs, RecoveryWindowEndedAt: st.RecoveryWindowEndsAt,
			})
		}
	}
	if len(onOpen) > 0 {
		// The opening purge compacted, or left the work to Purge, which
		// would have failed had it not succeeded.
		rep.Purged = append(onOpen, rep.Purged...)
		rep.Compacted = rep.Compacted || !rep.CompactionUnsupported
	}
	return writeJSON(stdout, rep)
}
