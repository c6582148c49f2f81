package web_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/tools"
	"github.com/crux-go/crux/web"
)

// chromium returns the path of a headless-capable Chromium, skipping the
// test when there is none, unless CRUX_TEST_BROWSER demands the browser
// tests (CI sets it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CRUX_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CRUX_TEST_BROWSER") != "" {
		t.Fatal("CRUX_TEST_BROWSER is set but no chromium was found (apt-get install chromium)")
	}
	t.Skip("no chromium: the browser tests need it (set CRUX_TEST_BROWSER=1 to make this a failure)")
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile and returns
// a context driving one tab of it.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	require.NoError(t, chromedp.Do(bctx), "starting chromium")
	return bctx
}

// TestBrowser drives the view in a real Chromium: sign in with crux ui's
// one-time token, search, read a fact's history, forget and restore from
// the pages, and never see another agent's private fact.
func TestBrowser(t *testing.T) {
	ctx := newBrowser(t)
	token, once := web.OneTimeToken(alice)
	// As under crux ui, the one who holds the one-time token runs the
	// memory: an operator, who sees and audits the whole chain.
	f := newFixtureWith(t, once, func(o *web.Options) { o.IsOperator = func(crux.Caller) bool { return true } })
	base := f.ts.URL + "/ui/"
	// More of a memory to look at: documents, a pin, a session, a
	// decision and a handoff.
	_, err := f.srv.Ingest(context.Background(), crux.DefaultTenant, []crux.Document{
		{ID: "doc-crux", Title: "crux", Text: "crux is agent memory behind MCP tools, written in Go for the project crux."},
		{ID: "doc-bread", Title: "Bread", Text: "Knead the dough and let it rise overnight."},
	}, nil)
	require.NoError(t, err)
	pin := call[tools.StoreFactOutput](t, f.srv, alice, "store_fact", map[string]any{"entity": "team:web", "key": "owner", "value": "alice"})
	call[map[string]any](t, f.srv, alice, "memory_pin", map[string]any{"fact_id": pin.FactID})
	call[tools.SaveSessionOutput](t, f.srv, alice, "save_session", map[string]any{"session_id": "web-view", "state": map[string]any{"step": "screenshots"}})
	call[map[string]any](t, f.srv, alice, "record_decision", map[string]any{"session_id": "web-view", "action": "render on the server",
		"rationale": "no build step, no script", "alternatives": []string{"a single-page app"}})
	call[map[string]any](t, f.srv, alice, "create_handoff", map[string]any{"session_id": "web-view", "target_agent": "bob"})
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 720)))
	var pages []string
	// do runs steps, then keeps the page's HTML for the isolation check.
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			h, _ := chromedp.Run(hctx, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%v; the page: %s", err, h)
		}
		h, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		require.NoError(t, err)
		pages = append(pages, h)
	}
	// shot writes the page as docs/screenshots/NAME.png when
	// CRUX_WEB_SCREENSHOTS is set (never in CI, so that the tree stays
	// clean).
	shot := func(name string) {
		t.Helper()
		if os.Getenv("CRUX_WEB_SCREENSHOTS") == "" {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		dir := filepath.Join("..", "docs", "screenshots")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return strings.TrimSpace(s)
	}

	// Without a token: the sign-in page, refusing.
	do(chromedp.Navigate(base), chromedp.WaitVisible(chromedp.ID("token")))
	require.Contains(t, text("#error"), "bearer token is required")

	// The one-time URL signs in and lands on the facts.
	do(chromedp.Navigate(base+"signin?token="+token), chromedp.WaitVisible(chromedp.ID("facts")))
	require.Equal(t, "alice", text("#caller"))
	loc, err2 := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err2)
	require.NotContains(t, loc, token, "the token leaves the address bar")

	// Search finds the fact.
	do(chromedp.SetValue(chromedp.ID("q"), "which language"),
		chromedp.Click(chromedp.ID("search")),
		chromedp.WaitVisible(chromedp.CSS(`#facts[data-query="which language"] a.fact-link`)))
	require.Contains(t, text("#facts tbody tr:first-child"), "Go")
	shot("facts")
	loc, err = chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, loc, "q=which+language")

	// Its page shows every version, newest first.
	do(chromedp.Click(chromedp.CSS(`#facts tbody tr:first-child a.fact-link`)),
		chromedp.WaitVisible(chromedp.ID("versions")))
	versions, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#versions tr.version td.value')].map(e => e.textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"Go", "Rust", "C"}, versions)
	writers, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#versions tr.version td.writer')].map(e => e.textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"alice", "alice", "alice"}, writers, "who wrote each version")
	shot("fact")

	// Forget from the page: gone for an agent; restore: back for it.
	do(chromedp.SetValue(chromedp.ID("forget-reason"), "checking restore"),
		chromedp.Click(chromedp.ID("forget")),
		chromedp.WaitVisible(chromedp.ID("restore")))
	require.Equal(t, "forgotten", text("#forget-state"))
	shot("forget")
	gone := call[tools.QueryFactsOutput](t, f.srv, alice, "query_facts", map[string]any{"entity": "project:crux", "key": "language"})
	require.Empty(t, gone.Rows, "forgotten for an agent")
	do(chromedp.Click(chromedp.ID("restore")), chromedp.WaitVisible(chromedp.ID("restore-receipt")))
	require.Equal(t, "restored", text("#forget-state"))
	back := call[tools.QueryFactsOutput](t, f.srv, alice, "query_facts", map[string]any{"entity": "project:crux", "key": "language"})
	require.Len(t, back.Rows, 1, "back for an agent")
	require.Equal(t, "Go", back.Rows[0].Value)

	// Another agent's private fact is on no page: not in the list, not
	// found by a search, and its page refuses.
	do(chromedp.Navigate(base+"?entity=project:crux"), chromedp.WaitVisible(chromedp.ID("facts")))
	do(chromedp.Navigate(base+"?q=hidden+passphrase"), chromedp.WaitVisible(chromedp.ID("empty")))
	do(chromedp.Navigate(base+"fact?entity=project:crux&key=secret"), chromedp.WaitVisible(chromedp.ID("error")))
	// Documents with the lanes that found them.
	do(chromedp.Navigate(base+"query"), chromedp.WaitVisible(chromedp.ID("q")))
	do(chromedp.SetValue(chromedp.ID("q"), "memory for the crux project"),
		chromedp.Click(chromedp.ID("search")), chromedp.WaitVisible(chromedp.ID("results")))
	require.Contains(t, text("#results tbody tr:first-child"), "doc-crux")
	lanes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#results tr:first-child .lane')].map(e => e.textContent)`))
	require.NoError(t, err)
	require.NotEmpty(t, lanes, "the lanes that found it")
	shot("query")

	// The forgets, restored, with their purge status, and the pin.
	do(chromedp.Navigate(base+"forgets"), chromedp.WaitVisible(chromedp.ID("forgets")))
	require.Contains(t, text("#forgets tbody tr:first-child .status"), "restored at")
	require.Contains(t, text("#pins"), "team:web")
	shot("forgets")

	// The read-only lists.
	do(chromedp.Navigate(base+"sessions"), chromedp.WaitVisible(chromedp.ID("sessions")))
	require.Contains(t, text("#sessions"), "web-view")
	do(chromedp.Click(chromedp.CSS("a.session-link")), chromedp.WaitVisible(chromedp.ID("state")))
	require.Contains(t, text("#state"), "screenshots")
	do(chromedp.Navigate(base+"decisions"), chromedp.WaitVisible(chromedp.ID("decisions")))
	require.Contains(t, text("#decisions"), "render on the server")
	shot("decisions")
	do(chromedp.Navigate(base+"handoffs"), chromedp.WaitVisible(chromedp.ID("handoffs")))
	require.Contains(t, text("#handoffs"), "bob")
	do(chromedp.Navigate(base+"passport"), chromedp.WaitVisible(chromedp.ID("error")))
	require.Contains(t, text("#error"), "issue_passport", "get_passport's answer: alice has none")

	// The receipt chain verifies in the page; a tampered receipt shows
	// as failing, where it is, and the audit names it.
	do(chromedp.Navigate(base+"receipts"), chromedp.WaitVisible(chromedp.ID("receipts")))
	codes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#receipts tr.receipt')].map(e => e.dataset.code)`))
	require.NoError(t, err)
	require.NotEmpty(t, codes)
	for _, c := range codes {
		require.Equal(t, "OK", c)
	}
	do(chromedp.Click(chromedp.ID("audit-link")), chromedp.WaitVisible(chromedp.ID("audit")))
	require.Contains(t, text("#audit"), "The whole chain verifies")
	ids := chainIDs(t, f.db, crux.DefaultTenant)
	tamper(t, f.db, ids[0])
	do(chromedp.Navigate(base+"receipts?audit=1"), chromedp.WaitVisible(chromedp.ID("audit-code")))
	require.Equal(t, "BODY_HASH_MISMATCH", text("#audit-code"))
	require.Equal(t, "1", text("#audit-seq"))
	require.Contains(t, text("#seq-1"), "BODY_HASH_MISMATCH")
	require.Contains(t, text("#seq-2"), "CHAIN_PREV_HASH_MISMATCH", "the next receipt's link fails too")
	failing, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#receipts tr.failing')].map(e => e.id)`))
	require.NoError(t, err)
	require.Equal(t, []string{"seq-2", "seq-1"}, failing, "only the tampered receipt and its successor fail")
	do(chromedp.Navigate(base+"receipts?audit=1#seq-1"), chromedp.WaitVisible(chromedp.ID("audit-code")))
	shot("receipts")

	for i, h := range pages {
		require.NotContains(t, h, "bobs-hidden-passphrase", "page %d", i)
		require.NotContains(t, h, "key=secret&", "page %d links bob's fact", i)
	}
}
