package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/crux-go/crux/internal/regfile"
	"github.com/crux-go/crux/receipts"
	"github.com/spf13/cobra"
)

// newVerifyBundleCmd returns crux verify bundle: an audit bundle checked
// offline, with nothing but the file (and the keyring, when given). It
// opens no store. Status 0 when the bundle verifies; else 1, with the code
// on stderr.
func newVerifyBundleCmd(a *app) *cobra.Command {
	var keyringFile string
	c := &cobra.Command{
		Use:   "bundle [--keyring FILE] FILE",
		Short: "Verify an audit bundle (audit_export_bundle) offline, without a store",
		Long: `Verify an audit bundle (audit_export_bundle) offline, without a store: the
seal over every byte of the file, the manifest's signature, the members'
hashes and counts, each receipt and their links to each other and to the
chain head the bundle records. With --keyring the bundle's key must be in
FILE; without, the key the bundle carries is used and its id printed.
Prints the report; exits 0 when it verifies, else 1 with the code on
standard error (BUNDLE_SEAL_MISSING, BUNDLE_SEAL_INVALID,
BUNDLE_UNREADABLE, BUNDLE_MEMBER_MISSING, BUNDLE_MANIFEST_INVALID,
BUNDLE_VERSION_UNSUPPORTED, BUNDLE_KEY_CLASS_MISSING, PUBKEY_INVALID,
KEY_NOT_FOUND, SIG_INVALID, BUNDLE_EVENTS_HASH_MISMATCH,
BUNDLE_RECEIPTS_HASH_MISMATCH, BUNDLE_EVENTS_INVALID,
BUNDLE_RECEIPTS_INVALID, BUNDLE_COUNT_MISMATCH, BUNDLE_RECEIPT_INVALID or a
chain code).`,
		RunE: func(_ *cobra.Command, pos []string) error {
			return verifyBundle(pos, keyringFile, a.stdout, a.stderr)
		},
	}
	c.Flags().StringVar(&keyringFile, "keyring", "", "the keyring `FILE` (crux keys export) the bundle's key must be in")
	return c
}

func verifyBundle(pos []string, keyringFile string, stdout, stderr io.Writer) error {
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
	data, err := regfile.ReadFile(pos[0])
	if err != nil {
		return err
	}
	var kr *receipts.Keyring
	if keyringFile != "" {
		b, err := regfile.ReadFile(keyringFile)
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
