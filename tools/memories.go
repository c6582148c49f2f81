package tools

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/memio"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// kindMemoryImport is the kind of the receipt of an import batch.
const kindMemoryImport = "memory_import"

// memoryImportReceipt is the payload of a memory_import receipt: what one
// batch of an import wrote, in the transaction that wrote it.
type memoryImportReceipt struct {
	Source    string `cbor:"source" json:"source"`
	FirstLine int    `cbor:"first_line" json:"first_line"`
	LastLine  int    `cbor:"last_line" json:"last_line"`
	// Imported counts the records written, by type; Unchanged and
	// Conflicts the records of the batch left as the store had them.
	Imported  map[string]int `cbor:"imported" json:"imported"`
	Unchanged int            `cbor:"unchanged" json:"unchanged"`
	Conflicts int            `cbor:"conflicts" json:"conflicts"`
	// ImportedIDsHash is the hex BLAKE3-256 of the ids of the records
	// written, in order, each followed by "\n".
	ImportedIDsHash string `cbor:"imported_ids_hash" json:"imported_ids_hash"`
	ImportedAt      string `cbor:"imported_at" json:"imported_at"`
}

// ExportMemories returns one page of the export q asks for (see
// store.ExportMemories), read at the server's clock.
func ExportMemories(ctx context.Context, env *toolkit.Env, q store.MemoryExportQuery) (*store.MemoryExportPage, error) {
	q.Now = env.Time()
	var page *store.MemoryExportPage
	err := env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		page, err = store.ExportMemories(tx, q)
		return err
	})
	return page, err
}

// ImportMemories applies one batch of an import in one transaction: its
// records (store.ImportMemories) or fact values (store.ImportFactValues),
// and, when it wrote anything, a memory_import receipt of the batch's
// tenant, minted by the operator in the same transaction. A batch that
// writes nothing mints nothing, so that importing a file again changes
// nothing.
func ImportMemories(ctx context.Context, env *toolkit.Env, b *memio.Batch) (*memio.BatchResult, error) {
	if b.Tenant == "" {
		return nil, fmt.Errorf("crux: import: the batch names no tenant")
	}
	if len(b.Records) > 0 && len(b.Values) > 0 {
		return nil, fmt.Errorf("crux: import: a batch holds records or values, not both")
	}
	out := &memio.BatchResult{}
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		now := env.Time() // read inside the transaction, as store_fact does
		var res *store.MemoryImportResult
		var err error
		if len(b.Values) > 0 {
			res, err = store.ImportFactValues(tx, b.Tenant, b.Values, now)
		} else {
			res, err = store.ImportMemories(tx, b.Tenant, b.Records, now)
		}
		if err != nil {
			return err
		}
		*out = memio.BatchResult{MemoryImportResult: *res}
		if res.Written() == 0 {
			return nil
		}
		var ids strings.Builder
		for _, id := range res.ImportedIDs {
			ids.WriteString(id)
			ids.WriteByte('\n')
		}
		sum := blake3.Sum256([]byte(ids.String()))
		imported := map[string]int{}
		for typ, c := range map[string]store.MemoryImportCounts{
			store.MemoryFact: res.Facts, store.MemorySession: res.Sessions,
			store.MemoryConstraint: res.Constraints, store.MemoryArtefact: res.Artefacts,
		} {
			if c.Imported > 0 {
				imported[typ] = c.Imported
			}
		}
		r, err := receipts.Append(tx, env.Signer, b.Tenant, kindMemoryImport, operatorActor, memoryImportReceipt{
			Source: b.Source, FirstLine: b.FirstLine, LastLine: b.LastLine, Imported: imported,
			Unchanged:       res.Facts.Unchanged + res.Sessions.Unchanged + res.Constraints.Unchanged + res.Artefacts.Unchanged,
			Conflicts:       res.Facts.Conflicts + res.Sessions.Conflicts + res.Constraints.Conflicts + res.Artefacts.Conflicts,
			ImportedIDsHash: hex.EncodeToString(sum[:]), ImportedAt: now.Format(time.RFC3339Nano),
		}, now)
		if err != nil {
			return err
		}
		out.ReceiptID = r.ID
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
