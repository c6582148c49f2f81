package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/crux-go/crux/receipts"
)

// verifyBundleCmd is crux verify bundle: an audit bundle checked offline,
// with nothing but the file (and the keyring, when given). It opens no
// store. Status 0 when the bundle verifies; else 1, with the code on
// stderr.
func verifyBundleCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crux verify bundle", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	keyringFile := fs.String("keyring", "", "the keyring `file` (crux keys export) the bundle's key must be in")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("verify bundle takes one bundle file")
	}
	info, err := os.Stat(pos[0])
	if err != nil {
		return err
	}
	if info.Size() > receipts.MaxBundleBytes {
		return fmt.Errorf("%s is %d bytes, more than the %d a bundle may be", pos[0], info.Size(), receipts.MaxBundleBytes)
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	var kr *receipts.Keyring
	if *keyringFile != "" {
		b, err := os.ReadFile(*keyringFile)
		if err != nil {
			return err
		}
		if kr, err = receipts.ParseKeyring(b); err != nil {
			return err
		}
	}
	rep := receipts.VerifyBundle(data, kr, time.Now())
	if err := writeJSON(stdout, rep); err != nil {
		return err
	}
	if !rep.OK() {
		fmt.Fprintf(stderr, "crux: bundle %s: %s: %s\n", pos[0], rep.ErrorCode, rep.ErrorMessage)
		return &reportedError{}
	}
	if kr == nil {
		fmt.Fprintf(stderr, "crux: bundle %s verifies with the key it carries, %s; give --keyring to require a key you trust\n",
			pos[0], rep.SignerKeyID)
	}
	return nil
}
