package postgres

import (
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/crux-go/crux/store"
)

// The change log (store.ChangeLogger). The store's own log numbers a
// tenant's entries 1, 2, 3, ...: each write reads the tenant's last entry
// to number its own, so that on PostgreSQL every transaction writing a
// tenant's facts read and rewrote the same key, and concurrent ones
// aborted each other (serialization failures) or, in one process, ran one
// batch at a time. Here the log is a table, crux_changes (tenant, seq,
// entry), that a write only inserts into, and its seq is not read from
// anywhere:
//
//	seq = transaction id << 20 + the entry's place in its transaction
//
// The transaction id (pg_current_xact_id, 64 bits, never reused) is
// assigned at the transaction's first write, which in this backend is at
// commit. A reader sees only the stable prefix of the log: the entries
// whose seq is below snapshot xmin << 20, xmin being the oldest
// transaction still running when its snapshot was taken. Every
// transaction of a lower id has ended by then, so every entry that will
// ever have a seq below that bound is visible already: a reader never
// sees an entry appear behind one it has read (store.ChangeLogger's
// stable prefix). An entry becomes readable once every write transaction
// older than its own has ended, which, with crux's short transactions, is
// a few milliseconds after its commit; a transaction left open on the
// server (an idle session in a transaction) holds every later entry back
// until it ends. Causal order holds because a transaction is given its
// id after it has read what it read: what it read was written by
// transactions with lower ids.
//
// The count of a tenant's entries, which the keyword ranking needs, is
// kept in crux_change_counts, in up to 64 rows per tenant (one per server
// process id modulo 64), each commit adding to its process's row; it
// counts every committed entry the snapshot sees, stable or not.
//
// A transaction's entries are held in the transaction and written with
// its COMMIT, in the same round trip; its reads of the log do not see
// them. Reads of the log are sent like reads of kv: with the BEGIN, with
// the queued prefetches (PrefetchChangeHead), and, in a probe of a batch,
// together with the reads of the other probes.

// seqShift is the number of bits of an entry's place in its transaction.
const seqShift = 20

// changePage is how many entries a ScanChanges reads per statement.
const changePage = 256

// sqlStable is the seq below which the log is stable for the snapshot.
const sqlStable = "(pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 20)"

const (
	sqlChangePage = `SELECT seq, entry FROM crux_changes WHERE tenant = $1 AND seq >= $2 AND seq < ` + sqlStable + `
		ORDER BY seq LIMIT 256`
	sqlChangeHead = `SELECT coalesce((SELECT seq FROM crux_changes WHERE tenant = $1 AND seq < ` + sqlStable + `
		ORDER BY seq DESC LIMIT 1), 0), coalesce((SELECT sum(n) FROM crux_change_counts WHERE tenant = $1), 0)::bigint`
	sqlChanges = `INSERT INTO crux_changes (tenant, seq, entry)
		SELECT u.t, (pg_current_xact_id()::text::bigint << 20) + u.o, u.e FROM unnest($1::bytea[], $2::bigint[], $3::bytea[]) AS u(t, o, e)`
	sqlChangeCounts = `INSERT INTO crux_change_counts (tenant, shard, n)
		SELECT u.t, pg_backend_pid() % 64, u.n FROM unnest($1::bytea[], $2::bigint[]) AS u(t, n)
		ON CONFLICT (tenant, shard) DO UPDATE SET n = crux_change_counts.n + EXCLUDED.n`
)

func init() {
	if changePage != 256 || seqShift != 20 {
		panic("store/postgres: the change log's statements do not match changePage or seqShift")
	}
}

var _ store.ChangeLogger = (*tx)(nil)

// change is an entry appended by the transaction, written at commit.
type change struct {
	tenant string
	entry  []byte
}

// changeRow is an entry read from crux_changes.
type changeRow struct {
	seq   uint64
	entry []byte
}

// customRead is a read of a statement of its own, sent as the reads of kv
// are (see fetch): id names it, so that it is sent once; got records its
// rows in the transaction.
type customRead struct {
	id   string
	sql  string
	args []any
	got  func(rows pgx.Rows) error
}

// AppendChange holds entry for the commit (store.ChangeLogger).
func (t *tx) AppendChange(tenant string, entry []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if !t.writable {
		return store.ErrReadOnly
	}
	if len(t.changes) >= 1<<seqShift {
		return fmt.Errorf("store/postgres: more than %d change-log entries in one transaction", 1<<seqShift)
	}
	t.changes = append(t.changes, change{tenant: tenant, entry: append([]byte{}, entry...)})
	t.writes++
	return nil
}

// ScanChanges walks the stable prefix of tenant's log from seq from
// (store.ChangeLogger).
func (t *tx) ScanChanges(tenant string, from uint64, fn func(seq uint64, entry []byte) error) error {
	if err := t.check(); err != nil {
		return err
	}
	cur := from
	for {
		if cur >= 1<<63 {
			return nil // beyond every seq a bigint holds
		}
		id := fmt.Sprintf("page\x00%s\x00%d", tenant, cur)
		rows, ok := t.logPages[id]
		if !ok {
			err := t.fetch(fetch{custom: &customRead{id: id, sql: sqlChangePage, args: []any{[]byte(tenant), int64(cur)},
				got: func(r pgx.Rows) error {
					var got []changeRow
					for r.Next() {
						var seq int64
						var e []byte
						if err := r.Scan(&seq, &e); err != nil {
							return err
						}
						got = append(got, changeRow{uint64(seq), e})
					}
					if t.logPages == nil {
						t.logPages = map[string][]changeRow{}
					}
					t.logPages[id] = got
					return r.Err()
				}}})
			if err != nil {
				return err
			}
			continue
		}
		for _, r := range rows {
			if err := fn(r.seq, r.entry); err != nil {
				return stop(err)
			}
			if err := t.check(); err != nil {
				return err
			}
		}
		if len(rows) < changePage {
			return nil
		}
		cur = rows[len(rows)-1].seq + 1
	}
}

// ChangeHead reads the stable head and the count of tenant's log
// (store.ChangeLogger).
func (t *tx) ChangeHead(tenant string) (head, count uint64, err error) {
	if err := t.check(); err != nil {
		return 0, 0, err
	}
	for range 2 {
		if h, ok := t.heads[tenant]; ok {
			return h[0], h[1], nil
		}
		if err := t.fetch(fetch{custom: t.headRead(tenant)}); err != nil {
			return 0, 0, err
		}
	}
	return 0, 0, fmt.Errorf("store/postgres: internal error: change-log head of %q not in the view after reading it", tenant)
}

// PrefetchChangeHead queues the read of ChangeHead for the next statement
// the transaction sends (store.ChangeLogger).
func (t *tx) PrefetchChangeHead(tenant string) {
	if t.check() != nil {
		return
	}
	if _, ok := t.heads[tenant]; !ok {
		t.queue = append(t.queue, fetch{custom: t.headRead(tenant)})
	}
}

// headRead is the read of tenant's change-log head.
func (t *tx) headRead(tenant string) *customRead {
	return &customRead{id: "head\x00" + tenant, sql: sqlChangeHead, args: []any{[]byte(tenant)},
		got: func(r pgx.Rows) error {
			var head, count int64
			for r.Next() {
				if err := r.Scan(&head, &count); err != nil {
					return err
				}
			}
			if err := r.Err(); err != nil {
				return err
			}
			if t.heads == nil {
				t.heads = map[string][2]uint64{}
			}
			t.heads[tenant] = [2]uint64{uint64(head), uint64(count)}
			return nil
		}}
}

// customDone reports whether the read named id has been recorded.
func (t *tx) customDone(c *customRead) bool {
	if _, ok := t.logPages[c.id]; ok {
		return true
	}
	if _, ok := t.sums[c.id]; ok {
		return true
	}
	if len(c.id) > 5 && c.id[:5] == "head\x00" {
		_, ok := t.heads[c.id[5:]]
		return ok
	}
	return false
}

// queueChanges queues on b the statements that write the transaction's
// change-log entries and add them to the counts, tenants in order so that
// concurrent commits take the count rows' locks in the same order.
func (t *tx) queueChanges(b *pgx.Batch) {
	if len(t.changes) == 0 {
		return
	}
	tenants := make([][]byte, len(t.changes))
	ords := make([]int64, len(t.changes))
	entries := make([][]byte, len(t.changes))
	counts := map[string]int64{}
	for i, c := range t.changes {
		tenants[i], ords[i], entries[i] = []byte(c.tenant), int64(i), c.entry
		counts[c.tenant]++
	}
	b.Queue(sqlChanges, tenants, ords, entries)
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	ct := make([][]byte, len(names))
	cn := make([]int64, len(names))
	for i, n := range names {
		ct[i], cn[i] = []byte(n), counts[n]
	}
	b.Queue(sqlChangeCounts, ct, cn)
}
