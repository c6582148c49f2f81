package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

// Bounds of the read-only lists.
const (
	// ListPerPage is how many rows a page of the sessions or the
	// decisions shows.
	ListPerPage = 50
	// DefaultQueryLimit and MaxQueryLimit bound the results of the query
	// page (query's own default and maximum).
	DefaultQueryLimit = 10
	MaxQueryLimit     = 100
	// maxStateBytes bounds the state of a session shown on its page.
	maxStateBytes = 8 << 10
)

// pageOf returns the slice bounds of page (from 0) of n rows at per a
// page, and whether a next page has rows.
func pageOf(n, page, per int) (from, to int, more bool) {
	from, to = min(page*per, n), min((page+1)*per, n)
	return from, to, n > to
}

// listURL is path with the query values v and page (omitted when 0).
func listURL(path string, v url.Values, page int) string {
	w := url.Values{}
	for k, s := range v {
		w[k] = s
	}
	if page > 0 {
		w.Set("page", strconv.Itoa(page))
	} else {
		w.Del("page")
	}
	if len(w) == 0 {
		return path
	}
	return path + "?" + w.Encode()
}

// QueryPage is the query page and its JSON twin: the documents of the
// caller's tenant that query finds for Query, each with the lanes that
// found it, and the facts the entity-graph lane linked.
type QueryPage struct {
	Query string `json:"query,omitempty"`
	Limit int    `json:"limit"`
	// Output is query's answer; nil without a query.
	Output *tools.QueryOutput `json:"output,omitempty"`
}

// query is the query page: the query tool in the caller's tenant.
func (h *Handler) query(w http.ResponseWriter, r *http.Request) {
	p := QueryPage{Query: strings.TrimSpace(r.URL.Query().Get("q"))}
	var ok bool
	if p.Limit, ok = intParam(r, "limit", DefaultQueryLimit, 1, MaxQueryLimit); !ok {
		h.fail(w, r, http.StatusBadRequest, badParam("limit", "must be an integer from 1 to 100"))
		return
	}
	if p.Query != "" {
		var out tools.QueryOutput
		args := map[string]any{"tenant_id": callerOf(r.Context()).TenantID(), "query": p.Query, "limit": p.Limit}
		if !h.call(w, r, "query", args, &out) {
			return
		}
		p.Output = &out
	}
	h.render(w, r, http.StatusOK, "query", "Query", p)
}

// SessionsPage is the sessions page and its JSON twin: a page of the
// caller's session ids, as list_sessions lists them.
type SessionsPage struct {
	Archived bool     `json:"archived,omitempty"`
	Page     int      `json:"page"`
	Sessions []string `json:"sessions"`
	// Count is how many sessions list_sessions returned; Truncated says
	// it had more than it returns.
	Count     int    `json:"count"`
	Truncated bool   `json:"truncated,omitempty"`
	Next      string `json:"next,omitempty"`
	Prev      string `json:"prev,omitempty"`
}

// sessionsPage is the sessions page: list_sessions, paged.
func (h *Handler) sessionsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := SessionsPage{Archived: q.Get("archived") == "1"}
	var ok bool
	if p.Page, ok = intParam(r, "page", 0, 0, 1<<20); !ok {
		h.fail(w, r, http.StatusBadRequest, badParam("page", "must be a non-negative integer"))
		return
	}
	args := map[string]any{}
	if p.Archived {
		args["include_archived"] = true
	}
	var out tools.ListSessionsOutput
	if !h.call(w, r, "list_sessions", args, &out) {
		return
	}
	p.Count, p.Truncated = len(out.Sessions), out.Truncated
	from, to, more := pageOf(len(out.Sessions), p.Page, ListPerPage)
	p.Sessions = append([]string{}, out.Sessions[from:to]...)
	v := url.Values{}
	if p.Archived {
		v.Set("archived", "1")
	}
	if more {
		p.Next = listURL(h.opts.Prefix+"sessions", v, p.Page+1)
	}
	if p.Page > 0 {
		p.Prev = listURL(h.opts.Prefix+"sessions", v, p.Page-1)
	}
	h.render(w, r, http.StatusOK, "sessions", "Sessions", p)
}

// SessionPage is a session's page and its JSON twin: get_session's
// answer, its state cut to 8 KiB on the HTML page.
type SessionPage struct {
	tools.GetSessionOutput
	// StateText is the state as the HTML page shows it; StateTruncated
	// says it was cut.
	StateText      string `json:"-"`
	StateTruncated bool   `json:"-"`
}

// sessionPage is a session's page: get_session.
func (h *Handler) sessionPage(w http.ResponseWriter, r *http.Request) {
	var out tools.GetSessionOutput
	if !h.call(w, r, "get_session", map[string]any{"session_id": r.URL.Query().Get("id")}, &out) {
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, out)
		return
	}
	p := SessionPage{GetSessionOutput: out, StateText: string(out.State)}
	if len(p.StateText) > maxStateBytes {
		cut := maxStateBytes
		for cut > 0 && !utf8.RuneStart(p.StateText[cut]) {
			cut--
		}
		p.StateText, p.StateTruncated = p.StateText[:cut], true
	}
	h.render(w, r, http.StatusOK, "session", "Session "+out.SessionID, p)
}

// DecisionsPage is the decisions page and its JSON twin: a page of the
// decisions recorded in the caller's tenant (record_decision), as
// query_facts ranks the facts that hold them, optionally of one session.
type DecisionsPage struct {
	Session   string                 `json:"session,omitempty"`
	Page      int                    `json:"page"`
	Decisions []store.DecisionRecord `json:"decisions"`
	// Truncated says that query_facts ranked the most it ranks
	// (1000): older decisions are not reachable from this list.
	Truncated bool   `json:"truncated,omitempty"`
	Next      string `json:"next,omitempty"`
	Prev      string `json:"prev,omitempty"`
}

// decisions is the decisions page: query_facts over the decisions'
// entities, paged within its top 1000.
func (h *Handler) decisions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := DecisionsPage{Session: q.Get("session"), Decisions: []store.DecisionRecord{}}
	maxPage := maxRanked/ListPerPage - 1
	var ok bool
	if p.Page, ok = intParam(r, "page", 0, 0, maxPage); !ok {
		h.fail(w, r, http.StatusBadRequest, badParam("page", "must be an integer from 0 to "+strconv.Itoa(maxPage)))
		return
	}
	args := map[string]any{"top_k": min((p.Page+1)*ListPerPage+1, maxRanked)}
	if p.Session != "" {
		args["entity"] = store.DecisionsPrefix + p.Session
	} else {
		args["entity_prefix"] = store.DecisionsPrefix
	}
	var out tools.QueryFactsOutput
	if !h.call(w, r, "query_facts", args, &out) {
		return
	}
	from, to, more := pageOf(len(out.Rows), p.Page, ListPerPage)
	for _, row := range out.Rows[from:to] {
		var d store.DecisionRecord
		if err := json.Unmarshal([]byte(row.Value), &d); err != nil {
			d = store.DecisionRecord{FactID: row.FactID, Entity: row.Entity, DecisionID: row.Key, Action: "(unreadable: " + err.Error() + ")"}
		}
		p.Decisions = append(p.Decisions, d)
	}
	p.Truncated = len(out.Rows) >= maxRanked
	v := url.Values{}
	if p.Session != "" {
		v.Set("session", p.Session)
	}
	if more && p.Page < maxPage {
		p.Next = listURL(h.opts.Prefix+"decisions", v, p.Page+1)
	}
	if p.Page > 0 {
		p.Prev = listURL(h.opts.Prefix+"decisions", v, p.Page-1)
	}
	h.render(w, r, http.StatusOK, "decisions", "Decisions", p)
}

// PassportPage is the passport page and its JSON twin: the caller's
// passport, as get_passport shows it (an agent reads no other).
type PassportPage struct {
	Passport tools.GetPassportOutput `json:"passport"`
}

// passport is the passport page: get_passport.
func (h *Handler) passport(w http.ResponseWriter, r *http.Request) {
	var p PassportPage
	if h.call(w, r, "get_passport", map[string]any{}, &p.Passport) {
		h.render(w, r, http.StatusOK, "passport", "Passport", p)
	}
}

// Bounds of the handoffs page.
const (
	// MaxHandoffs is the most handoffs of a caller the page reads.
	MaxHandoffs = 1000
	// maxHandoffScan is the most handoff records of a tenant read to
	// find them (no index holds them by agent).
	maxHandoffScan = 10000
)

// HandoffList is the handoffs of one agent in a tenant: those it
// created, those addressed to it, and those addressed to no one (which
// any agent of the tenant may accept), in id order.
type HandoffList struct {
	Handoffs []store.Handoff `json:"handoffs"`
	// Truncated says that more may exist than were read: MaxHandoffs
	// were listed, or the tenant's first 10,000 records were looked at.
	Truncated bool `json:"truncated,omitempty"`
}

func (l storeLedger) Handoffs(ctx context.Context, tenant, agent string, limit int) (*HandoffList, error) {
	limit = min(max(limit, 1), MaxHandoffs)
	out := &HandoffList{}
	err := l.db.View(ctx, func(tx store.Tx) error {
		out.Handoffs, out.Truncated = []store.Handoff{}, false
		seen := 0
		return store.Handoffs(tx, tenant, func(h *store.Handoff) error {
			if seen++; seen > maxHandoffScan {
				out.Truncated = true
				return store.ErrStop
			}
			if h.From != agent && h.Target != agent && h.Target != "" {
				return nil
			}
			if len(out.Handoffs) == limit {
				out.Truncated = true
				return store.ErrStop
			}
			out.Handoffs = append(out.Handoffs, *h)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// HandoffsPage is the handoffs page and its JSON twin: a page of the
// caller's handoffs (see [HandoffList]). Read-only: create_handoff and
// accept_handoff make and take them.
type HandoffsPage struct {
	Page      int             `json:"page"`
	Handoffs  []store.Handoff `json:"handoffs"`
	Truncated bool            `json:"truncated,omitempty"`
	Next      string          `json:"next,omitempty"`
	Prev      string          `json:"prev,omitempty"`
}

// handoffs is the handoffs page: the Ledger's list for the caller, paged.
func (h *Handler) handoffs(w http.ResponseWriter, r *http.Request) {
	l := h.opts.Ledger
	if l == nil {
		h.fail(w, r, http.StatusNotFound, noLedger)
		return
	}
	p := HandoffsPage{Handoffs: []store.Handoff{}}
	maxPage := MaxHandoffs/ListPerPage - 1
	var ok bool
	if p.Page, ok = intParam(r, "page", 0, 0, maxPage); !ok {
		h.fail(w, r, http.StatusBadRequest, badParam("page", "must be an integer from 0 to "+strconv.Itoa(maxPage)))
		return
	}
	c := callerOf(r.Context())
	list, err := l.Handoffs(r.Context(), c.TenantID(), c.Identity(), MaxHandoffs)
	if err != nil {
		h.internal(w, r, "reading the handoffs", err)
		return
	}
	from, to, more := pageOf(len(list.Handoffs), p.Page, ListPerPage)
	p.Handoffs = append(p.Handoffs, list.Handoffs[from:to]...)
	p.Truncated = list.Truncated
	if more {
		p.Next = listURL(h.opts.Prefix+"handoffs", nil, p.Page+1)
	}
	if p.Page > 0 {
		p.Prev = listURL(h.opts.Prefix+"handoffs", nil, p.Page-1)
	}
	h.render(w, r, http.StatusOK, "handoffs", "Handoffs", p)
}
