// Command http-sessions measures what MCP sessions cost crux serve --http:
// it sends n initialize requests, each opening a session (none is ended),
// to a running server and reports the server's resident set size
// (VmRSS, from /proc, so Linux only) before and after, and the answers by
// HTTP status.
//
//	go run ./bench/http-sessions -url http://127.0.0.1:8080/mcp -token TOKEN -pid PID [-n 38000] [-c 8]
//
// run.sh starts a crux serve --http for it, of any crux binary, so that
// two builds can be compared.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"http-sessions","version":"bench"}}}`

func main() {
	url := flag.String("url", "http://127.0.0.1:8080/mcp", "the MCP endpoint")
	token := flag.String("token", "", "the bearer token")
	pid := flag.Int("pid", 0, "the server's process id, for its RSS")
	n := flag.Int("n", 38000, "initialize requests to send")
	c := flag.Int("c", 8, "requests in flight at once")
	flag.Parse()
	if *pid == 0 {
		log.Fatal("http-sessions: -pid is required")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *c}}
	before := rss(*pid)
	start := time.Now()
	var mu sync.Mutex
	statuses := map[int]int{}
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range *c {
		wg.Go(func() {
			for range jobs {
				req, _ := http.NewRequest(http.MethodPost, *url, bytes.NewReader([]byte(initialize)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if *token != "" {
					req.Header.Set("Authorization", "Bearer "+*token)
				}
				code := 0
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		})
	}
	for range *n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)
	time.Sleep(time.Second) // let closed sessions wind down
	after := rss(*pid)
	var codes []string
	for code, k := range statuses {
		codes = append(codes, fmt.Sprintf("%d: %d", code, k))
	}
	sort.Strings(codes)
	fmt.Printf("initialize requests: %d in %v (%.0f/s), answers %s\n", *n, took.Round(time.Millisecond),
		float64(*n)/took.Seconds(), strings.Join(codes, ", "))
	fmt.Printf("server RSS: %.1f MB before, %.1f MB after (%+.1f MB)\n", mb(before), mb(after), mb(after-before))
}

// rss is the VmRSS of process pid, in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		log.Fatalf("http-sessions: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	log.Fatal("http-sessions: no VmRSS")
	return 0
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
