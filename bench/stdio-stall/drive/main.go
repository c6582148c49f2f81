// Command drive sends one-at-a-time MCP tool calls to a stdio server and
// reports how long each reply took and how many replies stalled.
//
//	drive [-n CALLS] [-duration D] [-stall 1s] [-giveup 10s] [-idle D] -- COMMAND [ARG...]
//
// It starts COMMAND with pipes on its standard input and output, does the
// MCP initialize handshake, then sends tools/call store_fact requests, each
// after the reply to the previous one, until it has sent -n calls or
// -duration has passed. A reply that has not come after -stall is counted
// as a stall, and the driver sends a ping request to unblock a server whose
// reader is stuck in read(2), then waits up to -giveup for the stalled
// reply. With -idle, the driver then leaves the server idle that long and
// counts the context switches of its threads (Linux, from /proc). The
// report is one line of key=value pairs on standard output, preceded by
// one line per stall; the exit status is 1 if a reply stalled, failed or
// never came, or the server misbehaved, and 2 on a usage error.
//
// The child inherits the environment, so GOGC and GODEBUG set by the caller
// reach it. See ../run.sh.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is what to drive and for how long.
type config struct {
	Calls    int           // calls to send at most
	Duration time.Duration // time to send calls for at most; 0 is no limit
	Stall    time.Duration // a reply slower than this is a stall
	GiveUp   time.Duration // how long to wait for a stalled reply after the ping
	Idle     time.Duration // after the calls, how long to leave the server idle
}

// report is the outcome of one run.
type report struct {
	Calls   int             // calls whose reply arrived
	Stalls  []stall         // replies slower than config.Stall
	Errors  int             // replies that were JSON-RPC errors or isError results
	Latency []time.Duration // every reply's latency, in call order
	Elapsed time.Duration
	// IdleSwitches counts the server's context switches while it was left
	// idle for config.Idle after the last reply; -1 if not measured.
	IdleSwitches int
}

// stall is one reply slower than config.Stall.
type stall struct {
	Call    int           // 1-based number of the call
	Latency time.Duration // until its reply came, after the ping
}

func main() {
	var cfg config
	flag.IntVar(&cfg.Calls, "n", 10000, "calls to send at most")
	flag.DurationVar(&cfg.Duration, "duration", 0, "stop sending after this long (0: no limit)")
	flag.DurationVar(&cfg.Stall, "stall", time.Second, "a reply slower than this is a stall")
	flag.DurationVar(&cfg.GiveUp, "giveup", 10*time.Second, "how long to wait for a stalled reply after the unblocking ping")
	flag.DurationVar(&cfg.Idle, "idle", 0, "after the calls, leave the server idle this long and count its context switches (Linux)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: drive [flags] -- COMMAND [ARG...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || cfg.Calls <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stderr = os.Stderr
	rep, err := drive(context.Background(), cmd, cfg)
	for _, s := range rep.Stalls {
		fmt.Printf("stall call=%d latency_ms=%.1f\n", s.Call, ms(s.Latency))
	}
	fmt.Println(rep.summary())
	if err != nil {
		fmt.Fprintln(os.Stderr, "drive:", err)
		os.Exit(1)
	}
	if len(rep.Stalls) > 0 || rep.Errors > 0 {
		os.Exit(1)
	}
}

// summary is the report as one line of key=value pairs.
func (r report) summary() string {
	s := slices.Clone(r.Latency)
	slices.Sort(s)
	q := func(f float64) float64 {
		if len(s) == 0 {
			return 0
		}
		return ms(s[min(len(s)-1, int(f*float64(len(s))))])
	}
	line := fmt.Sprintf("calls=%d stalls=%d errors=%d max_ms=%.1f p50_ms=%.2f p99_ms=%.2f p999_ms=%.2f elapsed_s=%.1f",
		r.Calls, len(r.Stalls), r.Errors, q(1), q(0.5), q(0.99), q(0.999), r.Elapsed.Seconds())
	if r.IdleSwitches >= 0 {
		line += fmt.Sprintf(" idle_ctxt_switches=%d", r.IdleSwitches)
	}
	return line
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reply is the part of a JSON-RPC response the driver reads.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Error  *struct{}       `json:"error"`
	Result *struct {
		IsError bool `json:"isError"`
	} `json:"result"`
}

// drive starts cmd, runs the handshake and the calls, closes the server's
// standard input and waits for it to exit. The report covers the calls made
// before an error.
func drive(ctx context.Context, cmd *exec.Cmd, cfg config) (rep report, err error) {
	rep.IdleSwitches = -1
	in, err := cmd.StdinPipe()
	if err != nil {
		return rep, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return rep, err
	}
	if err := cmd.Start(); err != nil {
		return rep, err
	}
	defer func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case werr := <-done:
			if werr != nil && err == nil {
				err = fmt.Errorf("server: %w", werr)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			if err == nil {
				err = errors.New("server did not exit after its standard input closed")
			}
		}
	}()

	replies := make(chan reply, 4)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var r reply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				readErr <- fmt.Errorf("reply is not JSON: %q", sc.Bytes())
				return
			}
			replies <- r
		}
		readErr <- errors.Join(io.ErrUnexpectedEOF, sc.Err())
	}()
	send := func(msg string) error {
		_, err := io.WriteString(in, msg+"\n")
		return err
	}
	// await waits up to d for the reply with id, skipping replies to pings.
	// It returns ok false when d passes first.
	await := func(id string, d time.Duration) (r reply, ok bool, err error) {
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case r := <-replies:
				if string(r.ID) == id {
					return r, true, nil
				}
				var s string
				if json.Unmarshal(r.ID, &s) != nil || len(s) < 5 || s[:5] != "ping-" {
					return r, false, fmt.Errorf("reply to id %s while waiting for %s", r.ID, id)
				}
			case err := <-readErr:
				return r, false, err
			case <-timer.C:
				return r, false, nil
			case <-ctx.Done():
				return r, false, ctx.Err()
			}
		}
	}

	if err := send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"drive","version":"0"}}}`); err != nil {
		return rep, err
	}
	if r, ok, err := await("0", 30*time.Second); err != nil || !ok || r.Error != nil {
		return rep, errors.Join(errors.New("no initialize result"), err)
	}
	if err := send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return rep, err
	}

	start := time.Now()
	if err := calls(ctx, cfg, &rep, send, await); err != nil {
		return rep, err
	}
	rep.Elapsed = time.Since(start)
	if cfg.Idle > 0 {
		rep.IdleSwitches, err = idleSwitches(ctx, cmd.Process.Pid, cfg.Idle)
	}
	return rep, err
}

// calls sends the calls one at a time, adding them to rep.
func calls(ctx context.Context, cfg config, rep *report, send func(string) error, await func(string, time.Duration) (reply, bool, error)) error {
	start := time.Now()
	for i := 1; i <= cfg.Calls; i++ {
		if cfg.Duration > 0 && time.Since(start) >= cfg.Duration {
			break
		}
		id := fmt.Sprint(i)
		t0 := time.Now()
		if err := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"store_fact","arguments":{"entity":"bench:stall","key":"k%d","value":"v%d"}}}`, i, i%100, i)); err != nil {
			return err
		}
		r, ok, err := await(id, cfg.Stall)
		if err != nil {
			return err
		}
		if !ok {
			// Unblock a reader stuck in read(2): one more line arrives.
			if err := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"ping-%d","method":"ping"}`, i)); err != nil {
				return err
			}
			if r, ok, err = await(id, cfg.GiveUp); err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("call %d: no reply %v after the unblocking ping", i, cfg.GiveUp)
			}
			rep.Stalls = append(rep.Stalls, stall{Call: i, Latency: time.Since(t0)})
		}
		rep.Latency = append(rep.Latency, time.Since(t0))
		rep.Calls++
		if r.Error != nil || r.Result == nil || r.Result.IsError {
			rep.Errors++
		}
	}
	return nil
}

// idleSwitches waits d and returns how many context switches the threads
// of process pid made meanwhile, from the voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches of /proc/PID/task/*/status.
func idleSwitches(ctx context.Context, pid int, d time.Duration) (int, error) {
	before, err := ctxtSwitches(pid)
	if err != nil {
		return -1, err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	after, err := ctxtSwitches(pid)
	if err != nil {
		return -1, err
	}
	return after - before, nil
}

// ctxtSwitches sums the context switches of the threads of process pid.
func ctxtSwitches(pid int) (int, error) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(paths) == 0 {
		return 0, fmt.Errorf("no /proc/%d/task/*/status to count context switches in", pid)
	}
	n := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, err
		}
		for line := range strings.Lines(string(b)) {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				c, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					return 0, fmt.Errorf("%s: %s: %w", p, k, err)
				}
				n += c
			}
		}
	}
	return n, nil
}
