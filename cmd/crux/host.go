package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/c2pa"
	"github.com/crux-go/crux/internal/owner"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/store/postgres"
)

// Every command reaches the store through an owner.Conn: the process that
// owns the data directory runs the command's operations on its open store,
// whichever process asked (see package internal/owner). An operation is
// one of the ops below, with a JSON request and a JSON answer; the owner's
// own operations take the same path, so a forwarded operation answers
// exactly what it would answer in the process that owns the store.
const (
	opList     = "tools/list"     // listReq → []crux.Tool, or null (see listing.go)
	opCall     = "tools/call"     // callReq → callAnswer
	opRestore  = "forget/restore" // restoreReq → crux.RestoreReport
	opPurge    = "purge"          // purgeReq → crux.PurgeReport
	opReceipt  = "receipt/get"    // receiptReq → receipts.Exported
	opChain    = "chain/audit"    // chainReq → receipts.ChainAudit
	opReceipts = "receipts/list"  // receiptsReq → receiptsAnswer
	opDoctor   = "doctor"         // doctorReq → doctorAnswer
	opForgets  = "forgets/list"   // forgetsReq → forgetsAnswer
	// opIngest and opDeleteDocs are crux ingest's (see ingest.go).
	opIngest     = "docs/ingest" // ingestReq → crux.IngestStats
	opDeleteDocs = "docs/delete" // deleteDocsReq → deleteDocsAnswer
	opCompact    = "compact"     // compactReq → {}
	// The serving side of sync, for crux serve --http (see sync.go).
	opSyncIdentity = "sync/identity" // syncReq → crux.RemoteIdentity
	opSyncChanges  = "sync/changes"  // syncReq → crux.ChangesResponse
	opSyncPush     = "sync/push"     // syncReq → crux.PushResponse
)

// wireCaller is a crux.Caller on the socket. The transport travels with
// it, so that a forwarded call describes the transport of the process
// that received it (route_access_matrix), not the owner's.
type wireCaller struct {
	Agent         string         `json:"agent,omitempty"`
	Authenticated bool           `json:"authenticated,omitempty"`
	Tenant        string         `json:"tenant,omitempty"`
	Replica       bool           `json:"replica,omitempty"`
	Transport     *wireTransport `json:"transport,omitempty"`
}

// wireTransport is a crux.Transport on the socket.
type wireTransport struct {
	Kind      string `json:"kind,omitempty"`
	Path      string `json:"path,omitempty"`
	Tokens    bool   `json:"tokens,omitempty"`
	Anonymous bool   `json:"anonymous,omitempty"`
	Stateless bool   `json:"stateless,omitempty"`
}

func toWire(c crux.Caller) wireCaller {
	w := wireCaller{Agent: c.Agent, Authenticated: c.Authenticated, Tenant: c.Tenant, Replica: c.Replica}
	if c.Transport != (crux.Transport{}) {
		t := wireTransport(c.Transport)
		w.Transport = &t
	}
	return w
}

func (w wireCaller) caller() crux.Caller {
	c := crux.Caller{Agent: w.Agent, Authenticated: w.Authenticated, Tenant: w.Tenant, Replica: w.Replica}
	if w.Transport != nil {
		c.Transport = crux.Transport(*w.Transport)
	}
	return c
}

// The requests. Env is the forwarding process's CRUX_* and CORECRUXD_*
// variables: the owner reads the feature flags from them, so a call runs
// with the flags of the process that made it.
type (
	listReq struct {
		Env    []string   `json:"env"`
		Caller wireCaller `json:"caller"`
		// Have is the SHA-256 of the answer the forwarding process holds
		// for Caller, if any: the owner answers null when the list
		// encodes to it (see listing.go).
		Have string `json:"have,omitempty"`
	}
	callReq struct {
		Env    []string        `json:"env"`
		Caller wireCaller      `json:"caller"`
		Name   string          `json:"name"`
		Args   json.RawMessage `json:"args,omitempty"`
	}
	restoreReq struct {
		Env       []string `json:"env"`
		ReceiptID string   `json:"receipt_id"`
	}
	purgeReq struct {
		Env []string `json:"env"`
	}
	receiptReq struct {
		ID string `json:"id"`
	}
	chainReq struct {
		Tenant  string          `json:"tenant"`
		Keyring json.RawMessage `json:"keyring"`
	}
	receiptsReq struct {
		Tenant string `json:"tenant"`
		Kind   string `json:"kind,omitempty"`
		Limit  int    `json:"limit"`
	}
	doctorReq struct {
		Repair bool `json:"repair,omitempty"`
	}
)

// receiptsAnswer is the answer of opReceipts.
type receiptsAnswer struct {
	Receipts []listedReceipt `json:"receipts"`
	// Truncated says that more receipts match than the limit listed.
	Truncated bool `json:"truncated,omitempty"`
	// WalkError is the error that stopped the walk of the chain early
	// (an unreadable receipt); the receipts before it are listed.
	WalkError string `json:"walk_error,omitempty"`
}

// doctorAnswer is the answer of opDoctor: each line of the report.
type doctorAnswer struct {
	Removed    []string `json:"removed,omitempty"`  // what --repair removed
	Problems   []string `json:"problems,omitempty"` // records and index entries
	Repairable int      `json:"repairable"`         // how many Problems --repair removes
	Chains     []string `json:"chains,omitempty"`   // receipt chains that do not link
}

// flagVariable reports whether the variable named k may change how a
// server behaves (a feature flag or setting), and so travels with every
// forwarded call.
func flagVariable(k string) bool {
	return strings.HasPrefix(k, "CORECRUXD_") || strings.HasPrefix(k, "CRUX_")
}

// host is the owner's side of the operations: the store it has open and a
// crux server per set of feature flags that forwarding processes use.
type host struct {
	where  string // the store, for messages: DIR/crux.db or the database
	db     store.Backend
	signer *receipts.Ed25519Signer
	logger *slog.Logger

	engramDir  string // engram_resolve's directory of engram files
	dir        string // the data directory: the C2PA root CA, audit bundles, custody checks
	attestRoot string // output_attest's content root
	checkout   string // update_status's source checkout

	mu      sync.Mutex
	servers map[string]*crux.Server // by the flag variables, sorted and joined
	ca      *c2pa.CA                // the data directory's C2PA root, once a server attests

	answers listAnswers // the encoded tools/list answers (listing.go)
}

// maxServers bounds the servers a host keeps, one per distinct set of
// flag variables it has been called with. Past it, one is dropped (and
// made again, seeding and purging as any new server does, if its flags
// come back).
const maxServers = 16

// openHost opens the store (a PostgreSQL database, or DIR/crux.db,
// creating the directory and the file if needed) and returns the host over
// it. The bbolt lock is not waited for: owner.Join retries while another
// process holds it.
func openHost(ctx context.Context, s *setup, logger *slog.Logger) (*host, error) {
	signer, err := s.signer()
	if err != nil {
		return nil, err
	}
	h := &host{signer: signer, logger: logger, servers: map[string]*crux.Server{}, engramDir: s.engramDir,
		dir: s.dir, attestRoot: s.attestRoot, checkout: s.checkout}
	if s.storeURL != "" {
		db, err := postgres.Open(ctx, s.storeURL, nil)
		if err != nil {
			return nil, err
		}
		h.db, h.where = db, "the PostgreSQL store"
		return h, nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	h.where = filepath.Join(s.dir, dbFile)
	db, err := bolt.Open(h.where, &bolt.Options{LockTimeout: -1})
	if err != nil {
		return nil, err // bolt.ErrLocked: owner.Join tries again
	}
	h.db = db
	return h, nil
}

// server returns the crux server for the flag variables env, created on
// first use: with the flags FlagsFromEnv reads from env and a free-local
// capability token under the directory's key, which it enforces.
func (h *host) server(env []string) (*crux.Server, error) {
	env = slices.Clone(env)
	sort.Strings(env)
	key := strings.Join(env, "\x00")
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.servers[key]; ok {
		return s, nil
	}
	flags, _ := crux.FlagsFromEnv(env, commandVariables...) // the caller has reported the warnings
	tok, err := rcx.MintFreeLocal(h.signer, rcx.FreeLocalOptions{
		Tenant:       crux.DefaultTenant,
		Capabilities: crux.FreeLocalCapabilities(flags),
	})
	if err != nil {
		return nil, fmt.Errorf("minting the free-local token: %w", err)
	}
	router, err := rcx.NewRouter(tok, h.signer.Public(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the router: %w", err)
	}
	if flags.C2PAOutput && h.ca == nil {
		// Created on first use, once: a manifest chains to this root.
		if h.ca, err = c2pa.LoadOrCreateCA(h.dir, time.Now()); err != nil {
			return nil, fmt.Errorf("the C2PA root CA: %w", err)
		}
	}
	srv, err := crux.NewServer(h.db, &crux.Options{Flags: &flags, Logger: h.logger, Signer: h.signer, Router: router,
		EngramDir: h.engramDir, AttestCA: h.ca, AttestRoot: h.attestRoot, DataDir: h.dir, Checkout: h.checkout,
		Remote: syncRemote(flags, h.logger)})
	if err != nil {
		return nil, err
	}
	// Every command that opens the store purges what is due, and meets a
	// store it cannot prepare when it starts.
	if err := srv.Prepare(context.Background()); err != nil {
		return nil, err
	}
	if len(h.servers) >= maxServers {
		// Drop one. It is not closed: a call may still be running on it,
		// and a server holds nothing but memory (the store is the host's).
		for k := range h.servers {
			delete(h.servers, k)
			break
		}
	}
	h.servers[key] = srv
	return srv, nil
}

// Close closes every server and the store.
func (h *host) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.servers {
		s.Close()
	}
	return h.db.Close()
}

// Handle runs one operation (see the op constants).
func (h *host) Handle(ctx context.Context, op string, raw json.RawMessage) (json.RawMessage, error) {
	run, ok := operations[op]
	if !ok {
		return nil, fmt.Errorf("the owning process does not know the operation %q: it runs another crux version", op)
	}
	res, err := run(h, ctx, raw)
	if err != nil {
		var ce *crux.Error
		if errors.As(err, &ce) {
			we := &owner.Error{Code: ce.Code, Message: ce.Message}
			if ce.Data != nil {
				if we.Data, err = json.Marshal(ce.Data); err != nil {
					return nil, fmt.Errorf("encoding the data of error %d: %w", ce.Code, err)
				}
			}
			return nil, we
		}
		return nil, err
	}
	if raw, ok := res.(json.RawMessage); ok {
		return raw, nil // encoded already, compact and without escaping
	}
	return marshal(res)
}

// marshal encodes an answer as compact JSON without escaping <, > and &,
// so that crux call prints it as it printed a result of its own.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// operation is the host's side of one op: it decodes the request and runs
// it.
type operation func(h *host, ctx context.Context, raw json.RawMessage) (any, error)

// operations are the ops a host runs (see the op constants).
var operations = map[string]operation{
	opList:     decoding((*host).list),
	opCall:     decoding((*host).call),
	opRestore:  decoding((*host).restore),
	opPurge:    decoding((*host).purge),
	opReceipt:  decoding((*host).receipt),
	opChain:    decoding((*host).chain),
	opReceipts: decoding((*host).receipts),
	opDoctor:   decoding((*host).doctor),
	opForgets:  decoding((*host).forgets),

	opForgetStatus: decoding((*host).forgetStatus), // ui.go
	opChainPage:    decoding((*host).chainPage),
	opHandoffs:     decoding((*host).handoffs),

	opIngest:     decoding((*host).ingest),
	opDeleteDocs: decoding((*host).deleteDocs),
	opCompact:    decoding((*host).compact),

	opExportMemories: decoding((*host).exportMemories), // memories.go
	opImportMemories: decoding((*host).importMemories),
	opSyncIdentity:   decoding((*host).syncIdentity),
	opSyncChanges:    decoding((*host).syncChanges),
	opSyncPush:       decoding((*host).syncPush),
}

// decoding makes an operation of a method taking the decoded request.
func decoding[R any](run func(h *host, ctx context.Context, req R) (any, error)) operation {
	return func(h *host, ctx context.Context, raw json.RawMessage) (any, error) {
		var req R
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("a malformed request to the owning process: %w", err)
		}
		return run(h, ctx, req)
	}
}

// callAnswer is a crux.Result on the socket. When its one text item is
// the structured content's JSON, as most tools answer, the text is not
// sent a second time: TextIsStructured says to make it from the
// structured content, which is the same bytes.
type callAnswer struct {
	Content           []crux.Content  `json:"content,omitempty"`
	TextIsStructured  bool            `json:"text_is_structured,omitempty"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	Meta              map[string]any  `json:"_meta,omitempty"`
}

func (h *host) call(ctx context.Context, req callReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	res, err := srv.CallTool(ctx, req.Caller.caller(), req.Name, req.Args)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &crux.Result{}
	}
	out := &callAnswer{Content: res.Content, IsError: res.IsError, Meta: res.Meta}
	if res.StructuredContent != nil {
		if out.StructuredContent, err = marshal(res.StructuredContent); err != nil {
			return nil, err
		}
		if len(res.Content) == 1 && res.Content[0].Type == "text" && res.Content[0].Text == string(out.StructuredContent) {
			out.Content, out.TextIsStructured = nil, true
		}
	}
	return out, nil
}

func (h *host) restore(ctx context.Context, req restoreReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	return srv.RestoreForget(ctx, req.ReceiptID)
}

// purge purges every forget past its recovery window (see purgeCmd). A
// server purges when it is created, so the report also lists the forgets
// that were due when the operation began and that creating the server
// purged.
func (h *host) purge(ctx context.Context, req purgeReq) (any, error) {
	var due []string
	if err := h.db.View(ctx, func(tx store.Tx) error {
		var err error
		due, err = store.DueForgets(tx, time.Now())
		return err
	}); err != nil {
		return nil, err
	}
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	rep, err := srv.Purge(ctx)
	if err != nil {
		return nil, err
	}
	var onOpen []crux.PurgedForget
	for _, id := range due {
		if slices.ContainsFunc(rep.Purged, func(p crux.PurgedForget) bool { return p.ForgetReceiptID == id }) {
			continue
		}
		st, err := srv.ForgetStatus(ctx, id)
		if err != nil {
			return nil, err
		}
		if st.State == "purged" {
			onOpen = append(onOpen, crux.PurgedForget{
				ForgetReceiptID: id, PurgeReceiptID: st.PurgeReceiptID, TenantID: st.TenantID,
				PurgedFactIDs: st.FactIDs, RecoveryWindowEndedAt: st.RecoveryWindowEndsAt,
			})
		}
	}
	if len(onOpen) > 0 {
		// The creation's purge compacted, or left the work to Purge, which
		// would have failed had it not succeeded.
		rep.Purged = append(onOpen, rep.Purged...)
		rep.Compacted = rep.Compacted || !rep.CompactionUnsupported
	}
	return rep, nil
}

func (h *host) receipt(ctx context.Context, req receiptReq) (any, error) {
	var r *receipts.Receipt
	err := h.db.View(ctx, func(tx store.Tx) error {
		var err error
		r, err = receipts.Get(tx, req.ID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("no receipt %s in %s", req.ID, h.where)
	}
	if err != nil {
		return nil, err
	}
	return receipts.Export(r), nil
}

func (h *host) chain(ctx context.Context, req chainReq) (any, error) {
	kr, err := receipts.ParseKeyring(req.Keyring)
	if err != nil {
		return nil, err
	}
	var a receipts.ChainAudit
	err = h.db.View(ctx, func(tx store.Tx) error {
		var err error
		a, err = receipts.AuditChain(tx, req.Tenant, kr, time.Now())
		return err
	})
	return a, err
}

func (h *host) receipts(ctx context.Context, req receiptsReq) (any, error) {
	out := receiptsAnswer{Receipts: []listedReceipt{}}
	req.Limit = min(max(req.Limit, 1), maxListLimit)
	err := h.db.View(ctx, func(tx store.Tx) error {
		walkErr := receipts.ChainNewestFirst(tx, req.Tenant, func(r *receipts.Receipt) error {
			if req.Kind != "" && r.Kind != req.Kind {
				return nil
			}
			if len(out.Receipts) == req.Limit {
				out.Truncated = true // one more matches
				return store.ErrStop
			}
			l := listedReceipt{ReceiptID: r.ID, TenantID: r.Tenant, Seq: r.Seq, Kind: r.Kind}
			if hd, err := r.Header(); err == nil {
				l.Actor, l.CreatedAt = hd.Actor, hd.CreatedAt.UTC().Format(time.RFC3339Nano)
			}
			out.Receipts = append(out.Receipts, l)
			return nil
		})
		if walkErr != nil {
			out.WalkError = walkErr.Error()
		}
		return nil
	})
	return out, err
}

// doctor checks the store (see doctorCmd), repairing it first when asked.
func (h *host) doctor(ctx context.Context, req doctorReq) (any, error) {
	out := doctorAnswer{}
	if req.Repair {
		var removed []store.Problem
		if err := h.db.Update(ctx, func(tx store.Tx) error {
			var err error
			removed, err = store.Repair(tx)
			return err
		}); err != nil {
			return nil, fmt.Errorf("repairing the store (nothing was removed): %w", err)
		}
		for _, p := range removed {
			out.Removed = append(out.Removed, p.String())
		}
	}
	err := h.db.View(ctx, func(tx store.Tx) error {
		problems, err := store.DiagnoseAt(tx, time.Now())
		if err != nil {
			return err
		}
		for _, p := range problems {
			out.Problems = append(out.Problems, p.String())
			if p.Repairable {
				out.Repairable++
			}
		}
		tenants, err := receipts.Tenants(tx)
		if err != nil {
			return err
		}
		for _, t := range tenants {
			err := receipts.VerifyStoredChain(tx, t)
			var ce *receipts.ChainError
			var re *store.CorruptRecordError
			if errors.As(err, &ce) || errors.As(err, &re) {
				out.Chains = append(out.Chains, err.Error())
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}
