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

	"github.com/crux-go/crux"
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
	var rep crux.RestoreReport
	if err := s.withSession(ctx, logger, func(sess *session) error {
		return sess.do(ctx, opRestore, restoreReq{Env: sess.env, ReceiptID: pos[0]}, &rep)
	}); err != nil {
		return err
	}
	return writeJSON(stdout, rep)
}

// purgeCmd is crux purge: purges every forget past its recovery window and
// compacts the store, printing the purge report (see host.purge), in the
// process that owns the store.
func purgeCmd(ctx context.Context, args []string, stdout io.Writer, osenv *environment, logger *slog.Logger) error {
	s, pos, err := operatorFlags("purge", args, osenv)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("purge takes no arguments, got %q", pos[0])
	}
	var rep crux.PurgeReport
	if err := s.withSession(ctx, logger, func(sess *session) error {
		return sess.do(ctx, opPurge, purgeReq{Env: sess.env}, &rep)
	}); err != nil {
		return err
	}
	return writeJSON(stdout, rep)
}
