// The stdio systems ask the same tools as crux and crux-facts, but of a
// crux serve process over MCP's stdio transport, as an MCP client does:
// their latencies are what a client sees, framing and JSON included, and
// their rankings must equal the in-process systems'.

package retrieval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/crux-go/crux/tools"
)

// RegisterStdio registers crux-stdio and crux-facts-stdio, which run the
// crux command at bin (crux serve --data DIR) and call its tools over
// standard input and output.
func RegisterStdio(bin string) {
	Register(Factory{Name: "crux-stdio", New: func(dir string) (System, error) {
		return &cruxStdio{bin: bin, dir: dir}, nil
	}})
	Register(Factory{Name: "crux-facts-stdio", New: func(dir string) (System, error) {
		c, err := startServe(bin, dir)
		if err != nil {
			return nil, err
		}
		return &cruxFactsStdio{serve: c, dir: dir}, nil
	}})
}

// serveClient is an MCP client of one crux serve process, one call at a
// time.
type serveClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

// startServe starts crux serve over the data directory dir and makes the
// MCP handshake.
func startServe(bin, dir string) (*serveClient, error) {
	cmd := exec.Command(bin, "serve", "--data", dir, "--agent", "bench")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &serveClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	var init json.RawMessage
	if err := c.request("initialize", json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"retrieval","version":"0"}}`), &init); err != nil {
		c.close()
		return nil, fmt.Errorf("crux serve: initialize: %w", err)
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// request sends one JSON-RPC request and decodes its result into result,
// a pointer, in one pass over the answer's line, as a client decoding
// responses into its own types does.
func (c *serveClient) request(method string, params, result any) error {
	c.id++
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if _, err := c.in.Write(append(line, '\n')); err != nil {
		return err
	}
	for {
		b, err := c.out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		r := struct {
			ID     *int `json:"id"`
			Result any  `json:"result"` // decoded into the value result points to
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}{Result: result}
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("answer %q: %w", b, err)
		}
		if r.ID == nil || *r.ID != c.id {
			continue // a notification: it has no result
		}
		if r.Error != nil {
			return &rpcError{code: r.Error.Code, message: r.Error.Message}
		}
		return nil
	}
}

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	code    int
	message string
}

func (e *rpcError) Error() string { return fmt.Sprintf("%d %s", e.code, e.message) }

// call calls tool name with args and decodes its structured output into
// out; an isError result is an error.
func (c *serveClient) call(name string, args, out any) error {
	r := struct {
		IsError bool            `json:"isError"`
		Content json.RawMessage `json:"content"` // read only for an error
		// Structured is decoded into the value out points to.
		Structured any `json:"structuredContent"`
	}{Structured: out}
	if err := c.request("tools/call", map[string]any{"name": name, "arguments": args}, &r); err != nil {
		return err
	}
	if r.IsError {
		var content []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(r.Content, &content); err != nil {
			return err
		}
		var msg []string
		for _, c := range content {
			msg = append(msg, c.Text)
		}
		return fmt.Errorf("%s: %s", name, strings.Join(msg, " "))
	}
	return nil
}

// close ends the process.
func (c *serveClient) close() error {
	c.in.Close()
	return c.cmd.Wait()
}

// cruxStdio ingests the documents in process (as crux ingest does) into
// DIR/crux.db, then asks crux serve --data DIR.
type cruxStdio struct {
	bin, dir string
	serve    *serveClient
}

func (*cruxStdio) Name() string { return "crux-stdio" }

func (x *cruxStdio) Ingest(docs []Doc) error {
	in, err := NewCrux(x.dir)
	if err != nil {
		return err
	}
	err = in.Ingest(docs)
	if err2 := in.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return err
	}
	x.serve, err = startServe(x.bin, x.dir)
	return err
}

func (x *cruxStdio) Query(q string, k int) ([]string, error) {
	var out tools.QueryOutput
	err := x.serve.call("query", queryArgs(q, k), &out)
	if refusedAs(err, queryRefused) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return distinct(out.Results, func(r tools.QueryRow) string { return r.DocID }, k), nil
}

func (x *cruxStdio) SizeOnDisk() (int64, error) { return fileSize(filepath.Join(x.dir, "crux.db")) }

func (x *cruxStdio) Close() error {
	if x.serve == nil {
		return nil
	}
	return x.serve.close()
}

// cruxFactsStdio stores each fact with one store_fact call to crux serve
// and asks it query_facts.
type cruxFactsStdio struct {
	serve *serveClient
	dir   string
	// Cut counts the values IngestFacts cut to store_fact's limit.
	Cut int
}

func (*cruxFactsStdio) Name() string { return "crux-facts-stdio" }

func (x *cruxFactsStdio) Ingest(docs []Doc) error { return x.IngestFacts(DocFacts(docs)) }

// IngestFacts implements FactIngester, as crux-facts does.
func (x *cruxFactsStdio) IngestFacts(facts []Fact) error {
	for _, f := range facts {
		f, cut := FitFact(f)
		if cut {
			x.Cut++
		}
		var out tools.StoreFactOutput
		if err := x.serve.call("store_fact", map[string]string{"entity": f.Entity, "key": f.Key, "value": f.Value}, &out); err != nil {
			return fmt.Errorf("store_fact %s: %w", f.Key, err)
		}
	}
	return nil
}

func (x *cruxFactsStdio) Query(q string, k int) ([]string, error) {
	var out tools.QueryFactsOutput
	err := x.serve.call("query_facts", queryFactsArgs{Query: q, TopK: k}, &out)
	if refusedAs(err, factsRefused) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return distinct(out.Rows, func(r tools.FactRow) string { return r.Key }, k), nil
}

func (x *cruxFactsStdio) SizeOnDisk() (int64, error) {
	return fileSize(filepath.Join(x.dir, "crux.db"))
}

func (x *cruxFactsStdio) Close() error { return x.serve.close() }

// fileSize is the size of the file at path.
func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
