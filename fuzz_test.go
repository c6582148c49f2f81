package crux_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/crux-go/crux"
)

// FuzzCallTool feeds arbitrary argument bytes to every tool: a call either
// succeeds or fails with -32602; it never panics and never fails inside.
//
//	go test -run '^$' -fuzz FuzzCallTool -fuzztime 1m .
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
	srv, _ := newServer(f, nil)
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
			if !errors.As(err, &e) || e.Code != crux.CodeInvalidParams {
				t.Fatalf("%s(%s): %v", name, args, err)
			}
		}
	})
}
