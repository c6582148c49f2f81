// Package owner lets many processes share one data directory. Exactly one
// of them, the owner, has the store open; every other process on the
// directory forwards its operations to the owner over a Unix socket in the
// directory, and gets back exactly the answer the owner's own process would
// have got.
//
// # Who owns
//
// The owner is whichever process first finds no owner: a crux serve
// started by an MCP client, or a crux call, crux verify, ... run from a
// shell. There is no separate daemon. Every process calls [Join], which
// connects to the owner's socket if one answers, and otherwise opens the
// store itself (the store's own file lock decides between processes that
// try at once) and starts listening. Any process may therefore become the
// owner at any time, including one that was forwarding a moment before.
//
// This was chosen over a background daemon that serve starts on demand
// (the shape of gopls's -remote=auto) for three reasons. A process is owner
// only while something uses it, so nothing keeps running, or holds the
// store, after the last client has gone, and there is no idle timeout to
// tune. The owner's own calls run in-process, as they did before sharing
// existed: a lone crux serve pays nothing for it. And the process that
// owns is one an MCP client started and watches, with the environment and
// the logs the user gave it, not a detached process that outlives them.
// The cost is the hand-over: when the owner ends, another process takes
// over, which [Conn] does by itself.
//
// # Hand-over
//
// When the owner closes its [Conn] (its client closed standard input, a
// signal, the end of a crux call), it stops accepting connections and
// removes the socket; stops reading requests; runs every request it has
// read to the end and writes its answer; then sends a goodbye on every
// connection and closes the store. A forwarding process that reads the
// goodbye knows that every request it has no answer for was never read,
// so it sends those, and every later one, to the next owner, which it
// finds or becomes as [Join] does. No operation fails and none runs twice.
//
// When the owner is stopped (SIGSTOP) or hung, its connections stay open
// but nothing answers. A forwarding process with requests waiting pings
// the owner every second; when a ping stays unanswered for
// [Options.AnswerTimeout], every request waiting fails with a
// [*NotAnsweringError] naming the owner's pid (such a request was read,
// or may be, and may still run when the owner resumes), and so does each
// new request, at once and without being sent, until the owner answers
// again. A process that joins meanwhile connects but gets no hello: it
// fails with the same error instead of waiting for the store's lock.
//
// When the owner is killed, its connections end without a goodbye. A
// request sent and not answered may or may not have run: [Conn.Do] fails
// it with [ErrOwnerGone]. The kernel releases the dead owner's file lock at
// once, so the next operation finds or becomes a new owner within
// milliseconds. An answered write is durable (the store commits with
// fsync before the owner answers), so a kill loses no acknowledged write.
//
// A socket file left by a killed owner does not answer; the process that
// next takes the store's lock removes it and listens in its place.
//
// # Who may connect
//
// The socket is created with mode 0600 in the data directory (which the
// crux command creates with mode 0700), so only the user who owns the
// directory can connect. The owner also checks the peer of every
// connection (its user id, from SO_PEERCRED on Linux) and drops one from
// another user without reading from it; on systems without that check the
// file modes are the whole guard. A forwarding process checks the socket
// before it connects: it must be a socket owned by its own user with no
// permission for group or others, else it is not used.
//
// The owner trusts what a connected peer says about who is calling (agent
// name, authenticated or not, tenant): the peer runs as the same user, who
// could equally have started a crux serve for any agent name, so the owner
// gives a forwarded call exactly the standing the forwarding process gives
// its own client. Nothing else a peer sends is trusted beyond what that
// user could do with the store directly.
//
// # Wire format
//
// A connection carries one JSON object per line. The owner first sends
// {"hello":PROTOCOL,"pid":N}; the client checks PROTOCOL. Then the client
// sends {"id":N,"op":"...","req":{...}} and the owner answers each with
// {"id":N,"res":{...}} or {"id":N,"err":{"code","message","data"}}, in
// any order (operations run concurrently), and finally {"bye":true}. The
// client may send {"ping":N} at any time; the owner answers {"pong":N} as
// soon as it reads it, whatever operations are running.
package owner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"
)

// SocketName is the name of the owner's socket in the data directory.
const SocketName = "crux.sock"

// protocol names the wire format; a process speaking another one (another
// crux version) is not used.
const protocol = "crux-owner/2"

// DefaultAnswerTimeout is how long an owner may leave a ping unanswered
// when [Options.AnswerTimeout] is zero.
const DefaultAnswerTimeout = 5 * time.Second

// NotAnsweringError is the error of an operation for an owner that holds
// the store but does not answer: stopped (SIGSTOP), or hung.
type NotAnsweringError struct {
	Dir  string        // the data directory
	PID  int           // the owner's process id; 0 when unknown
	For  time.Duration // how long it has not answered
	Sent bool          // the request had been sent: it may still run
}

func (e *NotAnsweringError) Error() string {
	who := "the process owning " + e.Dir
	resume := "kill -CONT resumes a stopped process"
	if e.PID != 0 {
		who = fmt.Sprintf("%s (pid %d)", who, e.PID)
		resume = fmt.Sprintf("kill -CONT %d resumes it if it was stopped", e.PID)
	}
	outcome := "the call was not sent: nothing of it is applied"
	if e.Sent {
		outcome = "the call had been sent: it may or may not be applied when that process resumes"
	}
	return fmt.Sprintf("%s has not answered for %s: it is stopped or hung; %s, and stopping it lets another process take over the store; %s",
		who, e.For.Round(100*time.Millisecond), resume, outcome)
}

// DefaultJoinTimeout is how long [Conn.Do] tries to reach or become an
// owner when [Options.JoinTimeout] is zero.
const DefaultJoinTimeout = 10 * time.Second

// maxLine bounds one message on the socket. It is above any request crux
// accepts (crux call bounds its arguments to 64 MiB) and any answer crux
// gives.
const maxLine = 128 << 20

// ErrOwnerGone is the error of an operation that was sent to an owner
// which then ended without answering it (it was killed, or crashed): the
// operation may or may not have run.
var ErrOwnerGone = errors.New("the owning process ended; the call may or may not have been applied")

// errNoSockets reports that this system cannot share a data directory: an
// owner then serves its own process only, and other processes find the
// store locked.
var errNoSockets = errors.New("owner: sharing a data directory needs Unix sockets")

// ErrClosed is the error of an operation on a closed [Conn].
var ErrClosed = errors.New("owner: connection closed")

// Host serves the operations of the process that owns the store.
type Host interface {
	// Handle runs the operation op with the request req and returns its
	// answer. An error it returns reaches the caller of Do: an *Error as
	// it is, any other error as an *Error of code 0 with its text. Handle
	// is called concurrently.
	Handle(ctx context.Context, op string, req json.RawMessage) (json.RawMessage, error)
	// Close closes the store. It is called once, after every Handle has
	// returned.
	Close() error
}

// Error is an error of an operation as it crosses the socket: the JSON-RPC
// code (0 for an error that has none), the message and the data.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Options configures [Join].
type Options struct {
	// Open opens the store and returns the host that serves it, when this
	// process finds no owner. An error for which Busy reports true means
	// another process holds the store (it is becoming the owner, or just
	// stopped being one): Join then tries again. Open is required.
	Open func() (Host, error)
	// Busy reports whether an error of Open means the store is held by
	// another process. Nil means no error does.
	Busy func(error) bool
	// JoinTimeout is how long to try to reach or become an owner before
	// failing. Zero means DefaultJoinTimeout.
	JoinTimeout time.Duration
	// AnswerTimeout is how long the owner may leave a ping (and a new
	// connection its hello) unanswered before the requests waiting for it
	// fail with a *NotAnsweringError. Zero means DefaultAnswerTimeout.
	AnswerTimeout time.Duration
	// Logger receives the hand-overs and refused connections. Nil discards
	// them.
	Logger *slog.Logger
}

// Conn is a process's access to the store of a data directory: through the
// owner, or, when this process is the owner, directly. It is safe for
// concurrent use.
type Conn struct {
	dir, sock string
	opts      Options
	logger    *slog.Logger

	mu     sync.Mutex
	own    *ownerSide  // non-nil while this process owns the store
	remote *clientSide // non-nil while connected to another owner
	closed bool
}

// Join returns the process's access to the store of the data directory
// dir: connected to its owner, or, when there is none, as the owner. The
// directory must exist.
func Join(ctx context.Context, dir string, opts Options) (*Conn, error) {
	if opts.Open == nil {
		return nil, errors.New("owner: Options.Open is required")
	}
	if opts.JoinTimeout == 0 {
		opts.JoinTimeout = DefaultJoinTimeout
	}
	if opts.AnswerTimeout == 0 {
		opts.AnswerTimeout = DefaultAnswerTimeout
	}
	if opts.Busy == nil {
		opts.Busy = func(error) bool { return false }
	}
	c := &Conn{dir: dir, sock: filepath.Join(dir, SocketName), opts: opts, logger: opts.Logger}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.join(ctx, false); err != nil {
		return nil, err
	}
	return c, nil
}

// Owner reports whether this process owns the store now.
func (c *Conn) Owner() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.own != nil
}

// Local runs fn with this process's host when this process owns the
// store, and reports whether it did; a forwarding process gets false and
// sends its operation with Do. The owner does not hand over while fn runs.
// It lets the owner's own calls skip the encoding that Do's requests and
// answers go through.
func (c *Conn) Local(fn func(Host) error) (bool, error) {
	c.mu.Lock()
	own := c.own
	c.mu.Unlock()
	if own == nil {
		return false, nil
	}
	return own.local(fn)
}

// Do runs the operation op with the request req, on this process's host
// when it owns the store, else on the owner's. When the owner hands over
// before reading the request, Do sends it to the next owner (finding or
// becoming one as Join does). When the owner ends without answering a
// request it had been sent, Do returns ErrOwnerGone. An error of the
// operation itself is an *Error.
func (c *Conn) Do(ctx context.Context, op string, req json.RawMessage) (json.RawMessage, error) {
	for {
		own, remote, err := c.current(ctx)
		if err != nil {
			return nil, err
		}
		if own != nil {
			res, err := own.do(ctx, op, req)
			if errors.Is(err, errResend) {
				continue // closed meanwhile by Close; current reports it
			}
			return res, err
		}
		res, err := remote.do(ctx, op, req)
		switch {
		case errors.Is(err, errResend):
			c.drop(remote)
			continue
		case errors.Is(err, ErrOwnerGone):
			c.drop(remote)
		}
		return res, err
	}
}

// current returns the owner side or the client side to send an operation
// to, joining again when the connection to the last owner has ended.
func (c *Conn) current(ctx context.Context) (*ownerSide, *clientSide, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, ErrClosed
	}
	if c.remote != nil && c.remote.ended() {
		c.remote = nil
	}
	if c.own == nil && c.remote == nil {
		if err := c.join(ctx, true); err != nil {
			return nil, nil, err
		}
	}
	return c.own, c.remote, nil
}

// drop forgets the connection cs once it has ended.
func (c *Conn) drop(cs *clientSide) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.remote == cs {
		c.remote = nil
	}
}

// join connects to the owner or becomes it, trying until the join timeout
// or ctx ends; again says that an earlier owner has ended. c.mu is held.
func (c *Conn) join(ctx context.Context, again bool) error {
	deadline := time.Now().Add(c.opts.JoinTimeout)
	var last error
	for delay := time.Millisecond; ; delay = min(2*delay, 25*time.Millisecond) {
		cs, err := dial(c.dir, c.sock, c.opts.AnswerTimeout, c.logger)
		if err == nil {
			c.remote = cs
			return nil
		}
		last = err
		var na *NotAnsweringError
		if errors.As(err, &na) {
			return err // an owner holds the store and does not answer: its lock will not come free
		}
		host, err := c.opts.Open()
		if err == nil {
			own, err := listen(c.sock, host, c.logger)
			if err != nil {
				return errors.Join(fmt.Errorf("owner: listening on %s: %w", c.sock, err), host.Close())
			}
			c.own = own
			if again {
				c.logger.Info("crux: took over the store from the process that owned it", "dir", c.dir)
			}
			return nil
		}
		if !c.opts.Busy(err) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("owner: no process owning %s answered within %s, and the store stayed locked: %w (last connection attempt: %v)",
				c.dir, c.opts.JoinTimeout, err, last)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close ends the process's access. An owner hands over (see the package
// documentation): it stops accepting and reading, answers every request it
// has read, says goodbye to every connection and closes the store. A
// forwarding process closes its connection. Operations in progress in
// this process finish first; later ones fail with ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	own, remote := c.own, c.remote
	c.own, c.remote = nil, nil
	c.mu.Unlock()
	var err error
	if remote != nil {
		err = remote.close()
	}
	if own != nil {
		err = errors.Join(err, own.close())
	}
	return err
}

// errResend is the internal error of a request the owner never read: it
// may be sent to the next owner.
var errResend = errors.New("owner: not read by the owner; send again")

// wireMsg is one message on the socket, in either direction.
type wireMsg struct {
	Hello string          `json:"hello,omitempty"`
	PID   int             `json:"pid,omitempty"`
	Ping  uint64          `json:"ping,omitempty"`
	Pong  uint64          `json:"pong,omitempty"`
	ID    uint64          `json:"id,omitempty"`
	Op    string          `json:"op,omitempty"`
	Req   json.RawMessage `json:"req,omitempty"`
	Res   json.RawMessage `json:"res,omitempty"`
	Err   *Error          `json:"err,omitempty"`
	Bye   bool            `json:"bye,omitempty"`
}

// asWireError converts an error of Handle to its wire form.
func asWireError(err error) *Error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	return &Error{Message: err.Error()}
}
