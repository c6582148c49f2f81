package crux

import (
	"context"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

// Engram is a pre-execution overlay that engram_resolve serves: a name
// and version, an intent bucket, the content, the least capability class
// of model that may read it (fast, capable or frontier; empty means any)
// and why it applies.
type Engram = store.Engram

// PutEngram stores e in tenant's engram catalogue, replacing the engram of
// the same name@version. It fails, naming the field, for an engram that
// cannot be stored (a malformed name or version, empty content, content
// over 64 KiB).
func (s *Server) PutEngram(ctx context.Context, tenant string, e Engram) error {
	if s.closed.Load() {
		return ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return err
	}
	return tools.PutEngram(ctx, s.env, tenant, e)
}

// DeleteEngram removes ref (name@version) from tenant's stored engrams and
// reports whether it was there.
func (s *Server) DeleteEngram(ctx context.Context, tenant, ref string) (bool, error) {
	if s.closed.Load() {
		return false, ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return false, err
	}
	return tools.DeleteEngram(ctx, s.env, tenant, ref)
}
