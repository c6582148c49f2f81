package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Server CPU per fact. The database shares the machine's cores with the
// benchmark's clients, so facts/s says little about how PostgreSQL would
// scale on a machine of its own; the CPU time its backends spend per
// fact does. A benchmark store's connections carry an application_name of
// their own (see pgDSN), and serverCPU sums the user and system CPU time,
// read from /proc, of the backends that serve them. It counts neither the
// server's background processes (WAL writer, checkpointer) nor other
// clients of the server. Without /proc access to the server's processes
// (a server on another machine, another OS) it reports nothing.

// pgDSN is the benchmark database's URL with search_path set to schema
// and a fresh application_name, which it returns too.
func pgDSN(b *testing.B, dsn, schema string) (string, string) {
	b.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatalf("CRUX_TEST_POSTGRES is not a URL: %v", err)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	app := "crux_bench_" + hex.EncodeToString(r[:])
	q := u.Query()
	if schema != "" {
		q.Set("search_path", schema)
	}
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String(), app
}

// cpuMeter samples the CPU time of the backends serving one
// application_name.
type cpuMeter struct {
	dsn, app string
	start    map[int]int64 // pid → clock ticks at the first sample
}

// newCPUMeter takes the first sample; nil when /proc cannot tell.
func newCPUMeter(b *testing.B, dsn, app string) *cpuMeter {
	b.Helper()
	m := &cpuMeter{dsn: dsn, app: app}
	s, ok := m.sample(b)
	if !ok {
		return nil
	}
	m.start = s
	return m
}

// sample returns the CPU ticks of each backend of m.app.
func (m *cpuMeter) sample(b *testing.B) (map[int]int64, bool) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, m.dsn)
	if err != nil {
		b.Logf("server CPU: %v", err)
		return nil, false
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()", m.app)
	if err != nil {
		b.Logf("server CPU: %v", err)
		return nil, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Logf("server CPU: %v", err)
		return nil, false
	}
	out := make(map[int]int64, len(pids))
	for _, pid := range pids {
		t, err := procTicks(int(pid))
		if err != nil {
			return nil, false // not on this machine, or not readable
		}
		out[int(pid)] = t
	}
	return out, true
}

// report adds the metric server-µs/fact: the backends' CPU time since
// the first sample over n facts. Call it before the store is closed.
func (m *cpuMeter) report(b *testing.B, n int64) {
	b.Helper()
	if m == nil || n == 0 {
		return
	}
	end, ok := m.sample(b)
	if !ok {
		return
	}
	var ticks int64
	for pid, t := range end {
		ticks += t - m.start[pid] // a backend started since counts from 0
	}
	const tick = 10_000 // µs per clock tick (USER_HZ = 100 on Linux)
	b.ReportMetric(float64(ticks*tick)/float64(n), "server-µs/fact")
}

// procTicks returns utime + stime of process pid, in clock ticks.
func procTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// After the name: state (f[0]) ... utime is field 14 of the line, f[11].
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return ut + st, nil
}
