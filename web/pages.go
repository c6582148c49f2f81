package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/syncremote"
	"github.com/crux-go/crux/tools"
)

// FactsPage is the facts list and its JSON twin: one page of the rows
// query_facts ranks for the filters.
type FactsPage struct {
	Query             string `json:"query,omitempty"`
	Entity            string `json:"entity,omitempty"`
	Key               string `json:"key,omitempty"`
	AsOf              string `json:"as_of,omitempty"`
	IncludeSuperseded bool   `json:"include_superseded,omitempty"`
	// Visibility keeps only private ("private") or shared ("shared")
	// facts; StaleOnly only the stale ones. Both filter the rows
	// query_facts ranks first (at most 1000), as Filtered says.
	Visibility string `json:"visibility,omitempty"`
	StaleOnly  bool   `json:"stale_only,omitempty"`
	// Agent, when set, keeps only the facts that agent wrote, a filter
	// of the same rows.
	Agent string `json:"agent,omitempty"`
	// Filtered says that the page shows the rows of query_facts' top
	// 1000 that pass Visibility, StaleOnly and Agent: a fact ranked below them
	// is not on any page.
	Filtered bool            `json:"filtered,omitempty"`
	Page     int             `json:"page"`     // from 0
	PerPage  int             `json:"per_page"` // at most MaxPerPage
	Rows     []tools.FactRow `json:"rows"`
	// Next is the URL of the next page, when more facts match within the
	// first 1000 query_facts ranks.
	Next string `json:"next,omitempty"`
	// Prev is the URL of the previous page.
	Prev string `json:"prev,omitempty"`
	// FilteredBelowThreshold counts the facts query_facts left out below
	// its confidence threshold.
	FilteredBelowThreshold int `json:"filtered_below_threshold"`
}

// intParam is the integer parameter name of r, def when absent, and
// whether it is between lo and hi.
func intParam(r *http.Request, name string, def, lo, hi int) (int, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= lo && n <= hi
}

func badParam(param, reason string) *crux.Error {
	return &crux.Error{Code: crux.CodeInvalidParams, Message: param + ": " + reason,
		Data: map[string]any{"param": param, "reason": reason}}
}

// facts is the facts list: query_facts for the filters, paged within its
// top 1000.
func (h *Handler) facts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := FactsPage{
		Query: strings.TrimSpace(q.Get("q")), Entity: q.Get("entity"), Key: q.Get("key"), AsOf: q.Get("as_of"),
		IncludeSuperseded: q.Get("superseded") == "1", Visibility: q.Get("visibility"), StaleOnly: q.Get("stale") == "1",
		Agent: strings.TrimSpace(q.Get("agent")),
	}
	if p.Visibility != "" && p.Visibility != "private" && p.Visibility != "shared" {
		h.fail(w, r, http.StatusBadRequest, badParam("visibility", `must be "private" or "shared"`))
		return
	}
	p.Filtered = p.Visibility != "" || p.StaleOnly || p.Agent != ""
	var ok bool
	if p.PerPage, ok = intParam(r, "per_page", DefaultPerPage, 1, MaxPerPage); !ok {
		h.fail(w, r, http.StatusBadRequest, badParam("per_page", "must be an integer from 1 to 100"))
		return
	}
	maxPage := maxRanked/p.PerPage - 1
	if p.Page, ok = intParam(r, "page", 0, 0, maxPage); !ok {
		h.fail(w, r, http.StatusBadRequest, badParam("page", "must be an integer from 0 to "+strconv.Itoa(maxPage)))
		return
	}
	args := map[string]any{"top_k": min((p.Page+1)*p.PerPage+1, maxRanked)}
	if p.Filtered {
		args["top_k"] = maxRanked // the filters pass over some of them
	}
	for k, v := range map[string]string{"query": p.Query, "entity": p.Entity, "key": p.Key, "as_of": p.AsOf} {
		if v != "" {
			args[k] = v
		}
	}
	if p.IncludeSuperseded {
		args["include_superseded"] = true
	}
	var out tools.QueryFactsOutput
	if !h.call(w, r, "query_facts", args, &out) {
		return
	}
	p.FilteredBelowThreshold = out.FilteredBelowThreshold
	if p.Filtered {
		kept := out.Rows[:0:0]
		for _, row := range out.Rows {
			if (p.Visibility == "private" && !row.Private) || (p.Visibility == "shared" && row.Private) ||
				(p.StaleOnly && row.Freshness != store.Stale) || (p.Agent != "" && row.WrittenBy != p.Agent) {
				continue
			}
			kept = append(kept, row)
		}
		out.Rows = kept
	}
	from, to := min(p.Page*p.PerPage, len(out.Rows)), min((p.Page+1)*p.PerPage, len(out.Rows))
	p.Rows = out.Rows[from:to]
	if p.Rows == nil {
		p.Rows = []tools.FactRow{}
	}
	link := func(page int) string {
		v := url.Values{}
		for k, s := range map[string]string{"q": p.Query, "entity": p.Entity, "key": p.Key, "as_of": p.AsOf, "agent": p.Agent} {
			if s != "" {
				v.Set(k, s)
			}
		}
		if p.IncludeSuperseded {
			v.Set("superseded", "1")
		}
		if p.Visibility != "" {
			v.Set("visibility", p.Visibility)
		}
		if p.StaleOnly {
			v.Set("stale", "1")
		}
		if p.PerPage != DefaultPerPage {
			v.Set("per_page", strconv.Itoa(p.PerPage))
		}
		if page > 0 {
			v.Set("page", strconv.Itoa(page))
		}
		if len(v) == 0 {
			return h.opts.Prefix
		}
		return h.opts.Prefix + "?" + v.Encode()
	}
	if len(out.Rows) > to && p.Page < maxPage {
		p.Next = link(p.Page + 1)
	}
	if p.Page > 0 {
		p.Prev = link(p.Page - 1)
	}
	h.render(w, r, http.StatusOK, "facts", "Facts", p)
}

// FactPage is a fact's page and its JSON twin: a page of the versions
// fact_history gives for (Entity, Key), newest first.
type FactPage struct {
	Entity   string             `json:"entity"`
	Key      string             `json:"key"`
	Versions []tools.VersionRow `json:"versions"`
	// Current is the current version (not deleted, not superseded) when
	// it is on this page.
	Current *tools.VersionRow `json:"current,omitempty"`
	// Next is the URL of the page of older versions.
	Next string `json:"next,omitempty"`
}

// fact is a fact's page: fact_history of (entity, key).
func (h *Handler) fact(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := FactPage{Entity: q.Get("entity"), Key: q.Get("key")}
	args := map[string]any{"entity": p.Entity, "key": p.Key, "limit": historyPerPage}
	if c := q.Get("cursor"); c != "" {
		args["cursor"] = c
	}
	var out tools.FactHistoryOutput
	if !h.call(w, r, "fact_history", args, &out) {
		return
	}
	if len(out.Versions) == 0 && q.Get("cursor") == "" {
		h.fail(w, r, http.StatusNotFound, &crux.Error{Code: crux.CodeInvalidParams,
			Message: "fact_history has no version of this entity and key that you may see",
			Data:    map[string]any{"entity": p.Entity, "key": p.Key}})
		return
	}
	p.Versions = out.Versions
	if p.Versions == nil {
		p.Versions = []tools.VersionRow{}
	}
	for i := range p.Versions {
		if v := &p.Versions[i]; !v.Deleted && v.SupersededBy == "" {
			p.Current = v
			break
		}
	}
	if out.NextCursor != "" {
		p.Next = factURL(h.opts.Prefix, p.Entity, p.Key) + "&cursor=" + url.QueryEscape(out.NextCursor)
	}
	h.render(w, r, http.StatusOK, "fact", p.Entity+" · "+p.Key, p)
}

// factURL is the URL of the page of (entity, key).
func factURL(prefix, entity, key string) string {
	return prefix + "fact?" + url.Values{"entity": {entity}, "key": {key}}.Encode()
}

// done answers a change: its JSON twin is the tool's output; the page
// goes on to next.
func (h *Handler) done(w http.ResponseWriter, r *http.Request, out any, next string) {
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, out)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// edit writes a new value under (entity, key): store_fact, as an agent
// corrects a fact, private if the version it replaces was.
func (h *Handler) edit(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	args := map[string]any{"entity": f.Get("entity"), "key": f.Get("key"), "value": f.Get("value")}
	if f.Get("private") == "1" {
		args["private"] = true
	}
	var out tools.StoreFactOutput
	if h.call(w, r, "store_fact", args, &out) {
		h.done(w, r, out, factURL(h.opts.Prefix, out.Entity, out.Key))
	}
}

// delete soft-deletes a fact's current version: delete_fact.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	var out tools.DeleteFactOutput
	if h.call(w, r, "delete_fact", map[string]any{"fact_id": f.Get("fact_id")}, &out) {
		h.done(w, r, out, factURL(h.opts.Prefix, f.Get("entity"), f.Get("key")))
	}
}

// forget is memory_forget of the form's scope, with its reason. Its page
// is the forget's, when an Operator can read it back and the caller may
// see it (not an anonymous caller, unless an operator), else the tool's
// answer.
func (h *Handler) forget(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	args := map[string]any{
		"scope":  map[string]any{"type": f.Get("scope_type"), "value": f.Get("scope_value")},
		"reason": f.Get("reason"),
	}
	var out tools.MemoryForgetOutput
	if !h.call(w, r, "memory_forget", args, &out) {
		return
	}
	if c := callerOf(r.Context()); h.opts.Operator != nil && mayRestore(c, isOperator(r.Context()), c.TenantID(), c.Identity()) {
		h.done(w, r, out, h.opts.Prefix+"forgets/"+url.PathEscape(out.ForgetReceiptID))
		return
	}
	h.render(w, r, http.StatusOK, "forgot", "Forgotten", out)
}

// ForgetPage is a forget's page and its JSON twin.
type ForgetPage struct {
	crux.ForgetInfo
	// Status is its purge status: restorable until the recovery window
	// ends, purge due once it has, restored, or purged.
	Status string `json:"status"`
	// Restorable says whether the view can restore it now: it is
	// forgotten and its recovery window has not ended.
	Restorable bool `json:"restorable"`
}

// ownForget reads the forget id for r's caller: only a forget of its
// tenant that the caller made (its identity is the forget's passport: an
// anonymous caller has made none it can be told apart by) is its to see
// and restore, or any forget of its tenant for an operator. Otherwise it
// answers r and returns nil.
func (h *Handler) ownForget(w http.ResponseWriter, r *http.Request, id string) *crux.ForgetInfo {
	op := h.opts.Operator
	if op == nil {
		h.fail(w, r, http.StatusNotFound, &crux.Error{Code: crux.CodeMethodNotFound, Message: "this view cannot read or restore forgets (no operator)"})
		return nil
	}
	c := callerOf(r.Context())
	info, err := op.ForgetStatus(r.Context(), id)
	notYours := &crux.Error{Code: crux.CodeInvalidParams, Message: "no forget of yours has this receipt id",
		Data: map[string]any{"param": "receipt_id", "reason": "not found"}}
	switch {
	case errors.Is(err, store.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, notYours)
		return nil
	case err != nil:
		h.logger.Error("crux: web: reading a forget", "receipt", id, "err", err)
		h.fail(w, r, http.StatusInternalServerError, &crux.Error{Code: crux.CodeInternalError, Message: "reading the forget: " + err.Error()})
		return nil
	case !mayRestore(c, isOperator(r.Context()), info.TenantID, info.PassportID):
		h.fail(w, r, http.StatusNotFound, notYours)
		return nil
	}
	return info
}

// mayRestore reports whether c (an operator, if op) may see and restore
// the forget that passport made in tenant.
func mayRestore(c crux.Caller, op bool, tenant, passport string) bool {
	if tenant != c.TenantID() {
		return false
	}
	return op || (c.Identity() != "" && passport == c.Identity())
}

// forgetPage shows one of the caller's forgets, with a restore button
// while it can be restored.
func (h *Handler) forgetPage(w http.ResponseWriter, r *http.Request) {
	info := h.ownForget(w, r, r.PathValue("id"))
	if info == nil {
		return
	}
	st, ok := status(ForgetRow{State: info.State, RecoveryWindowEndsAt: info.RecoveryWindowEndsAt, RestoredAt: info.RestoredAt,
		PurgedAt: info.PurgedAt, PurgeReceiptID: info.PurgeReceiptID}, h.opts.Now())
	h.render(w, r, http.StatusOK, "forget", "Forget "+info.ForgetReceiptID, ForgetPage{ForgetInfo: *info, Status: st, Restorable: ok})
}

// restore restores one of the caller's forgets through the Operator.
func (h *Handler) restore(w http.ResponseWriter, r *http.Request) {
	id := r.PostForm.Get("receipt_id")
	if h.ownForget(w, r, id) == nil {
		return
	}
	rep, err := h.opts.Operator.RestoreForget(r.Context(), id)
	var ce *crux.Error
	switch {
	case errors.As(err, &ce):
		h.fail(w, r, syncremote.HTTPStatus(ce.Code), ce)
		return
	case errors.Is(err, crux.ErrForgetRestored), errors.Is(err, crux.ErrForgetPurged), errors.Is(err, crux.ErrRecoveryWindowClosed):
		h.fail(w, r, http.StatusConflict, &crux.Error{Code: crux.CodeConflict, Message: err.Error()})
		return
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, &crux.Error{Code: crux.CodeInternalError, Message: "restoring the forget: " + err.Error()})
		return
	}
	h.done(w, r, rep, h.opts.Prefix+"forgets/"+url.PathEscape(id))
}
