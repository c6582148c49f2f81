package crux

import (
	"context"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// NewServerWithTools is NewServer with extra tools, for tests of the call
// path (a panicking tool, say).
func NewServerWithTools(st store.Backend, opts *Options, extra ...*toolkit.Tool) (*Server, error) {
	return newServer(st, opts, extra...)
}

// ListToolsUncached is the list ListTools returns to c, built afresh
// without the kept lists.
func (s *Server) ListToolsUncached(ctx context.Context, c Caller) []Tool {
	return s.buildList(s.env.Listed(ctx, c))
}

// KeptListings is the number of lists the server keeps built.
func (s *Server) KeptListings() int {
	s.lists.mu.Lock()
	defer s.lists.mu.Unlock()
	return len(s.lists.m)
}
