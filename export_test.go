package crux

import (
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// NewServerWithTools is NewServer with extra tools, for tests of the call
// path (a panicking tool, say).
func NewServerWithTools(st store.Backend, opts *Options, extra ...*toolkit.Tool) (*Server, error) {
	return newServer(st, opts, extra...)
}
