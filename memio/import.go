package memio

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/crux-go/crux/store"
)

// The sources an import reads.
const (
	SourceCrux      = "crux"       // crux's own export format
	SourceMCPMemory = "mcp-memory" // the reference MCP memory server's JSONL file
)

// Batch is one batch of an import, applied in one transaction: the
// records of a crux export, or the fact values of an MCP memory file, of
// the lines FirstLine to LastLine.
type Batch struct {
	Source    string               `json:"source"`
	Tenant    string               `json:"tenant"`
	FirstLine int                  `json:"first_line"`
	LastLine  int                  `json:"last_line"`
	Records   []store.MemoryRecord `json:"records,omitempty"`
	Values    []store.FactValue    `json:"values,omitempty"`
}

// BatchResult is what applying a batch did, and the id of the receipt
// that attests it ("" when the batch wrote nothing, and so minted none).
type BatchResult struct {
	store.MemoryImportResult
	ReceiptID string `json:"receipt_id,omitempty"`
}

// ApplyFunc applies one batch, in one transaction: all of it or none.
type ApplyFunc func(ctx context.Context, b *Batch) (*BatchResult, error)

// ImportOptions configures [Import]. The zero value imports a crux export
// in batches of the default size.
type ImportOptions struct {
	// Source is SourceCrux ("" too) or SourceMCPMemory.
	Source string
	// Tenant is the tenant an MCP memory file goes to ("" means
	// "default"). A crux export goes to the tenant its header names: fact
	// ids are unique in a whole store, so an export cannot be imported
	// under another name; a Tenant that is not the header's is refused.
	Tenant string
	// MaxBatchRecords and MaxBatchBytes bound a batch: its records (or
	// values) and the bytes of their lines. Zero means 1000 and 16 MiB.
	MaxBatchRecords, MaxBatchBytes int
}

// ImportSummary is what [Import] did.
type ImportSummary struct {
	Source string `json:"source"`
	Tenant string `json:"tenant"`
	Lines  int    `json:"lines"` // the lines read, blank ones included
	store.MemoryImportResult
	// Batches counts the batches applied; Receipts are the ids of the
	// receipts they minted, one per batch that wrote something.
	Batches  int      `json:"batches"`
	Receipts []string `json:"receipts"`
}

// Import imports the file r holds, which it reads twice. First it checks
// every line (Read or ReadMCPMemory): a file with a bad line is refused
// with a [*LineError] naming it, and nothing is applied. Then it reads
// the file again and hands its records to apply in batches, each applied
// in one transaction. An error while applying ends the import: the
// batches before it stay imported (the summary counts them, and the error
// says which lines they hold), the rest is not, and, an import being
// idempotent, importing the file again completes it.
func Import(ctx context.Context, r io.ReadSeeker, opts *ImportOptions, apply ApplyFunc) (*ImportSummary, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	if o.Source == "" {
		o.Source = SourceCrux
	}
	if o.MaxBatchRecords <= 0 {
		o.MaxBatchRecords = 1000
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 16 << 20
	}
	sum := &ImportSummary{Source: o.Source, Tenant: o.Tenant, Receipts: []string{}}
	switch o.Source {
	case SourceCrux:
		h, err := Read(r, func(int, *store.MemoryRecord) error { return ctx.Err() })
		if err != nil {
			return nil, err
		}
		if o.Tenant != "" && o.Tenant != h.Tenant {
			return nil, fmt.Errorf("memio: the export is of tenant %q, not %q: an export is imported into its own tenant", h.Tenant, o.Tenant)
		}
		sum.Tenant = h.Tenant
	case SourceMCPMemory:
		if sum.Tenant == "" {
			sum.Tenant = "default"
		}
		if err := ReadMCPMemory(r, func(int, []store.FactValue) error { return ctx.Err() }); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("memio: unknown source %q (crux or mcp-memory)", o.Source)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}

	b := &Batch{Source: o.Source, Tenant: sum.Tenant}
	size := 0
	flush := func() error {
		if len(b.Records) == 0 && len(b.Values) == 0 {
			return nil
		}
		res, err := apply(ctx, b)
		if err != nil {
			done := "nothing is imported"
			if sum.Batches > 0 {
				done = fmt.Sprintf("lines 1 to %d are imported", b.FirstLine-1)
			}
			return &applyError{fmt.Errorf("importing lines %d to %d: %w (%s; importing the file again completes the import)", b.FirstLine, b.LastLine, err, done)}
		}
		sum.Add(&res.MemoryImportResult)
		sum.Batches++
		if res.ReceiptID != "" {
			sum.Receipts = append(sum.Receipts, res.ReceiptID)
		}
		b.Records, b.Values, b.FirstLine, size = b.Records[:0], b.Values[:0], 0, 0
		return nil
	}
	add := func(line, n int) error {
		if b.FirstLine == 0 {
			b.FirstLine = line
		}
		b.LastLine = line
		size += n
		if len(b.Records)+len(b.Values) >= o.MaxBatchRecords || size >= o.MaxBatchBytes {
			return flush()
		}
		return nil
	}
	counting := &countingReader{r: r}
	var err error
	switch o.Source {
	case SourceCrux:
		_, err = Read(counting, func(line int, rec *store.MemoryRecord) error {
			b.Records = append(b.Records, *rec)
			sum.Lines = line
			return add(line, counting.take())
		})
	case SourceMCPMemory:
		err = ReadMCPMemory(counting, func(line int, vals []store.FactValue) error {
			b.Values = append(b.Values, vals...)
			sum.Lines = line
			return add(line, counting.take())
		})
	}
	if err == nil {
		err = flush()
	}
	var ae *applyError
	if errors.As(err, &ae) {
		err = ae.err // it names its lines
	}
	if err != nil {
		return sum, err
	}
	return sum, nil
}

// applyError is an error of apply, which the line reader passes through.
type applyError struct{ err error }

func (e *applyError) Error() string { return e.err.Error() }

func (e *applyError) Unwrap() error { return e.err }

// countingReader counts the bytes read through it since the last take:
// the size of the lines a batch holds, give or take the reader's buffer.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func (c *countingReader) take() int {
	n := c.n
	c.n = 0
	return n
}
