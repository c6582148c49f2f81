package mcpserver

import (
	"bytes"
	"context"
	"errors"

	"github.com/crux-go/crux/internal/codec"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport is the transport StdioTransport returns: a connection
// over a framer.
type stdioTransport struct{ f *framer }

// errConnected is the error of a second Connect.
var errConnected = errors.New("mcpserver: a StdioTransport connects only once")

// Connect starts reading the input and returns the connection over the
// framer.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	t.f.mu.Lock()
	connected := t.f.connected
	t.f.connected = true
	t.f.mu.Unlock()
	if connected {
		return nil, errConnected
	}
	t.f.start()
	return &framerConn{f: t.f}, nil
}

// framerConn is the SDK's connection over a framer. It does what the SDK's
// own newline-delimited connection (mcp.IOTransport) does, less the
// decoding: the framer has checked each line with the SDK's decoder
// already, and Read returns the message it made, so a message is decoded
// once, not three times (the SDK's reader decodes each line with
// json.Decoder, then twice more, each time zeroing a 32 KiB buffer).
// Write encodes a message with the SDK's encoder and writes it as one
// line; a reply clears its call from the framer's pending calls first.
// Batches, which the SDK's connection also handles, never reach it: the
// framer answers them.
type framerConn struct{ f *framer }

func (c *framerConn) Read(ctx context.Context) (jsonrpc.Message, error) { return c.f.next(ctx) }

func (c *framerConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, _ := msg.(*jsonrpc.Response)
	line, err := encodeLine(msg, resp)
	if err != nil {
		return err
	}
	if resp != nil && resp.ID.IsValid() {
		c.f.replied(resp.ID.Raw())
	}
	_, err = c.f.writeLine(line)
	return err
}

// encodeLine is the line jsonrpc.EncodeMessage(msg) and a newline make. A
// response with a result is written directly, the result spliced in as it
// is between the members the encoder writes: the SDK marshals every result
// with its own encoder (jsonrpc2.NewResponse), so it is compact and valid,
// and the encoder's pass over it would change nothing (a test holds the
// two equal). That pass costs more than the rest of the write: about 5 ns
// a byte of the answer. A result holding a newline, which no compact
// encoding does, goes through the encoder.
func encodeLine(msg jsonrpc.Message, resp *jsonrpc.Response) ([]byte, error) {
	if resp != nil && resp.Error == nil && len(resp.Result) > 0 && resp.ID.IsValid() && bytes.IndexByte(resp.Result, '\n') < 0 {
		if id, err := codec.MarshalNoEscape(resp.ID.Raw()); err == nil {
			line := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(resp.Result)+1)
			line = append(line, `{"jsonrpc":"2.0","id":`...)
			line = append(line, id...)
			line = append(line, `,"result":`...)
			line = append(line, resp.Result...)
			return append(line, "}\n"...), nil
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

func (c *framerConn) Close() error { return c.f.Close() }

func (c *framerConn) SessionID() string { return "" }

// serve runs s over t until the input ends or ctx is done. When ctx is
// done, the framer stops reading; the calls it has read run to completion
// and their replies are written before serve returns ctx.Err(). The
// SDK's own handling of a done context (ServerSession.Close) would drop
// those replies: the jsonrpc2 connection refuses every write once it is
// closing.
func (t *stdioTransport) serve(ctx context.Context, s *mcp.Server, a *adapter) error {
	stop := context.AfterFunc(ctx, t.f.stop)
	defer stop()
	err := t.run(context.WithoutCancel(ctx), s, a)
	if err == nil && t.f.stoppedByStop() {
		return ctx.Err()
	}
	return err
}

// run is s.Run(ctx, t), logging as it does, with the framer's direct path
// (see direct.go) for the tools/call of a's handlers; without an adapter,
// every message goes to the SDK. It returns once the SDK's session has
// ended and every direct call has written its answer.
func (t *stdioTransport) run(ctx context.Context, s *mcp.Server, a *adapter) error {
	if a == nil {
		return s.Run(ctx, t)
	}
	a.logger.Info("server run start")
	ss, err := s.Connect(ctx, t, nil)
	if err != nil {
		a.logger.Error("server connect failed", "error", err)
		return err
	}
	t.f.direct.Store(&directPath{ctx: ctx, a: a, session: ss})
	err = ss.Wait()
	t.f.wg.Wait()
	if err != nil {
		a.logger.Error("server session ended with error", "error", err)
	} else {
		a.logger.Info("server session ended")
	}
	return err
}
