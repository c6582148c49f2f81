package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// FuzzCallTool feeds arbitrary argument bytes to every tool (identity
// continuity switched on, so that those tools check their arguments): a
// call either succeeds or fails with -32602, or with -32003 or -32004 when
// the caller lacks the standing or the store's state refuses it; it never
// panics and never fails inside.
//
//	go test -run '^$' -fuzz FuzzCallTool -fuzztime 1m ./tools
func FuzzCallTool(f *testing.F) {
	seeds := []string{
		`{}`, `null`, `[]`, `"x"`, `{"top_k":"ten"}`, `{"entity":"e","key":"k","value":"v"}`,
		`{"entity":"e","key":"k","value":"v","supersedes":["f_0"],"confidence":2}`,
		`{"query":"deploy staging","top_k":3,"token_budget":1,"as_of":"2026-01-01T00:00:00Z"}`,
		`{"entity_prefix":"__","include_superseded":true,"min_effective_confidence":0.5}`,
		`{"topic":"docs","token_budget":5}`, `{"fact_id":"f_1"}`, `{"value":"\ud800"}`,
		`{"top_k":1e400}`, `{"top_k":9223372036854775808}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	flags := fixtureFlags() // every tool runs its code, not its flag-off answer
	srv, _ := newServer(f, &crux.Options{Flags: &flags})
	var names []string
	for _, tl := range srv.ListTools(context.Background(), alice) {
		names = append(names, tl.Name)
	}
	f.Fuzz(func(t *testing.T, args string) {
		for _, name := range names {
			res, err := srv.CallTool(context.Background(), alice, name, json.RawMessage(args))
			if err == nil {
				if res == nil || len(res.Content) == 0 {
					t.Fatalf("%s(%s): empty result", name, args)
				}
				continue
			}
			var e *crux.Error
			if !errors.As(err, &e) || e.Code != crux.CodeInvalidParams && e.Code != crux.CodeForbidden && e.Code != crux.CodeConflict {
				t.Fatalf("%s(%s): %v", name, args, err)
			}
		}
	})
}

// FuzzTools calls one tool with arbitrary arguments on behalf of an
// arbitrary caller, on a fresh copy of the fixture of calls_test.go (every
// switch on). tool names the tool; a name crux lacks picks one by its
// bytes. The arguments may name the fixture's ids by their placeholders
// ($FACT, $PACKAGE, ...). Whatever the input, the call never panics and
// never fails inside crux (-32603), and afterwards every reader, the
// caller itself and an agent of its tenant can still query facts and view
// their memory, and the receipt chains of the default tenant and of the
// caller's verify. The seed corpus in testdata/fuzz/FuzzTools holds a valid
// call of every tool and edge cases (TestFuzzToolsCorpus keeps it).
//
//	go test -run '^$' -fuzz FuzzTools -fuzztime 5m ./tools
func FuzzTools(f *testing.F) {
	srv, swap, fs := fixtureRig(f)
	var names []string
	for _, tl := range srv.ListTools(context.Background(), alice) {
		names = append(names, tl.Name)
	}
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
	}
	f.Fuzz(func(t *testing.T, tool, args, agent, tenant string, authenticated bool) {
		if !known[tool] {
			h := uint(0)
			for _, b := range []byte(tool) {
				h = h*31 + uint(b)
			}
			tool = names[h%uint(len(names))]
		}
		swap.set(fs.restore(t))
		c := crux.Caller{Agent: agent, Tenant: tenant, Authenticated: authenticated}
		res, err := srv.CallTool(context.Background(), c, tool, json.RawMessage(fs.fx.expand(args)))
		var e *crux.Error
		switch {
		case err != nil && !errors.As(err, &e):
			t.Fatalf("%s(%s) as %+v: not a *crux.Error: %v", tool, args, c, err)
		case err != nil && e.Code == crux.CodeInternalError:
			t.Fatalf("%s(%s) as %+v: %v", tool, args, c, err)
		case err == nil && (res == nil || len(res.Content) == 0):
			t.Fatalf("%s(%s) as %+v: empty result", tool, args, c)
		}
		var extra []crux.Caller
		tenants := []string{crux.DefaultTenant}
		if c.Validate() == nil {
			extra = append(extra, c, crux.Caller{Agent: "dave", Authenticated: true, Tenant: tenant})
			tenants = append(tenants, c.TenantID())
		}
		requireReadable(t, srv, extra...)
		err = swap.View(context.Background(), func(tx store.Tx) error {
			for _, tn := range tenants {
				if err := receipts.VerifyStoredChain(tx, tn); err != nil {
					return fmt.Errorf("tenant %q: %w", tn, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s(%s) as %+v: receipt chain: %v", tool, args, c, err)
		}
	})
}
