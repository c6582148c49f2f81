package crux

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
)

// MaxListings is the most tool lists a [Server] keeps built (see
// [Server.ListToolsShared]). Past it, one kept list is dropped for each new
// one; a dropped list is built again when it is next asked for. The count
// does not grow with the callers: callers who see the same tools share
// one list, and the lists a server can show differ only by its router's
// decisions and the caller's intent (under the dynamic tool surface).
const MaxListings = 64

// listings holds the tool lists a Server has built, by listKey. The zero
// value is ready; it is safe for concurrent use.
type listings struct {
	mu sync.Mutex
	m  map[string][]Tool // guarded by mu; each list is shared and never modified
}

// ListToolsShared returns the tools c sees, as [Server.ListTools] does, but
// shared rather than copied: the slice and every schema, map and value in
// it are the server's, handed to every caller that sees the same tools,
// and must not be modified. It is for a transport that only reads the
// list, such as the MCP adapter; it answers a repeated tools/list with a
// lookup instead of building the list again.
//
// What c sees is decided afresh at every call: the capability token's
// decisions (which change as the token expires, or as a router of the
// embedder's decides), whether c is a sync replica, and the intent c
// declared with cuecrux_session under the dynamic tool surface (which
// expires). Everything else a list holds is fixed when the server is
// created (the flags, the token's annotations, the catalogue). So the
// built list is kept by the names it shows, in order, and served to the
// next call that shows the same names: it is what ListTools builds for that
// call, value for value. At most [MaxListings] lists are kept.
//
// Two calls that return the same slice (the same first element and length)
// list the same tools alike.
func (s *Server) ListToolsShared(ctx context.Context, c Caller) []Tool {
	names := s.env.Listed(ctx, c)
	var buf [128]byte
	key := s.listKey(buf[:0], names)
	s.lists.mu.Lock()
	list, ok := s.lists.m[string(key)]
	s.lists.mu.Unlock()
	if ok {
		return list
	}
	list = s.buildList(names)
	s.lists.mu.Lock()
	defer s.lists.mu.Unlock()
	if kept, ok := s.lists.m[string(key)]; ok {
		return kept // built by a concurrent call meanwhile
	}
	if s.lists.m == nil {
		s.lists.m = make(map[string][]Tool)
	}
	if len(s.lists.m) >= MaxListings {
		for k := range s.lists.m {
			delete(s.lists.m, k)
			break
		}
	}
	s.lists.m[string(key)] = list
	return list
}

// listKey appends to b the key of the list of names: the catalogue index
// of each, two bytes apiece, in their order.
func (s *Server) listKey(b []byte, names []string) []byte {
	for _, n := range names {
		i := s.byName[n]
		b = append(b, byte(i>>8), byte(i))
	}
	return b
}

// buildList builds the list of the named tools of the catalogue, in the
// order of names: each tool with its listed input schema, its output
// schema, and its _meta.crux (the upgrade of a hosted tool, the token's
// annotations with a router).
func (s *Server) buildList(names []string) []Tool {
	out := make([]Tool, 0, len(names))
	for _, name := range names {
		i := s.byName[name]
		t := s.catalogue[i]
		t.InputSchema = s.listedSchema(i)
		t.OutputSchema = s.set.OutputSchema(name)
		meta := map[string]any{}
		if up, ok := s.env.Surface.Upgrade(name); ok {
			meta["upgrade"] = up
		}
		if s.token != nil {
			ref := map[string]string{"token_id": s.token.TokenID, "token_hash": s.token.TokenHash}
			meta["filtered_by"] = "rcx-capability-token"
			meta["token_ref"] = ref
			meta["receipt_class"] = s.token.ReceiptClass
			meta["tier"] = s.token.Tier
		}
		if len(meta) > 0 {
			t.Meta = map[string]any{"crux": meta}
		}
		out = append(out, t)
	}
	return out
}

// cloneTools is a deep copy of list: its schemas and its _meta maps are
// the copy's own.
func cloneTools(list []Tool) []Tool {
	out := make([]Tool, len(list))
	n := 0
	for _, t := range list {
		n += len(t.InputSchema) + len(t.OutputSchema)
	}
	buf := make([]byte, 0, n) // every schema's copy, each capped at its length
	own := func(b json.RawMessage) json.RawMessage {
		if len(b) == 0 {
			return nil
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	for i, t := range list {
		t.InputSchema = own(t.InputSchema)
		t.OutputSchema = own(t.OutputSchema)
		if t.Meta != nil {
			t.Meta = cloneMeta(t.Meta)
		}
		out[i] = t
	}
	return out
}

// cloneMeta is a deep copy of a tool's _meta: its maps are copied, and the
// values ListTools puts in them (strings and surface.Upgrade) are values.
func cloneMeta(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			v = cloneMeta(x)
		case map[string]string:
			v = maps.Clone(x)
		}
		out[k] = v
	}
	return out
}
