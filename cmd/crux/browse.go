package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
	"github.com/crux-go/crux/web"
)

// The browsing commands, for a person at a terminal: crux facts and crux
// forgets list (crux receipts list is in chain.go). Each prints a table,
// or with --json a JSON array of the same rows; each is bounded by
// --limit, and says on standard error when more rows match.

// Bounds of crux facts and crux forgets list.
const (
	defaultFactsLimit = 20
	maxFactsLimit     = 500 // query_facts answers up to 1000 rows; one more than the limit tells whether more match
	defaultForgets    = 50
	maxForgets        = web.MaxForgets
)

// maxCell bounds a value in a table, in runes; --json prints it whole.
const maxCell = 60

// truncatedNotice says on w that the list shows n rows of what, and that
// more match.
func truncatedNotice(w io.Writer, n int, what string, max int) {
	fmt.Fprintf(w, "crux: truncated: showing the first %d %s; more match (--limit N lists up to %d)\n", n, what, max)
}

// cell is s for one cell of a table: on one line, every control character
// (an escape sequence's ESC included, so that a stored value cannot drive
// the terminal) shown as a space, and at most maxCell runes, the last an
// ellipsis when it was cut.
func cell(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxCell {
			return strings.TrimRightFunc(b.String(), unicode.IsSpace) + "…"
		}
		if r == utf8.RuneError || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// shortTime is an RFC 3339 time as 2006-01-02 15:04:05Z, or t itself when
// it does not parse.
func shortTime(t string) string {
	p, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return orDash(t)
	}
	return p.UTC().Format("2006-01-02 15:04:05Z")
}

// factsFlags are the flags of crux facts.
type factsFlags struct {
	entity, query string
	limit         int
	json          bool
}

// newFactsCmd returns crux facts: the facts the agent sees, through
// query_facts.
func newFactsCmd(a *app) *cobra.Command {
	var cf *commonFlags
	var f factsFlags
	c := &cobra.Command{
		Use:   "facts [--data DIR] [--agent NAME] [--entity E] [--query Q] [--limit N] [--json]",
		Short: "Show the facts the agent sees: a table, or JSON with --json",
		Long: fmt.Sprintf(`Show the facts the agent sees (--agent, else $CRUX_AGENT; anonymous
without one), as query_facts finds them: ranked by effective confidence,
newest first among equals. --entity keeps one entity's facts, --query
those matching the keywords; neither gives the store's top facts. A table
of entity, key, value, effective confidence, time stored and fact id, one
fact a line (values on one line, cut at %d characters, control characters
shown as spaces), or with --json the query_facts rows as a JSON array,
whole. --limit shows at most N (default %d, at most %d); when more
facts match, or some are below the confidence threshold, standard error
says so. As with query_facts, a --query that finds nothing is recorded as
the agent's gap (get_gaps). crux call query_facts '{...}' takes every other
argument.`, maxCell, defaultFactsLimit, maxFactsLimit),
		RunE: func(c *cobra.Command, pos []string) error {
			if err := noArgs("facts", pos); err != nil {
				return err
			}
			if f.limit < 1 || f.limit > maxFactsLimit {
				return usagef("--limit must be between 1 and %d, got %d", maxFactsLimit, f.limit)
			}
			s, err := resolve(c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			return a.facts(s, f)
		},
	}
	cf = withCommon(c)
	c.Flags().StringVar(&f.entity, "entity", "", "show only the facts of `ENTITY`")
	c.Flags().StringVar(&f.query, "query", "", "show only the facts matching the `KEYWORDS`")
	c.Flags().IntVar(&f.limit, "limit", defaultFactsLimit, fmt.Sprintf("show at most `N` facts (1 to %d)", maxFactsLimit))
	c.Flags().BoolVar(&f.json, "json", false, "print the rows as a JSON array")
	return c
}

func (a *app) facts(s *setup, f factsFlags) error {
	ctx := a.ctx
	q := map[string]any{"top_k": f.limit + 1}
	if f.entity != "" {
		q["entity"] = f.entity
	}
	if f.query != "" {
		q["query"] = f.query
	}
	args, err := json.Marshal(q)
	if err != nil {
		return err
	}
	var out tools.QueryFactsOutput
	if err := s.withSession(ctx, a.logger, func(sess *session) error {
		res, err := sess.CallTool(ctx, s.caller, "query_facts", args)
		if err != nil {
			return err
		}
		out, err = crux.Decode[tools.QueryFactsOutput](res)
		return err
	}); err != nil {
		var ce *crux.Error
		if errors.As(err, &ce) {
			return fmt.Errorf("query_facts: %s (code %d)", strings.TrimPrefix(ce.Message, "query_facts: "), ce.Code)
		}
		return err
	}
	rows := out.Rows
	more := len(rows) > f.limit
	if more {
		rows = rows[:f.limit]
	}
	if f.json {
		if rows == nil {
			rows = []tools.FactRow{}
		}
		if err := writeJSON(a.stdout, rows); err != nil {
			return err
		}
	} else if len(rows) > 0 {
		tw := tabwriter.NewWriter(a.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "ENTITY\tKEY\tVALUE\tCONFIDENCE\tSTORED\tFACT")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\n", cell(r.Entity), cell(r.Key), cell(r.Value),
				r.EffectiveConfidence, shortTime(r.StoredAt), r.FactID)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(a.stderr, "crux: no facts match")
	}
	switch {
	case more:
		truncatedNotice(a.stderr, len(rows), "facts", maxFactsLimit)
	case out.TruncatedByTokenBudget:
		fmt.Fprintf(a.stderr, "crux: truncated: query_facts's token budget cut the list at %d facts\n", len(rows))
	}
	if out.FilteredBelowThreshold > 0 {
		fmt.Fprintf(a.stderr, "crux: %d more %s below the confidence threshold (crux call query_facts with min_effective_confidence shows them)\n",
			out.FilteredBelowThreshold, plural(out.FilteredBelowThreshold, "fact is", "facts are"))
	}
	return nil
}

// forgetStateText is the STATE column of forget f at now.
func forgetStateText(f web.ForgetRow, now time.Time) string {
	switch f.State {
	case store.ForgetForgotten:
		end, err := time.Parse(time.RFC3339Nano, f.RecoveryWindowEndsAt)
		if err == nil && !now.Before(end) {
			return "purge due since " + shortTime(f.RecoveryWindowEndsAt)
		}
		return "restorable until " + shortTime(f.RecoveryWindowEndsAt)
	case store.ForgetRestored:
		return "restored " + shortTime(f.RestoredAt)
	case store.ForgetPurged:
		return "purged " + shortTime(f.PurgedAt)
	}
	return f.State
}

type (
	forgetsReq struct {
		Tenant string `json:"tenant"`
		Limit  int    `json:"limit"`
		// Scan bounds the receipts read (0: the whole chain, as crux
		// forgets list reads it; the web view bounds it).
		Scan int `json:"scan,omitempty"`
	}
	forgetsAnswer = web.ForgetList
)

// forgets lists the forgets of a tenant, newest first: the forget
// receipts of its chain, each with the record of its forget.
func (h *host) forgets(ctx context.Context, req forgetsReq) (any, error) {
	return web.NewStoreLedger(h.db, nil, nil).Forgets(ctx, req.Tenant, min(max(req.Limit, 1), maxForgets), max(req.Scan, 0))
}

// newForgetsCmd returns crux forgets list: a tenant's forgets, newest
// first, with their state.
func newForgetsCmd(a *app) *cobra.Command {
	var cf *chainFlags
	var limit int
	list := &cobra.Command{
		Use:   "list [--data DIR] [--tenant T] [--limit N] [--json]",
		Short: "List a tenant's forgets, newest first, and whether each can still be restored",
		Long: fmt.Sprintf(`List the forgets (memory_forget) of a tenant (default: default), newest
first: the forget receipt id, when it was made, its scope, how many facts it
forgot and its state: "restorable until" the end of its recovery window
(crux forget restore puts the facts back until then), "purge due since"
(the next command that opens the store purges it), "restored" or "purged",
with the time. --json prints a JSON array of the forgets, with the reason
and the restore and purge receipt ids. --limit lists at most N (default
%d, at most %d); when there are more, standard error says so.`, defaultForgets, maxForgets),
		RunE: func(c *cobra.Command, pos []string) error {
			switch {
			case len(pos) > 0:
				return usagef("forgets list takes no arguments, got %q", pos[0])
			case limit < 1 || limit > maxForgets:
				return usagef("--limit must be between 1 and %d, got %d", maxForgets, limit)
			}
			s, err := resolveChain("forgets list", c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			return a.listForgets(s, cf, limit)
		},
	}
	cf = withChain(list)
	list.Flags().IntVar(&limit, "limit", defaultForgets, fmt.Sprintf("list at most `N` forgets (1 to %d)", maxForgets))
	return parentCmd("forgets", "List forgets", list)
}

func (a *app) listForgets(s *setup, cf *chainFlags, limit int) error {
	ctx := a.ctx
	var ans forgetsAnswer
	if err := s.withSession(ctx, a.logger, func(sess *session) error {
		return sess.do(ctx, opForgets, forgetsReq{Tenant: cf.tenant, Limit: limit}, &ans)
	}); err != nil {
		return err
	}
	if cf.json {
		if err := writeJSON(a.stdout, ans.Forgets); err != nil {
			return err
		}
	} else if len(ans.Forgets) > 0 {
		now := time.Now()
		tw := tabwriter.NewWriter(a.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "FORGET\tINITIATED\tSCOPE\tFACTS\tSTATE")
		for _, f := range ans.Forgets {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", f.ForgetReceiptID, shortTime(f.InitiatedAt), cell(f.Scope.String()),
				f.FactCount, forgetStateText(f, now))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stderr, "crux: no forgets in tenant %q\n", cf.tenant)
	}
	if ans.Truncated {
		truncatedNotice(a.stderr, len(ans.Forgets), "forgets", maxForgets)
	}
	return nil
}
