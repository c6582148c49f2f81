package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/crux-go/crux/receipts"
)

// subcommand checks that args start with the word want (keys export,
// export receipt, receipts list) and returns the rest.
func subcommand(cmd, want string, args []string) ([]string, error) {
	if len(args) == 0 || args[0] != want {
		return nil, usagef("%s takes the subcommand %q", cmd, want)
	}
	return args[1:], nil
}

// keysCmd is crux keys export: the public keyring of the data directory.
func keysCmd(args []string, stdout io.Writer, osenv *environment) error {
	args, err := subcommand("keys", "export", args)
	if err != nil {
		return err
	}
	var cf commonFlags
	fs := newFlagSet("keys export", &cf)
	s, err := resolveNoArgs("keys export", fs, &cf, args, osenv)
	if err != nil {
		return err
	}
	signer, err := s.signer()
	if err != nil {
		return err
	}
	return writeJSON(stdout, receipts.NewKeyring(signer.Public()))
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

// exportCmd is crux export receipt ID: a stored receipt as JSON; without
// the subcommand, crux export of memories (exportMemoriesCmd).
func exportCmd(ctx context.Context, args []string, stdout, stderr io.Writer, osenv *environment, logger *slog.Logger) error {
	if len(args) == 0 || args[0] != "receipt" {
		return exportMemoriesCmd(ctx, args, stdout, stderr, osenv, logger) // memories.go
	}
	args, err := subcommand("export", "receipt", args)
	if err != nil {
		return err
	}
	var cf commonFlags
	fs := newFlagSet("export receipt", &cf)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("export receipt takes one receipt id")
	}
	s, err := resolve(fs, &cf, osenv)
	if err != nil {
		return err
	}
	r, err := readReceipt(ctx, s, logger, pos[0])
	if err != nil {
		return err
	}
	return writeJSON(stdout, receipts.Export(r))
}

// verifyCmd is crux verify receipt: offline verification with only the
// public keyring. Status 0 when the report's code is OK; else 1, with the
// code on stderr. crux verify chain is verifyChainCmd.
func verifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer, osenv *environment, logger *slog.Logger) error {
	if len(args) > 0 && args[0] == "chain" {
		return verifyChainCmd(ctx, args[1:], stdout, stderr, osenv, logger)
	}
	if len(args) > 0 && args[0] == "output" {
		return verifyOutputCmd(args[1:], stdout, stderr, osenv)
	}
	if len(args) > 0 && args[0] == "bundle" {
		return verifyBundleCmd(args[1:], stdout, stderr) // bundle.go
	}
	if len(args) == 0 || args[0] != "receipt" {
		return usagef(`verify takes the subcommand "receipt", "chain", "output" or "bundle"`)
	}
	args = args[1:]
	var cf commonFlags
	fs := newFlagSet("verify receipt", &cf)
	file := fs.String("file", "", "an exported receipt `file` (crux export receipt)")
	keyringFile := fs.String("keyring", "", "the keyring `file` (crux keys export); default: the data directory's key")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if (*file == "") == (len(pos) != 1) || len(pos) > 1 {
		return usagef("verify receipt takes one receipt id, or --file FILE")
	}
	s, err := resolve(fs, &cf, osenv)
	if err != nil {
		return err
	}

	var r *receipts.Receipt
	if *file != "" {
		r, err = readExported(*file)
	} else {
		r, err = readReceipt(ctx, s, logger, pos[0])
	}
	if err != nil {
		return err
	}
	kr, err := loadKeyring(*keyringFile, s)
	if err != nil {
		return err
	}
	report := receipts.Verify(r, kr, time.Now())
	if err := writeJSON(stdout, report); err != nil {
		return err
	}
	if !report.OK() {
		fmt.Fprintf(stderr, "crux: receipt %s: %s: %s\n", r.ID, report.ErrorCode, report.ErrorMessage)
		return &reportedError{}
	}
	return nil
}

func readExported(path string) (*receipts.Receipt, error) {
	b, err := os.ReadFile(path)
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
		b, err := os.ReadFile(path)
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
