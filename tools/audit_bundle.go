package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// BYO audit trail: audit_export_bundle.
//
// Decisions taken where the CueCrux tool contract is silent:
//
//   - The bundle holds the caller's tenant only: the versions of its
//     shared facts stored in the window (deleted ones left out, agents'
//     private facts never included) and the signed receipts of its chain
//     created in the window, with the chain head as an anchor. Its format,
//     and what crux verify bundle checks, is receipts.Bundle's.
//   - scope.include_reserved adds crux's own reserved entities and needs an
//     operator passport (trusted or above); anyone else asking for it is
//     refused with -32003 rather than silently served less.
//   - Facts are selected oldest first while their token counts fit
//     token_budget (the first always fits), at most MaxBundleFacts of
//     them; receipts at most MaxBundleReceipts. Either cut is reported
//     (facts_truncated, receipts_truncated).
//   - Bundles are written to CORECRUXD_AUDIT_EXPORT_DIR, else to exports/
//     in the server's data directory (Options.DataDir); with neither the
//     tool refuses. Each file is audit-<bundle_id>.tar.zst, mode 0600,
//     written to a temporary file and renamed into place.
//   - Each export mints a signed receipt (kind audit_export) naming the
//     bundle and the SHA-256 of its file, so the tenant's chain records
//     every bundle made.
//   - The export directory is bounded, so that no agent can fill the
//     volume the store lives on: bundles are there to be collected, and
//     one older than ExportRetention is removed by the next export; past
//     that, an export that would make the directory hold more than
//     MaxExportBundles bundles or MaxExportBytes bytes is refused (an
//     isError result saying when the oldest bundle expires), never
//     written by removing a younger bundle.

// Bounds of an audit bundle.
const (
	// MaxBundleReceipts caps the receipts of one bundle.
	MaxBundleReceipts = 10000
	// MaxBundleFacts caps the fact versions of one bundle.
	MaxBundleFacts = 100000
	// MaxBundleTokenBudget is the largest token_budget audit_export_bundle
	// takes.
	MaxBundleTokenBudget = 4 << 20
	// maxBundleScan caps the index entries one export examines.
	maxBundleScan = 1000000
)

// Bounds of the export directory (see admitBundle).
const (
	// ExportRetention is how long a bundle stays in the export directory
	// before an export removes it.
	ExportRetention = 7 * 24 * time.Hour
	// MaxExportBundles caps the bundles the export directory holds.
	MaxExportBundles = 100
	// MaxExportBytes caps the bytes of the bundles it holds.
	MaxExportBytes = 1 << 30
)

// exportLimits are the bounds admitBundle applies.
type exportLimits struct {
	retention time.Duration
	bundles   int
	bytes     int64
}

var defaultExportLimits = exportLimits{ExportRetention, MaxExportBundles, MaxExportBytes}

// exportMu serialises admitting and writing bundles, so that concurrent
// exports cannot pass the bounds together.
var exportMu sync.Mutex

// admitBundle makes room for a bundle of size bytes in dir at now, under
// lim: it removes the bundles (audit-*.tar.zst) whose modification time is
// lim.retention or more before now, and the temporary files an
// interrupted export left (an hour old), then refuses, with an error
// meant for the caller, a bundle that would take the directory past
// lim.bundles bundles or lim.bytes bytes. The caller holds exportMu.
func admitBundle(dir string, size int, now time.Time, lim exportLimits) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var n int
	var total int64
	var oldest time.Time
	for _, e := range entries {
		name := e.Name()
		bundle := strings.HasPrefix(name, "audit-") && strings.HasSuffix(name, ".tar.zst")
		temp := strings.HasPrefix(name, ".audit-") && strings.HasSuffix(name, ".tmp")
		if !e.Type().IsRegular() || !bundle && !temp {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		age := now.Sub(info.ModTime())
		if bundle && age >= lim.retention || temp && age >= time.Hour {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if bundle {
			n++
			total += info.Size()
			if oldest.IsZero() || info.ModTime().Before(oldest) {
				oldest = info.ModTime()
			}
		}
	}
	if n+1 > lim.bundles || total+int64(size) > lim.bytes {
		return fmt.Errorf("the export directory %s holds %d bundles (%d bytes); with this one (%d bytes) it would pass its bounds "+
			"of %d bundles and %d bytes. A bundle is removed %s after it was written (the oldest here at %s); "+
			"an operator may collect bundles from the directory sooner",
			dir, n, total, size, lim.bundles, lim.bytes, lim.retention, oldest.Add(lim.retention).UTC().Format(time.RFC3339))
	}
	return nil
}

// KindAuditExport is the kind of the receipt an export mints.
const KindAuditExport = "audit_export"

type auditExportArgs struct {
	TokenBudget int               `json:"token_budget" schema:"maximum=4194304;minimum=1" doc:"Caps the facts swept, oldest first."`
	SinceTS     string            `json:"since_ts,omitempty" schema:"minLength=1"`
	UntilTS     string            `json:"until_ts,omitempty" schema:"minLength=1"`
	Scope       *auditExportScope `json:"scope,omitempty"`
}

type auditExportScope struct {
	EntityPrefix    string `json:"entity_prefix,omitempty"`
	IncludeReserved bool   `json:"include_reserved,omitempty" schema:"default=false" doc:"Needs a trusted passport."`
}

// AuditExportBundleOutput is what audit_export_bundle returns.
type AuditExportBundleOutput struct {
	BundleID             string               `json:"bundle_id"`
	BytesPath            string               `json:"bytes_path"`
	Bytes                int                  `json:"bytes"`
	BundleSHA256         string               `json:"bundle_sha256"`
	ManifestSignatureB64 string               `json:"manifest_signature_b64"`
	SignerKeyID          string               `json:"signer_key_id"`
	KeyClass             string               `json:"key_class"`
	FactCount            int                  `json:"fact_count"`
	FactsInWindow        int                  `json:"facts_in_window"`
	FactsTruncated       bool                 `json:"facts_truncated"`
	ReceiptCount         int                  `json:"receipt_count"`
	ReceiptsTruncated    bool                 `json:"receipts_truncated"`
	TokensSwept          int                  `json:"tokens_swept"`
	Scope                receipts.BundleScope `json:"scope"`
	Chain                receipts.BundleChain `json:"chain"`
	Since                string               `json:"since"`
	Until                string               `json:"until"`
	EventsJSONLSHA256    string               `json:"events_jsonl_sha256"`
	ReceiptsCBORSHA256   string               `json:"receipts_cbor_sha256"`
	ExportReceiptID      string               `json:"export_receipt_id"`
}

// exportPayload is the payload of an audit_export receipt.
type exportPayload struct {
	BundleID           string `cbor:"bundle_id"`
	BundleSHA256       string `cbor:"bundle_sha256"`
	EventsJSONLSHA256  string `cbor:"events_jsonl_sha256"`
	ReceiptsCBORSHA256 string `cbor:"receipts_cbor_sha256"`
	FactCount          int    `cbor:"fact_count"`
	ReceiptCount       int    `cbor:"receipt_count"`
	Since              string `cbor:"since"`
	Until              string `cbor:"until"`
	File               string `cbor:"file"`
}

func (d *Deps) auditExportBundle() *toolkit.Tool {
	const name = "audit_export_bundle"
	return &toolkit.Tool{
		Name:        name,
		Description: "Export a signed tar.zst of your tenant's shared fact versions and receipts in [since_ts, until_ts). Flag AUDIT_EXPORT.",
		Annotations: toolkit.Annotations{Title: "Export audit bundle"},
		Out:         toolkit.OutputOf[AuditExportBundleOutput](),
		Gate:        memFlagGate(toolkit.CodeCapabilityDenied, name, feature.EnvAuditExport, func(f *feature.Flags) bool { return f.AuditExport }),
		Run:         toolkit.Bind(name, d.runAuditExportBundle),
	}
}

// runAuditExportBundle runs one audit_export_bundle call.
func (d *Deps) runAuditExportBundle(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *auditExportArgs) (*toolkit.Result, error) {
	const name = "audit_export_bundle"
	now := env.Time()
	since, until, scope, err := exportArgs(name, c, in, now)
	if err != nil {
		return nil, err
	}
	dir, err := d.exportDir(env)
	if err != nil {
		return toolkit.ErrorResult("%s", err.Error()), nil
	}

	var sel store.ExportSelection
	var win *receipts.Window
	err = env.Store.View(ctx, func(tx store.Tx) error {
		if scope.IncludeReserved {
			if err := requireTier(tx, name, "scope.include_reserved", c, store.TierTrusted); err != nil {
				return err
			}
		}
		var err error
		sel, err = store.SelectExport(tx, store.ExportQuery{
			Tenant: scope.TenantID, EntityPrefix: scope.EntityPrefix, IncludeReserved: scope.IncludeReserved,
			Since: since, Until: until, TokenBudget: in.TokenBudget, MaxFacts: MaxBundleFacts, MaxScan: maxBundleScan,
		})
		if err != nil {
			return err
		}
		win, err = receipts.ChainWindow(tx, scope.TenantID, since, until, MaxBundleReceipts)
		return err
	})
	if err != nil {
		return nil, err
	}

	id := store.NewID("bundle-")
	b := newAuditBundle(id, since, until, now, scope, sel, win)
	var buf bytes.Buffer
	m, err := receipts.WriteBundle(&buf, b, env.Signer)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "audit-"+id+".tar.zst")
	exportMu.Lock()
	if err := admitBundle(dir, buf.Len(), now, defaultExportLimits); err != nil {
		exportMu.Unlock()
		return toolkit.ErrorResult("%s: %v", name, err), nil
	}
	err = writeFileAtomic(dir, path, buf.Bytes())
	exportMu.Unlock()
	if err != nil {
		return toolkit.ErrorResult("audit_export_bundle could not write the bundle to %s: %v", dir, err), nil
	}
	sum := sha256.Sum256(buf.Bytes())
	out := AuditExportBundleOutput{
		BundleID: id, BytesPath: path, Bytes: buf.Len(), BundleSHA256: hex.EncodeToString(sum[:]),
		ManifestSignatureB64: m.SignatureB64, SignerKeyID: m.SignerKeyID, KeyClass: m.KeyClass,
		FactCount: m.FactCount, FactsInWindow: sel.Matched, FactsTruncated: m.FactsTruncated,
		ReceiptCount: m.ReceiptCount, ReceiptsTruncated: m.ReceiptsTruncated, TokensSwept: sel.Tokens,
		Scope: scope, Chain: m.Chain, Since: m.Since, Until: m.Until,
		EventsJSONLSHA256: m.EventsJSONLSHA256, ReceiptsCBORSHA256: m.ReceiptsCBORSHA256,
	}
	out.ExportReceiptID, err = appendReceipt(ctx, env, scope.TenantID, KindAuditExport, c.Name(), exportPayload{
		BundleID: id, BundleSHA256: out.BundleSHA256, EventsJSONLSHA256: m.EventsJSONLSHA256,
		ReceiptsCBORSHA256: m.ReceiptsCBORSHA256, FactCount: m.FactCount, ReceiptCount: m.ReceiptCount,
		Since: m.Since, Until: m.Until, File: filepath.Base(path),
	}, now)
	if err != nil {
		_ = os.Remove(path) // no receipt, no bundle
		return nil, err
	}
	return toolkit.JSONResult(out)
}

// exportArgs is the window [since, until) and the scope an export
// covers: since defaults to the Unix epoch and until to now, and an
// argument that is not an RFC 3339 time, an empty window or a scope's
// entity prefix that is not a name is refused.
func exportArgs(name string, c toolkit.Caller, in *auditExportArgs, now time.Time) (since, until time.Time, scope receipts.BundleScope, err error) {
	since, until = time.Unix(0, 0).UTC(), now
	if in.SinceTS != "" {
		if since, err = time.Parse(time.RFC3339Nano, in.SinceTS); err != nil {
			return since, until, scope, toolkit.InvalidParams(name, "since_ts", "must be an RFC 3339 time")
		}
	}
	if in.UntilTS != "" {
		if until, err = time.Parse(time.RFC3339Nano, in.UntilTS); err != nil {
			return since, until, scope, toolkit.InvalidParams(name, "until_ts", "must be an RFC 3339 time")
		}
	}
	if !since.Before(until) {
		return since, until, scope, toolkit.InvalidParams(name, "since_ts", "must be before until_ts (default: now)")
	}
	scope = receipts.BundleScope{TenantID: c.TenantID(), Caller: c.Name()}
	if in.Scope != nil {
		if err := checkName(name, "scope.entity_prefix", in.Scope.EntityPrefix); err != nil {
			return since, until, scope, err
		}
		scope.EntityPrefix, scope.IncludeReserved = in.Scope.EntityPrefix, in.Scope.IncludeReserved
	}
	return since, until, scope, nil
}

// newAuditBundle is the bundle of the selected fact versions and the
// chain window's receipts, with the manifest that describes them.
func newAuditBundle(id string, since, until, now time.Time, scope receipts.BundleScope, sel store.ExportSelection, win *receipts.Window) *receipts.Bundle {
	b := &receipts.Bundle{
		Manifest: receipts.BundleManifest{
			BundleID: id, Since: since.UTC().Format(time.RFC3339Nano), Until: until.UTC().Format(time.RFC3339Nano),
			GeneratedAt: now.Format(time.RFC3339Nano), Scope: scope, Chain: win.Anchor(scope.TenantID),
			FactsTruncated: sel.Truncated, ReceiptsTruncated: win.Truncated,
		},
		Events:   make([]receipts.BundleEvent, len(sel.Facts)),
		Receipts: win.Receipts,
	}
	for i, f := range sel.Facts {
		b.Events[i] = receipts.BundleEvent{
			FactID: f.ID, Entity: f.Entity, Key: f.Key, Value: f.Value, SourceReceipt: f.SourceReceipt,
			Confidence: f.Confidence, StoredAt: f.StoredAt.UTC().Format(time.RFC3339Nano), Tokens: f.Tokens,
			Deleted: f.Deleted, Version: f.Version, Supersedes: f.Supersedes, SupersededBy: f.SupersededBy,
		}
	}
	return b
}

// exportDir is where bundles go: CORECRUXD_AUDIT_EXPORT_DIR, else
// exports/ in the data directory.
func (d *Deps) exportDir(env *toolkit.Env) (string, error) {
	if env.Flags.AuditExportDir != "" {
		return env.Flags.AuditExportDir, nil
	}
	if d.DataDir != "" {
		return filepath.Join(d.DataDir, "exports"), nil
	}
	return "", errors.New("audit_export_bundle has nowhere to write the bundle: set " + feature.EnvAuditExportDir +
		", or give the server a data directory")
}

// writeFileAtomic writes data to path (in dir, created 0700 if needed) as
// a file of mode 0600: a temporary file in dir, synced, then renamed.
func writeFileAtomic(dir, path string, data []byte) (err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".audit-*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("renaming the bundle into place: %w", err)
	}
	return nil
}
