// Command stdio-latency measures the latency of MCP tool calls to a stdio
// server, as one client sees it: each call is sent after the reply to the
// previous one, and its latency runs from writing the request line to
// reading the reply line.
//
//	stdio-latency [-prefill N] [-writes N] [-queries N [-fact-query TEXT]] [-doc-queries FILE [-tenant T]] [-lists N] -- COMMAND [ARG...]
//
// It starts COMMAND (typically crux serve --data DIR) with pipes on its
// standard input and output and does the MCP initialize handshake. Then,
// in order:
//
//   - -prefill N writes N store_fact calls with up to 32 in flight (not
//     timed): fact i is entity:<i/10>, key k<i%10>, a value naming
//     topic<i%(N/100)>, so each topic word is shared by 100 facts;
//   - -writes N sends N store_fact calls one at a time and times each;
//   - -queries N sends N query_facts calls one at a time, a keyword query
//     for a topic word of the prefilled facts (its top 10 of 100 matches),
//     and times each. -topics says how many topic words the store holds
//     when it was prefilled by an earlier run (default: N/100 of -prefill);
//     with -fact-query TEXT, every call asks TEXT instead;
//   - -doc-queries FILE sends one query call (document retrieval, limit
//     10, the default token_budget) for each line of FILE, one at a time,
//     in the order of the file, and times each. FILE holds JSON lines with
//     a "query" field, as bench/retrieval's cmd/queries writes them; the
//     documents must have been ingested into tenant -tenant beforehand
//     (crux ingest --tenant T);
//   - -lists N sends N tools/list requests (without params) one at a
//     time, as an agent does at every turn, and times each.
//
// The report is one line of key=value pairs on standard output: the
// calls made and the p50 and p99 of each timed phase, in milliseconds,
// and the server's peak resident memory and its anonymous part at the end
// (on Linux: mapped store files are the rest).
// Any error reply or isError result fails the run (exit status 1).
//
// See ../callpath.sh, which runs it against today's and an older crux.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	prefill := flag.Int("prefill", 0, "facts to write first, 32 in flight, untimed")
	writes := flag.Int("writes", 0, "store_fact calls to time, one at a time")
	queries := flag.Int("queries", 0, "query_facts calls to time, one at a time")
	topics := flag.Int("topics", 0, "topic words in a store prefilled earlier (default prefill/100)")
	factQuery := flag.String("fact-query", "", "the `text` every -queries call asks (default: a topic word each)")
	docQueries := flag.String("doc-queries", "", "JSONL `file` of document queries to time, one query call each")
	tenant := flag.String("tenant", "bench", "the `tenant` whose documents -doc-queries asks")
	lists := flag.Int("lists", 0, "tools/list requests to time, one at a time")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: stdio-latency [-prefill N] [-writes N] [-queries N] [-topics N] [-doc-queries FILE [-tenant T]] [-lists N] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	var docs []string
	if *docQueries != "" {
		var err error
		if docs, err = readQueries(*docQueries); err != nil {
			fmt.Fprintln(os.Stderr, "stdio-latency:", err)
			os.Exit(2)
		}
	}
	if *topics == 0 {
		*topics = *prefill / 100
	}
	if *queries > 0 && *topics == 0 && *factQuery == "" {
		fmt.Fprintln(os.Stderr, "stdio-latency: -queries needs -prefill, -topics or -fact-query")
		os.Exit(2)
	}
	line, err := run(flag.Args(), *prefill, *writes, *queries, *topics, *factQuery, *tenant, docs, *lists)
	if line != "" {
		fmt.Println(line)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdio-latency:", err)
		os.Exit(1)
	}
}

// client is one stdio session: requests go out one line each, replies are
// matched to their ids by the reader goroutine.
type client struct {
	in      io.WriteCloser
	wmu     sync.Mutex
	mu      sync.Mutex
	waiting map[int]chan reply
	readErr chan error
}

// reply is the part of a JSON-RPC response the driver reads.
type reply struct {
	ID    int `json:"id"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

func (r reply) err() error {
	switch {
	case r.Error != nil:
		return fmt.Errorf("call %d: error %s", r.ID, r.Error.Message)
	case r.Result == nil:
		return fmt.Errorf("call %d: no result", r.ID)
	case r.Result.IsError:
		text := ""
		if len(r.Result.Content) > 0 {
			text = r.Result.Content[0].Text
		}
		return fmt.Errorf("call %d: isError: %s", r.ID, text)
	}
	return nil
}

// call sends one request with the given id and returns the channel its
// reply arrives on.
func (c *client) call(id int, method, params string) (chan reply, error) {
	ch := make(chan reply, 1)
	c.mu.Lock()
	c.waiting[id] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
	return ch, err
}

// await waits for a reply on ch, or for the reader to fail.
func (c *client) await(ch chan reply) (reply, error) {
	select {
	case r := <-ch:
		return r, nil
	case err := <-c.readErr:
		return reply{}, err
	case <-time.After(60 * time.Second):
		return reply{}, errors.New("no reply within 60 s")
	}
}

func (c *client) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			c.readErr <- fmt.Errorf("reply is not JSON: %q", sc.Bytes())
			return
		}
		c.mu.Lock()
		ch := c.waiting[r.ID]
		delete(c.waiting, r.ID)
		c.mu.Unlock()
		if ch == nil {
			c.readErr <- fmt.Errorf("reply to an unknown id: %q", sc.Bytes())
			return
		}
		ch <- r
	}
	c.readErr <- errors.Join(io.ErrUnexpectedEOF, sc.Err())
}

func storeParams(i, topics int) string {
	return fmt.Sprintf(`{"name":"store_fact","arguments":{"entity":"entity:%d","key":"k%d","value":"note %d about topic%04d and widget%d"}}`,
		i/10, i%10, i, i%max(1, topics), i%5000)
}

// readQueries returns the "query" field of each line of a JSONL file.
func readQueries(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var qs []string
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal([]byte(line), &q); err != nil || q.Query == "" {
			return nil, fmt.Errorf("%s:%d: not a line {\"query\": ...}", path, i+1)
		}
		qs = append(qs, q.Query)
	}
	return qs, nil
}

// docQueryParams is a query call asking tenant for q.
func docQueryParams(tenant, q string) string {
	args, _ := json.Marshal(struct {
		TenantID string `json:"tenant_id"`
		Query    string `json:"query"`
		Limit    int    `json:"limit"`
	}{tenant, q, 10})
	return `{"name":"query","arguments":` + string(args) + `}`
}

func run(argv []string, prefill, writes, queries, topics int, factQuery, tenant string, docs []string, lists int) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	c := &client{in: in, waiting: make(map[int]chan reply), readErr: make(chan error, 1)}
	go c.read(out)
	defer func() {
		in.Close()
		cmd.Wait()
	}()

	id := 0
	next := func() int { id++; return id }
	ch, err := c.call(next(), "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stdio-latency","version":"0"}}`)
	if err != nil {
		return "", err
	}
	if r, err := c.await(ch); err != nil || r.Result == nil {
		return "", errors.Join(errors.New("no initialize result"), err)
	}
	c.wmu.Lock()
	_, err = io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	c.wmu.Unlock()
	if err != nil {
		return "", err
	}

	var report []string
	if prefill > 0 {
		t0 := time.Now()
		window := make(chan chan reply, 32)
		errc := make(chan error, 1)
		go func() {
			for ch := range window {
				r, err := c.await(ch)
				if err == nil {
					err = r.err()
				}
				if err != nil {
					errc <- err
					for range window {
					}
					return
				}
			}
			errc <- nil
		}()
		for i := range prefill {
			ch, err := c.call(next(), "tools/call", storeParams(i, prefill/100))
			if err != nil {
				close(window)
				return "", err
			}
			window <- ch
		}
		close(window)
		if err := <-errc; err != nil {
			return "", err
		}
		report = append(report, fmt.Sprintf("prefill=%d prefill_s=%.1f", prefill, time.Since(t0).Seconds()))
	}
	timedMethod := func(method, name string, n int, params func(i int) string) error {
		lat := make([]time.Duration, 0, n)
		for i := range n {
			t0 := time.Now()
			ch, err := c.call(next(), method, params(i))
			if err != nil {
				return err
			}
			r, err := c.await(ch)
			if err == nil {
				err = r.err()
			}
			if err != nil {
				return err
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		q := func(f float64) float64 {
			return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))]) / float64(time.Millisecond)
		}
		report = append(report, fmt.Sprintf("%s=%d %s_p50_ms=%.3f %s_p99_ms=%.3f", name, n, name, q(0.5), name, q(0.99)))
		return nil
	}
	timed := func(name string, n int, params func(i int) string) error {
		return timedMethod("tools/call", name, n, params)
	}
	if writes > 0 {
		base := prefill + 1_000_000 // new entities, not overwriting the prefill
		if err := timed("writes", writes, func(i int) string { return storeParams(base+i, max(topics, 1)) }); err != nil {
			return strings.Join(report, " "), err
		}
	}
	if queries > 0 {
		if err := timed("queries", queries, func(i int) string {
			if factQuery != "" {
				return fmt.Sprintf(`{"name":"query_facts","arguments":{"query":%q}}`, factQuery)
			}
			return fmt.Sprintf(`{"name":"query_facts","arguments":{"query":"topic%04d"}}`, (i*7919)%topics)
		}); err != nil {
			return strings.Join(report, " "), err
		}
	}
	if len(docs) > 0 {
		if err := timed("docqueries", len(docs), func(i int) string { return docQueryParams(tenant, docs[i]) }); err != nil {
			return strings.Join(report, " "), err
		}
	}
	if lists > 0 {
		if err := timedMethod("tools/list", "lists", lists, func(int) string { return "{}" }); err != nil {
			return strings.Join(report, " "), err
		}
	}
	if peak, anon, ok := memory(cmd.Process.Pid); ok {
		report = append(report, fmt.Sprintf("rss_peak_mb=%d rss_anon_mb=%d", peak, anon))
	}
	return strings.Join(report, " "), nil
}

// memory returns, in MiB, the peak resident memory of process pid and its
// resident anonymous memory now (the rest is mapped files, such as a
// store's pages, which the kernel may drop), as Linux's /proc reports
// them.
func memory(pid int) (peak, anon int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, _ := strings.Cut(line, ":")
		kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		switch {
		case err != nil:
		case name == "VmHWM":
			peak, found = kb>>10, found+1
		case name == "RssAnon":
			anon, found = kb>>10, found+1
		}
	}
	return peak, anon, found == 2
}
