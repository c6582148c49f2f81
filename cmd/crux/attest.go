package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/c2pa"
	"github.com/crux-go/crux/internal/regfile"
	"github.com/crux-go/crux/receipts"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// maxManifestFile bounds the manifest file crux verify output reads: a
// manifest crux writes is a few KB; a saved output_attest answer is a
// little more.
const maxManifestFile = 16 << 20

// Codes crux verify output adds to those of package c2pa, for --receipt.
const (
	codeReceiptMismatch = "RECEIPT_MISMATCH" // the receipt given is not the one the manifest names
	codeReceiptInvalid  = "RECEIPT_INVALID"  // the receipt given does not verify
)

// outputReport is what crux verify output prints.
type outputReport struct {
	c2pa.Report
	// ReceiptCheck is the check of --receipt, when given.
	ReceiptCheck *receiptCheck `json:"receipt_check,omitempty"`
}

type receiptCheck struct {
	ReceiptID string          `json:"receipt_id"`
	Code      string          `json:"code"`
	Message   string          `json:"message,omitempty"`
	Report    receipts.Report `json:"report"`
}

// newVerifyOutputCmd returns crux verify output MANIFEST ASSET: the
// offline check of a C2PA manifest made by output_attest against the
// asset's bytes, its chain against the data directory's root CA (or
// --roots), and with --receipt the receipt it binds. Status 0 when
// everything holds; else 1, with the code on stderr.
func newVerifyOutputCmd(a *app) *cobra.Command {
	var cf *commonFlags
	var o outputFlags
	c := &cobra.Command{
		Use:   "output [--data DIR] [--roots FILE] [--receipt FILE] [--keyring FILE] MANIFEST ASSET",
		Short: "Verify a C2PA manifest made by output_attest against the asset's bytes",
		Long: `Verify a C2PA manifest made by output_attest against the asset's bytes,
offline: its structure, every assertion's hash, the signature over the
claim, the signing certificate's profile and its chain to the trust anchors
(FILE, else DIR/c2pa-ca.pem, the data directory's root CA), and the asset's
SHA-256. MANIFEST is the .c2pa file (manifest_jumbf_base64 decoded), its
base64, or the output_attest answer saved as JSON. With --receipt, the
exported receipt must verify (with the keyring, else the data directory's
key) and be the one the manifest binds. Prints the report as JSON; exits 0
when every check holds, else 1 and prints the code (DATA_HASH_MISMATCH,
SIG_INVALID, CERT_UNTRUSTED, ...) on standard error.`,
		RunE: func(c *cobra.Command, pos []string) error {
			return verifyOutput(c.Flags(), cf, &o, pos, a.stdout, a.stderr, a.env)
		},
	}
	cf = withCommon(c)
	c.Flags().StringVar(&o.roots, "roots", "", "trust anchors, a PEM `FILE` of certificates; default: the data directory's "+c2pa.CACertFileName)
	c.Flags().StringVar(&o.receipt, "receipt", "", "an exported receipt `FILE` (crux export receipt) that the manifest must bind")
	c.Flags().StringVar(&o.keyring, "keyring", "", "the keyring `FILE` that verifies --receipt; default: the data directory's key")
	return c
}

// outputFlags are the flags of crux verify output.
type outputFlags struct{ roots, receipt, keyring string }

func verifyOutput(fs *pflag.FlagSet, cf *commonFlags, o *outputFlags, pos []string, stdout, stderr io.Writer, osenv *environment) error {
	rootsFile, receiptFile, keyringFile := &o.roots, &o.receipt, &o.keyring
	var err error
	if len(pos) != 2 {
		return usagef("verify output takes a manifest file and the asset file, got %d arguments", len(pos))
	}
	// The data directory is read only for what no flag names.
	s := &setup{}
	if *rootsFile == "" || *receiptFile != "" && *keyringFile == "" {
		if s, err = resolve(fs, cf, osenv); err != nil {
			return err
		}
	}
	manifest, err := readManifest(pos[0])
	if err != nil {
		return err
	}
	rootsPath := *rootsFile
	if rootsPath == "" {
		rootsPath = filepath.Join(s.dir, c2pa.CACertFileName)
		if _, err := os.Stat(rootsPath); err != nil {
			return fmt.Errorf("no trust anchors: give --roots FILE, or a --data directory holding %s: %w", c2pa.CACertFileName, err)
		}
	}
	pemBytes, err := regfile.ReadFile(rootsPath)
	if err != nil {
		return err
	}
	roots, err := c2pa.ParseRoots(pemBytes)
	if err != nil {
		return fmt.Errorf("%s: %w", rootsPath, err)
	}
	asset, err := regfile.Open(pos[1])
	if err != nil {
		return err
	}
	defer asset.Close()
	now := time.Now()
	rep, err := c2pa.Verify(manifest, asset, c2pa.VerifyOptions{Roots: roots, Now: now})
	if err != nil {
		return err
	}
	out := outputReport{Report: rep}
	code, msg := string(rep.Code), rep.Message
	if *receiptFile != "" {
		r, err := readExported(*receiptFile)
		if err != nil {
			return err
		}
		kr, err := loadKeyring(*keyringFile, s)
		if err != nil {
			return err
		}
		out.ReceiptCheck = checkBoundReceipt(r, rep.Receipt, kr, now)
		if out.ReceiptCheck.Code != string(c2pa.OK) && code == string(c2pa.OK) {
			code, msg = out.ReceiptCheck.Code, out.ReceiptCheck.Message
		}
	}
	if err := writeJSON(stdout, out); err != nil {
		return err
	}
	if code != string(c2pa.OK) {
		fmt.Fprintf(stderr, "crux: output %s: %s: %s\n", pos[1], code, msg)
		return &reportedError{}
	}
	return nil
}

// checkBoundReceipt checks that r verifies and is the receipt the
// manifest's receipt assertion names, by id and body hash.
func checkBoundReceipt(r *receipts.Receipt, bound *c2pa.ReceiptReport, kr *receipts.Keyring, now time.Time) *receiptCheck {
	rc := &receiptCheck{ReceiptID: r.ID, Report: receipts.Verify(r, kr, now), Code: string(c2pa.OK)}
	sum := blake3.Sum256(r.Body)
	switch {
	case !rc.Report.OK():
		rc.Code, rc.Message = codeReceiptInvalid, fmt.Sprintf("receipt %s: %s: %s", r.ID, rc.Report.ErrorCode, rc.Report.ErrorMessage)
	case bound == nil:
		rc.Code, rc.Message = codeReceiptMismatch, "the manifest has no crux receipt assertion"
	case bound.ReceiptID != r.ID:
		rc.Code, rc.Message = codeReceiptMismatch, fmt.Sprintf("the manifest binds receipt %s, not %s", bound.ReceiptID, r.ID)
	case bound.ReceiptBodyBLAKE3 != hex.EncodeToString(sum[:]):
		rc.Code, rc.Message = codeReceiptMismatch, fmt.Sprintf("the manifest binds another body of receipt %s (BLAKE3 %s, the file's is %x)",
			r.ID, bound.ReceiptBodyBLAKE3, sum)
	}
	return rc
}

// readManifest reads a manifest store from path: the .c2pa bytes, their
// base64, or a saved output_attest answer (its structured content, or the
// whole result object crux call prints), whose
// manifest.manifest_jumbf_base64 holds it.
func readManifest(path string) ([]byte, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifestFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxManifestFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a manifest", path, maxManifestFile)
	}
	if len(b) >= 8 && string(b[4:8]) == "jumb" {
		return b, nil
	}
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '{' {
		var doc struct {
			Manifest *struct {
				JUMBF string `json:"manifest_jumbf_base64"`
			} `json:"manifest"`
			StructuredContent *struct {
				Manifest *struct {
					JUMBF string `json:"manifest_jumbf_base64"`
				} `json:"manifest"`
			} `json:"structuredContent"`
		}
		if err := json.Unmarshal(t, &doc); err != nil {
			return nil, fmt.Errorf("%s is JSON but not an output_attest answer: %w", path, err)
		}
		switch {
		case doc.Manifest != nil:
			t = []byte(doc.Manifest.JUMBF)
		case doc.StructuredContent != nil && doc.StructuredContent.Manifest != nil:
			t = []byte(doc.StructuredContent.Manifest.JUMBF)
		default:
			return nil, fmt.Errorf("%s is JSON without manifest.manifest_jumbf_base64", path)
		}
	}
	m, err := base64.StdEncoding.DecodeString(string(t))
	if err != nil {
		return nil, errors.New(path + " is neither a C2PA manifest store (.c2pa), nor its base64, nor an output_attest answer")
	}
	return m, nil
}
