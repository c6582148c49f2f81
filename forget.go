package crux

import (
	"context"
	"time"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

// The forget lifecycle: memory_forget turns the facts of a scope into
// tombstones and keeps their values for a recovery window
// (Flags.ForgetRecoveryWindowDays); until it ends an operator can put them
// back with [Server.RestoreForget]; once it has ended [Server.Purge]
// removes the values for good. Restore and purge are operator APIs: they
// act for no caller, and the receipts they mint name the actor "operator".
// The crux command exposes them as `crux forget restore` and `crux purge`.

// RestoreReport is what [Server.RestoreForget] did.
type RestoreReport = tools.RestoreReport

// PurgeReport is what [Server.Purge] did.
type PurgeReport = tools.PurgeReport

// PurgedForget is one forget in a [PurgeReport].
type PurgedForget = tools.PurgedForget

// ForgetInfo is the state of one forget, as [Server.ForgetStatus] reports it.
type ForgetInfo = tools.ForgetInfo

// Errors of [Server.RestoreForget]; test with errors.Is. An unknown receipt
// id wraps store.ErrNotFound.
var (
	// ErrRecoveryWindowClosed: the forget's recovery window has ended.
	ErrRecoveryWindowClosed = store.ErrRecoveryWindowClosed
	// ErrForgetRestored: the forget was already restored.
	ErrForgetRestored = store.ErrForgetRestored
	// ErrForgetPurged: the forget's values were already purged.
	ErrForgetPurged = store.ErrForgetPurged
)

// RestoreForget puts back the facts forgotten by the forget whose receipt
// is receiptID, exactly as they were (indexes, counts of current facts and
// chain links included), and mints a signed receipt of kind
// "forget_restore" in the same transaction. If a chain gained a current
// version while one of its facts was forgotten, the higher version stays
// current and the report lists the adjustment. A forget can be restored
// once, and only before its recovery window ends; see the Err variables.
//
// RestoreForget is an operator API: it acts for no caller and is not
// exposed as a tool.
func (s *Server) RestoreForget(ctx context.Context, receiptID string) (*RestoreReport, error) {
	if s.closed.Load() {
		return nil, ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return nil, err
	}
	return tools.RestoreForget(ctx, s.env, receiptID)
}

// Purge removes for good the values of every forget whose recovery window
// has ended and that was not restored: each forgotten fact keeps a
// tombstone (id, entity, key, the hash of its value) and each forget gets a
// signed receipt of kind "permanent_purge" {source_forget_receipt_id,
// purged_fact_ids, purged_at}. Then, when the store implements
// store.Compacter (the bbolt backend does), it is compacted, so that the
// values' bytes are gone from the file, not just unreachable; a compaction
// that failed is retried by the next Purge.
//
// A server purges once before its first call (see [Server.Prepare]).
// Purge is an operator API: it acts for no caller and is not exposed as a
// tool. On error the report holds what was done before it.
func (s *Server) Purge(ctx context.Context) (*PurgeReport, error) {
	if s.closed.Load() {
		return nil, ErrServerClosed
	}
	if err := s.prepare(ctx, false); err != nil {
		return nil, err
	}
	return tools.PurgeForgets(ctx, s.env)
}

// ForgetStatus reports the state of the forget whose receipt is receiptID:
// forgotten, restored or purged, with its facts and receipts. An unknown id
// is an error wrapping store.ErrNotFound.
func (s *Server) ForgetStatus(ctx context.Context, receiptID string) (*ForgetInfo, error) {
	if s.closed.Load() {
		return nil, ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return nil, err
	}
	return tools.ForgetStatus(ctx, s.env, receiptID)
}

// purgeDue is the purge Prepare runs: a failure is logged, never fatal,
// and is retried by the next Purge.
func (s *Server) purgeDue() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := tools.PurgeForgets(ctx, s.env)
	if err != nil {
		s.env.Logger.Error("crux: purging the forgets past their recovery window", "err", err)
	}
	if rep != nil && len(rep.Purged) > 0 {
		ids := make([]string, len(rep.Purged))
		for i, p := range rep.Purged {
			ids[i] = p.ForgetReceiptID
		}
		s.env.Logger.Info("crux: purged forgotten facts past their recovery window", "forgets", ids, "compacted", rep.Compacted)
	}
}
