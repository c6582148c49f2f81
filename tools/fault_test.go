package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/storetest"
)

// Failure points of one call: every operation up to faultsDense, then
// about faultsSparse evenly spaced ones, then the last faultsTail
// operations (where the commits are).
const (
	faultsDense  = 120
	faultsSparse = 60
	faultsTail   = 16
)

// failurePoints returns the operations to fail, in increasing order, for a
// call that makes n operations.
func failurePoints(n int) []int {
	var pts []int
	stride := max(1, (n-faultsDense-faultsTail)/faultsSparse)
	for i := 1; i <= n; i++ {
		if i <= faultsDense || i > n-faultsTail || (i-faultsDense)%stride == 0 {
			pts = append(pts, i)
		}
	}
	return pts
}

// faultCall is a valid call under fault injection.
type faultCall struct {
	validCall
	// bestEffort: the call ends with a write of its own whose failure is
	// logged, not returned: a fault there may leave the call successful,
	// but the store must still be as it was.
	bestEffort bool
}

// faultCalls are the valid calls, and query_facts with a keyword query
// nothing matches, which records a gap observation best effort.
func faultCalls() []faultCall {
	var out []faultCall
	for _, vc := range validCalls {
		out = append(out, faultCall{validCall: vc})
	}
	return append(out, faultCall{validCall: validCall{caller: anon, tool: "query_facts", args: `{"query":"terraform"}`}, bestEffort: true})
}

// TestStoreFaults fails, one at a time, the store operations of a valid
// call of every tool: each get, put, delete, scan, scan step, transaction
// start and commit. Each failed call must return an internal error that
// wraps the fault, and leave the store byte for byte as it was; once no
// operation fails, the call must succeed.
func TestStoreFaults(t *testing.T) {
	ctx := context.Background()
	srv, swap, fs := fixtureRig(t)
	for _, vc := range faultCalls() {
		name := vc.tool
		if vc.bestEffort {
			name += "/best_effort"
		}
		t.Run(name, func(t *testing.T) {
			args := json.RawMessage(fs.fx.expand(vc.args))
			// A first copy counts the call's operations.
			fb := fs.restore(t)
			swap.set(fb)
			_, err := srv.CallTool(ctx, vc.caller, vc.tool, args)
			require.NoError(t, err)
			ops := fb.Ops()

			fb = fs.restore(t)
			swap.set(fb)
			before, err := fb.Snapshot(ctx)
			require.NoError(t, err)
			tested, swallowed, succeeded := 0, 0, false
			for _, n := range failurePoints(ops + 1) {
				fb.Arm(n)
				res, err := srv.CallTool(ctx, vc.caller, vc.tool, args)
				op, injected := fb.Injected()
				fb.Arm(0)
				if !injected {
					require.NoError(t, err, "no fault injected at operation %d", n)
					require.Equal(t, vc.isError, res.IsError, "%v", res.Content)
					succeeded = true
					break
				}
				tested++
				var e *crux.Error
				switch {
				case err == nil && vc.bestEffort:
					require.Equal(t, vc.isError, res.IsError, "%v", res.Content)
					swallowed++
				case err == nil:
					t.Fatalf("a fault at operation %d (%s) did not fail the call: %.300s", n, op, res.Content[0].Text)
				default:
					require.True(t, errors.As(err, &e) && e.Code == crux.CodeInternalError && errors.Is(err, storetest.ErrInjected),
						"a fault at operation %d (%s): want -32603 wrapping the fault, got %v", n, op, err)
				}
				after, err := fb.Snapshot(ctx)
				require.NoError(t, err)
				if d := before.Diff(after, 10); d != nil {
					t.Fatalf("a fault at operation %d (%s) left the store changed:\n%s", n, op, strings.Join(d, "\n"))
				}
			}
			require.True(t, succeeded, "the call never succeeded (%d operations)", ops)
			require.Equal(t, vc.bestEffort, swallowed > 0, "faults the call survived")
			t.Logf("%s: %d operations, %d failure points", name, ops, tested)
		})
	}
}

// TestFailurePoints: a short call has every operation failed; a long one
// the first faultsDense, about faultsSparse more, and its last faultsTail.
func TestFailurePoints(t *testing.T) {
	require.Equal(t, []int{1, 2, 3}, failurePoints(3))
	pts := failurePoints(5000)
	require.Equal(t, 1, pts[0])
	require.Equal(t, faultsDense, pts[faultsDense-1])
	require.Equal(t, 5000, pts[len(pts)-1])
	require.Equal(t, 5000-faultsTail+1, pts[len(pts)-faultsTail])
	require.InDelta(t, faultsDense+faultsSparse+faultsTail, len(pts), 3)
	require.IsIncreasing(t, pts)
}
