package bolt

import "time"

// bbolt reads the database file through a shared read-only memory map, and
// every page a read touches stays mapped, counted in the process's
// resident memory, until the map is replaced. Opening a file touches all
// of it (the freelist is rebuilt by walking the pages in use, see the
// package doc), and a long run of writes or queries touches most of it,
// so a server over a file of a gigabyte would show about a gigabyte
// resident though it needs a small part of it. The DB therefore drops the
// map's page table entries after Open and, while open, whenever the
// resident pages of mapped files exceed mappedLimit (checked every
// trimInterval; Linux only). The pages stay in the operating system's
// page cache, which the kernel reclaims under memory pressure as it
// would any file's; reading one again costs a minor fault, not a disk read.

// mappedLimit is how many bytes of mapped files may be resident before
// the DB drops its map's pages.
const mappedLimit = 128 << 20

// trimInterval is how often an open DB checks the resident pages of
// mapped files against mappedLimit.
const trimInterval = time.Second

// trimMapped drops the pages of the database file's map from the
// process's resident memory if more than limit bytes of mapped files are
// resident (always, for a negative limit). It reports whether the DB is
// still open.
func (db *DB) trimMapped(limit int64) bool {
	if err := db.acquire(); err != nil {
		return false
	}
	defer db.inflight.Done()
	if limit >= 0 && residentFileBytes() <= limit {
		return true
	}
	db.gate.RLock() // Compact does not switch files meanwhile
	defer db.gate.RUnlock()
	btx, err := db.bdb.Begin(false) // bbolt does not remap meanwhile
	if err != nil {
		return true
	}
	dropMapped(db.bdb.Info().Data, int(btx.Size()))
	_ = btx.Rollback()
	return true
}

// keepTrimmed runs trimMapped every trimInterval until done is closed or
// the DB closes.
func (db *DB) keepTrimmed(done <-chan struct{}) {
	t := time.NewTicker(trimInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if !db.trimMapped(mappedLimit) {
				return
			}
		}
	}
}

// saveFreelist writes bbolt's list of free pages with one last, empty
// commit, so that the next Open reads the list instead of walking every
// page of the file to rebuild it (about half a second, and the whole file
// resident, at a million facts). The next commit drops the list again
// (commits do not write it, see the package doc), so only an Open after a
// clean Close is spared the walk. Close calls it while the log's pin still
// holds the checkpoint's pages (it does nothing if the pin was dropped),
// before the file is flushed and the log marked clean: should the process stop before that, the next Open
// restores the checkpoint and replays the log as after any crash, and the
// commit, which changed no data, is gone. A commit refused for want of
// space changes nothing and is passed over; any other failure puts the DB
// in the failed state, so that the log is not marked clean.
func (db *DB) saveFreelist() error {
	if db.readOnly || db.failure() != nil || db.wal != nil && !db.pinned() {
		return nil // without the pin, the commit could reuse a page of the log's checkpoint
	}
	db.bdb.NoFreelistSync = false
	defer func() { db.bdb.NoFreelistSync = true }()
	btx, err := db.bdb.Begin(true)
	if err == nil {
		if db.wal != nil {
			db.watchCommit() // a commit that remaps the file waits for the pin
			err = btx.Commit()
			db.endCommit()
		} else {
			err = btx.Commit()
		}
	}
	if err == nil || noSpace(err) {
		return nil
	}
	return db.fail("write the list of free pages", err)
}
