package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/crux-go/crux"
)

// A forwarded tools/list costs the owner its answer's encoding and the
// forwarding process its decoding, both of a list that rarely changes. So
// the owner keeps the encoding of each list it serves (crux.Server's
// shared lists), and a forwarding process the last list each caller was
// answered, decoded, with the SHA-256 of the answer it was decoded from.
// It sends that sum with the next request (listReq.Have); the owner, when
// the caller's list as of that request encodes to those very bytes,
// answers null, and the forwarding process serves the list it holds. Any
// other answer is the list in full, as an owner that does not know Have
// always sends it: the list is decided by the owner at every request, as
// in-process, and a sum only spares sending what the other side has.

// maxListAnswers bounds the encoded lists an owner keeps, and
// maxForwardedLists the callers whose last list a forwarding process
// keeps. Past either, one entry is dropped for each new one.
const (
	maxListAnswers    = crux.MaxListings
	maxForwardedLists = 256
)

// listAnswer is a tools/list answer on the socket and its SHA-256 in hex.
type listAnswer struct {
	raw json.RawMessage
	sum string
}

// listSum is the SHA-256 in hex of a tools/list answer.
func listSum(raw []byte) string {
	s := sha256.Sum256(raw)
	return hex.EncodeToString(s[:])
}

// listAnswers are an owner's encoded tools/list answers, by the first tool
// of the shared list each encodes (an empty list is not kept). The zero
// value is ready; it is safe for concurrent use.
type listAnswers struct {
	mu sync.Mutex
	m  map[*crux.Tool]listAnswer
}

// of is the answer of list, a list of crux.Server.ListToolsShared: never
// modified, so its first element stands for it.
func (la *listAnswers) of(list []crux.Tool) (listAnswer, error) {
	if len(list) == 0 {
		return listAnswer{raw: json.RawMessage("[]"), sum: listSum([]byte("[]"))}, nil
	}
	la.mu.Lock()
	a, ok := la.m[&list[0]]
	la.mu.Unlock()
	if ok && len(a.raw) > 0 {
		return a, nil
	}
	raw, err := marshal(list)
	if err != nil {
		return listAnswer{}, err
	}
	a = listAnswer{raw: raw, sum: listSum(raw)}
	la.mu.Lock()
	defer la.mu.Unlock()
	if la.m == nil {
		la.m = make(map[*crux.Tool]listAnswer)
	}
	if len(la.m) >= maxListAnswers {
		for k := range la.m {
			delete(la.m, k)
			break
		}
	}
	la.m[&list[0]] = a
	return a, nil
}

// list is tools/list on the owner: the caller's list, or null when it
// encodes to the answer whose sum the request has.
func (h *host) list(ctx context.Context, req listReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	a, err := h.answers.of(srv.ListToolsShared(ctx, req.Caller.caller()))
	if err != nil {
		return nil, err
	}
	if req.Have != "" && req.Have == a.sum {
		return json.RawMessage("null"), nil
	}
	return a.raw, nil
}

// forwardedLists are the last tools/list each caller of a forwarding
// process was answered (see above). The zero value is ready; it is safe
// for concurrent use. A list it holds is shared and never modified.
type forwardedLists struct {
	mu sync.Mutex
	m  map[wireCaller]forwardedList
}

type forwardedList struct {
	sum  string
	list []crux.Tool
}

// forwardedList is tools/list forwarded to the owner.
func (ss *session) forwardedList(ctx context.Context, c crux.Caller) ([]crux.Tool, error) {
	w := toWire(c)
	key := w
	key.Transport = nil // the list does not depend on it; a pointer would not compare
	fl := &ss.lists
	fl.mu.Lock()
	held, ok := fl.m[key]
	fl.mu.Unlock()
	var raw json.RawMessage
	if err := ss.do(ctx, opList, listReq{Env: ss.env, Caller: w, Have: held.sum}, &raw); err != nil {
		return nil, err
	}
	if ok && bytes.Equal(raw, []byte("null")) {
		return held.list, nil
	}
	// Each tool's _meta is decoded as the owner's in-process list holds it
	// (maps, not JSON), so that the MCP server finds the token keys every
	// tool shares in it and sends them once, as the owner's own server
	// does (see mcpserver's package documentation, "Listing").
	var list []crux.Tool
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.m == nil {
		fl.m = make(map[wireCaller]forwardedList)
	}
	if _, ok := fl.m[key]; !ok && len(fl.m) >= maxForwardedLists {
		for k := range fl.m {
			delete(fl.m, k)
			break
		}
	}
	fl.m[key] = forwardedList{sum: listSum(raw), list: list}
	return list, nil
}
