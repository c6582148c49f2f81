// Package validation checks the C2PA manifests crux's output_attest makes
// with two independent implementations of C2PA, run by Node from this
// directory (validate.mjs): @trustnxt/c2pa-ts validates a manifest against
// its asset, and c2pa-rs, the CAI's reference SDK, as WebAssembly
// (@contentauth/c2pa-wasm), checks its structure, signature and trust.
// Install them with `npm ci --ignore-scripts` here; without them the test
// skips, unless CRUX_TEST_C2PA or CI is set (.ci/run sets the first).
package validation

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/c2pa"
	"github.com/crux-go/crux/store/bolt"
)

// outcome is what validate.mjs reports of one case.
type outcome struct {
	TS struct {
		Valid   bool     `json:"valid"`
		Success []string `json:"success"`
		Failure []string `json:"failure"`
		Error   string   `json:"error"`
	} `json:"ts"`
	RS struct {
		Untrusted rsResult `json:"untrusted"`
		Trusted   rsResult `json:"trusted"`
		Binding   struct {
			Alg               string `json:"alg"`
			Exclusions        *int   `json:"exclusions"`
			ManifestHashHex   string `json:"manifest_hash_hex"`
			AssetHashHex      string `json:"asset_hash_hex"`
			Match             bool   `json:"match"`
			DigitalSourceType string `json:"digital_source_type"`
			SignatureAlg      string `json:"signature_algorithm"`
		} `json:"binding"`
	} `json:"rs"`
}

type rsResult struct {
	State   string   `json:"state"`
	Success []string `json:"success"`
	Failure []string `json:"failure"`
	Error   string   `json:"error"`
}

// sidecarArtefact is the one failure c2pa-rs reports for every sidecar
// read alone: it hashes the .c2pa bytes as the asset.
const sidecarArtefact = "assertion.dataHash.mismatch"

type testCase struct {
	Name     string `json:"name"`
	Manifest string `json:"manifest"`
	Asset    string `json:"asset"`
	Mime     string `json:"mime"`
}

// node returns the node binary, or skips (fails under CI) when node or the
// validators are missing.
func node(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CRUX_TEST_C2PA") != "" || os.Getenv("CI") != "" {
			t.Fatalf("%s; CI installs them with: cd test/c2pa && npm ci --ignore-scripts", why)
		}
		t.Skipf("%s (cd test/c2pa && npm ci --ignore-scripts)", why)
	}
	bin, err := exec.LookPath("node")
	if err != nil {
		missing("no node on PATH")
	}
	for _, p := range []string{"@trustnxt/c2pa-ts", "@contentauth/c2pa-wasm"} {
		if _, err := os.Stat(filepath.Join("node_modules", p, "package.json")); err != nil {
			missing(p + " is not installed")
		}
	}
	return bin
}

func TestIndependentValidators(t *testing.T) {
	nodeBin := node(t)
	work := t.TempDir()
	dataDir, root := filepath.Join(work, "data"), filepath.Join(work, "root")
	require.NoError(t, os.MkdirAll(root, 0o700))

	// A server with output_attest on, its root CA in the data directory
	// and a content root, as the crux command runs it.
	db, err := bolt.Open(filepath.Join(work, "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	ca, err := c2pa.LoadOrCreateCA(dataDir, time.Now())
	require.NoError(t, err)
	flags := crux.DefaultFlags()
	flags.C2PAOutput = true
	srv, err := crux.NewServer(db, &crux.Options{Flags: &flags, AttestCA: ca, AttestRoot: root})
	require.NoError(t, err)
	defer srv.Close()
	agent := crux.Caller{Agent: "writer", Authenticated: true}
	callTool := func(name, args string) map[string]any {
		res, err := srv.CallTool(context.Background(), agent, name, json.RawMessage(args))
		require.NoError(t, err, name)
		require.False(t, res.IsError, "%s: %v", name, res.Content)
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	crown := callTool("record_decision", `{"action":"publish the report","rationale":"reviewed"}`)["receipt_id"].(string)

	text := bytes.Repeat([]byte("The service answered 200 OK for every probe.\n"), 24)
	require.NoError(t, os.WriteFile(filepath.Join(root, "report.md"), text, 0o600))
	binary := make([]byte, 64<<10)
	_, _ = rand.Read(binary)

	manifests := map[string][]byte{}
	attest := func(name, args string) {
		m := callTool("output_attest", args)["manifest"].(map[string]any)
		b, err := base64.StdEncoding.DecodeString(m["manifest_jumbf_base64"].(string))
		require.NoError(t, err)
		manifests[name] = b
	}
	attest("text", fmt.Sprintf(`{"receipt_id":%q,"content_path":"report.md","content_type":"text/markdown"}`, crown))
	attest("binary", fmt.Sprintf(`{"receipt_id":%q,"content_bytes_base64":%q,"content_type":"application/octet-stream"}`,
		crown, base64.StdEncoding.EncodeToString(binary)))

	tamperedAsset := bytes.Clone(text)
	tamperedAsset[len(tamperedAsset)/2] ^= 0x20
	assertionFlip := bytes.Clone(manifests["text"])
	i := bytes.Index(assertionFlip, []byte("signer_passport"))
	require.Greater(t, i, 0)
	assertionFlip[i] ^= 0x20 // "Signer_passport": the receipt assertion changes
	sigFlip := bytes.Clone(manifests["text"])
	sigFlip[len(sigFlip)-1] ^= 0x01 // the last byte of the Ed25519 signature

	write := func(name string, b []byte) string {
		p := filepath.Join(work, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	assets := map[string][]byte{"text": text, "binary": binary, "tampered": tamperedAsset, "assertion-flip": text, "signature-flip": text}
	stores := map[string][]byte{"text": manifests["text"], "binary": manifests["binary"], "tampered": manifests["text"],
		"assertion-flip": assertionFlip, "signature-flip": sigFlip}
	mimes := map[string]string{"binary": "application/octet-stream"}
	var cases []testCase
	for _, name := range []string{"text", "binary", "tampered", "assertion-flip", "signature-flip"} {
		mime := mimes[name]
		if mime == "" {
			mime = "text/markdown"
		}
		cases = append(cases, testCase{Name: name, Manifest: write(name+".c2pa", stores[name]), Asset: write(name+".asset", assets[name]), Mime: mime})
	}
	spec, err := json.Marshal(map[string]any{"root_pem": filepath.Join(dataDir, c2pa.CACertFileName), "cases": cases})
	require.NoError(t, err)
	specFile := write("cases.json", spec)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "validate.mjs", specFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	var got struct {
		Node  string             `json:"node"`
		Cases map[string]outcome `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	t.Logf("validated with node %s", got.Node)

	// crux's own verifier, beside them.
	cruxCode := func(name string) c2pa.Code {
		rep, err := c2pa.Verify(stores[name], bytes.NewReader(assets[name]), c2pa.VerifyOptions{Roots: ca.Roots()})
		require.NoError(t, err)
		return rep.Code
	}

	for _, name := range []string{"text", "binary"} {
		t.Run(name, func(t *testing.T) {
			o := got.Cases[name]
			require.Empty(t, o.TS.Error)
			assert.True(t, o.TS.Valid, "c2pa-ts rejects a good manifest: %v", o.TS.Failure)
			assert.Empty(t, o.TS.Failure)
			for _, c := range []string{"claimSignature.validated", "assertion.hashedURI.match", "assertion.dataHash.match", "signingCredential.trusted"} {
				assert.Contains(t, o.TS.Success, c, "c2pa-ts")
			}
			require.Empty(t, o.RS.Trusted.Error)
			assert.Equal(t, []string{sidecarArtefact}, o.RS.Trusted.Failure, "c2pa-rs with the root as trust anchor")
			for _, c := range []string{"signingCredential.trusted", "claimSignature.validated", "claimSignature.insideValidity", "assertion.hashedURI.match"} {
				assert.Contains(t, o.RS.Trusted.Success, c, "c2pa-rs")
			}
			assert.ElementsMatch(t, []string{"signingCredential.untrusted", sidecarArtefact}, o.RS.Untrusted.Failure,
				"c2pa-rs without trust anchors: valid but untrusted")
			sum := sha256.Sum256(assets[name])
			b := o.RS.Binding
			assert.True(t, b.Match)
			assert.Equal(t, hex.EncodeToString(sum[:]), b.ManifestHashHex, "the data hash c2pa-rs parsed is the asset's SHA-256")
			assert.Equal(t, "sha256", b.Alg)
			require.NotNil(t, b.Exclusions)
			assert.Zero(t, *b.Exclusions)
			assert.Equal(t, c2pa.SourceTrainedAlgorithmic, b.DigitalSourceType)
			assert.Equal(t, "ed25519", b.SignatureAlg)
			assert.Equal(t, c2pa.OK, cruxCode(name))
		})
	}
	t.Run("tampered asset", func(t *testing.T) {
		o := got.Cases["tampered"]
		assert.False(t, o.TS.Valid)
		assert.Contains(t, o.TS.Failure, "assertion.dataHash.mismatch")
		assert.False(t, o.RS.Binding.Match)
		assert.Equal(t, []string{sidecarArtefact}, o.RS.Trusted.Failure, "the manifest itself is intact")
		assert.Equal(t, c2pa.DataHashMismatch, cruxCode("tampered"))
	})
	t.Run("flipped assertion byte", func(t *testing.T) {
		o := got.Cases["assertion-flip"]
		assert.False(t, o.TS.Valid)
		assert.Contains(t, o.TS.Failure, "assertion.hashedURI.mismatch")
		assert.Contains(t, o.RS.Trusted.Failure, "assertion.hashedURI.mismatch")
		assert.Equal(t, c2pa.AssertionHashMismatch, cruxCode("assertion-flip"))
	})
	t.Run("flipped signature byte", func(t *testing.T) {
		o := got.Cases["signature-flip"]
		assert.False(t, o.TS.Valid)
		assert.Contains(t, o.TS.Failure, "claimSignature.mismatch")
		assert.Contains(t, o.RS.Trusted.Failure, "claimSignature.mismatch")
		assert.Equal(t, c2pa.SigInvalid, cruxCode("signature-flip"))
	})
}
