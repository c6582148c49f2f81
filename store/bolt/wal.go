package bolt

// The write-ahead log.
//
// A bbolt commit that is flushed to disk costs two fdatasyncs: one for the
// pages it wrote, one for its meta page. With the log, a commit is written
// to the database file without a flush, and its changes (every key put and
// deleted, in order) are appended to the log, path + ".wal", which is
// flushed once: one sequential write and one fdatasync per commit. From
// time to time a checkpoint flushes the database file and starts the log
// afresh.
//
// Why this keeps every commit Update has returned for, after a process
// kill or a power loss:
//
//   - A checkpoint flushes the file, then records in the log's header the
//     file's meta page (the root of the committed state, say K) and opens a
//     read transaction on K, the pin. bbolt never reuses a page that an open
//     read transaction can reach, so no commit after the checkpoint writes
//     to any page of K: K stays intact on disk, however much of the later,
//     unflushed writes a power loss keeps.
//   - A commit returns only once its record is flushed to the log. The log
//     therefore holds, after its header, every returned commit since K, in
//     order, each with a checksum; a torn or stale record ends it.
//   - Opening a database whose log was not closed cleanly writes
//     K's meta page back over both of the file's meta pages, which brings
//     back state K whatever the meta pages held, and replays the log's
//     records on it. Records are plain puts and deletes, so replaying them
//     on K gives the state after the last one.
//
// The header has two slots, written in turn, each with a checksum and a
// generation: a torn header write leaves the previous one in force, and a
// record belongs to the header whose generation it carries, so the records
// of an earlier generation that lie beyond the end are never replayed.
//
// A commit that bbolt has to remap the file for waits until every read
// transaction has ended, the pin included: a commit still running after
// pinRelease drops the pin, and the next commit makes a checkpoint first.
// bbolt maps a large part of the address space (logMmapSize), so that
// this is rare.
//
// A clean Close flushes the file and marks the log clean: nothing is then
// restored or replayed. When the log cannot be written, the database file
// is flushed and the log removed, and commits flush the file themselves
// from then on (see abandonLog).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"go.etcd.io/bbolt"
)

const (
	// walSuffix is appended to the database path to name its log.
	walSuffix = ".wal"

	// walSlot is the size of each of the log's two header slots; records
	// start after them, at walRecords.
	walSlot    = 4096
	walRecords = 2 * walSlot

	// walCheckpointBytes is how many bytes of records the log takes before
	// a checkpoint starts it afresh. The log file is made this large when
	// it is created, so that appending a record does not change the file's
	// size (whose flush costs more than the record's).
	walCheckpointBytes = 1 << 20

	// checkpointPinned is how many pages the commits since the last
	// checkpoint may free, and the pin keep from reuse, before the next
	// checkpoint releases them: each is a page the file grows by instead
	// of reusing one. 256 (about a hundred lone commits) keeps the file of
	// a store of 50,000 facts as large as without the log, give or take
	// 10%; 1 MiB of log alone would leave it 30% larger.
	checkpointPinned = 256

	// minCheckpointCommits is how many commits come between two
	// checkpoints at least, unless the log fills up (see wal.due).
	minCheckpointCommits = 16

	// maxLogRecord bounds a commit's record: a commit whose changes are
	// larger is flushed to the database file by a checkpoint instead.
	maxLogRecord = 16 << 20

	// pinRelease is how long a commit may run before the pin is dropped,
	// in case the commit waits to remap the file.
	pinRelease = 20 * time.Millisecond
)

// logMmapSize is the size bbolt maps the file with when the log is on, so
// that commits seldom remap it (each remap waits for pinRelease): 1 GiB of
// address space, which costs no memory, on 64-bit systems other than
// Windows (where bbolt grows the file to the size it maps). Past it, bbolt
// remaps once per GiB of growth.
func logMmapSize() int {
	if strconv.IntSize < 64 || runtime.GOOS == "windows" {
		return 0
	}
	return 1 << 30
}

// walMagic starts each header slot.
var walMagic = [8]byte{'c', 'r', 'u', 'x', 'w', 'a', 'l', 1}

// Header slot layout (little-endian): magic [8], generation u64, flags u32,
// page size u32, bbolt meta page [metaSize], CRC-32C of the preceding
// bytes u32.
const (
	hdrGen      = 8
	hdrFlags    = 16
	hdrPageSize = 20
	hdrMeta     = 24
	hdrCRC      = hdrMeta + metaSize
	hdrSize     = hdrCRC + 4

	flagClean = 1 // the database was closed cleanly: nothing to recover
)

// A bbolt meta page: a 16-byte page header, then the meta in the
// machine's byte order: magic, version, page size and flags (u32 each),
// root bucket (pgid and sequence), freelist pgid, high-water pgid, txid and
// an FNV-64a checksum of the meta's preceding bytes (u64 each).
const (
	metaSize    = 80
	metaMagicAt = 16
	metaPageAt  = 24
	metaPgidAt  = 56
	metaTxidAt  = 64
	metaSumAt   = 72
	boltMagic   = 0xED0CDAED
	boltVersion = 2
)

// Record layout: payload length u32, CRC-32C u32 of the generation and the
// payload, generation u64, payload. The payload is a sequence of changes:
// opPut, bucket, key, value or opDelete, bucket, key, each string as a
// uvarint length and its bytes.
const (
	recHeader = 16
	opPut     = 1
	opDelete  = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walFile is the log's file. fdatasync flushes its data.
type walFile interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Close() error
}

// osWALFile is a walFile on an os.File, synced with fdatasync.
type osWALFile struct{ *os.File }

func (f osWALFile) Sync() error { return fdatasync(f.File) }

// wal is an open log. Only the writer uses it: the leader of a group
// commit, or Open, Compact and Close, which exclude every other call.
type wal struct {
	f     walFile
	path  string
	gen   uint64 // generation of the header in force
	end   int64  // offset of the next record
	limit int64  // checkpoint once the records take this many bytes
	// pending is bbolt's count of freed pages not yet reusable after the
	// first commit since the last checkpoint (-1 before it); the count
	// past it is what the pin holds (a long read transaction holds pages
	// too, which no checkpoint releases).
	pending int
	commits int // commits logged since the last checkpoint
	maxRec  int // the largest record appended; a larger commit makes a checkpoint
}

// close closes the log's file; it may be called more than once, and on a
// nil *wal.
func (w *wal) close() error {
	if w == nil || w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// remove closes the log and removes its file, durably.
func (w *wal) remove() error {
	_ = w.close()
	if err := os.Remove(w.path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(w.path))
}

// walHeader is a decoded header slot.
type walHeader struct {
	gen      uint64
	clean    bool
	pageSize int
	meta     [metaSize]byte
}

// encode writes h into a slot buffer.
func (h *walHeader) encode(buf []byte) {
	clear(buf)
	copy(buf, walMagic[:])
	binary.LittleEndian.PutUint64(buf[hdrGen:], h.gen)
	var flags uint32
	if h.clean {
		flags |= flagClean
	}
	binary.LittleEndian.PutUint32(buf[hdrFlags:], flags)
	binary.LittleEndian.PutUint32(buf[hdrPageSize:], uint32(h.pageSize))
	copy(buf[hdrMeta:], h.meta[:])
	binary.LittleEndian.PutUint32(buf[hdrCRC:], crc32.Checksum(buf[:hdrCRC], castagnoli))
}

// decodeHeader decodes a slot; ok is false for a slot that is empty, torn
// or not a header.
func decodeHeader(buf []byte) (h walHeader, ok bool) {
	if len(buf) < hdrSize || [8]byte(buf[:8]) != walMagic ||
		binary.LittleEndian.Uint32(buf[hdrCRC:]) != crc32.Checksum(buf[:hdrCRC], castagnoli) {
		return h, false
	}
	h.gen = binary.LittleEndian.Uint64(buf[hdrGen:])
	h.clean = binary.LittleEndian.Uint32(buf[hdrFlags:])&flagClean != 0
	h.pageSize = int(binary.LittleEndian.Uint32(buf[hdrPageSize:]))
	copy(h.meta[:], buf[hdrMeta:])
	return h, true
}

// readHeader returns the header in force: of the valid slots, the one of
// the highest generation. ok is false when neither slot is valid.
func readHeader(f io.ReaderAt) (h walHeader, ok bool, err error) {
	buf := make([]byte, hdrSize)
	for slot := range 2 {
		if _, err := f.ReadAt(buf, int64(slot*walSlot)); err != nil && !errors.Is(err, io.EOF) {
			return h, false, err
		}
		if s, valid := decodeHeader(buf); valid && (!ok || s.gen > h.gen) {
			h, ok = s, true
		}
	}
	return h, ok, nil
}

// readRecords calls fn with the payload of each record of generation gen,
// in order, up to the first that is torn, stale or missing; the payload is
// valid only until fn returns. It returns the offset after the last record
// read.
func readRecords(f io.ReaderAt, gen uint64, fn func(payload []byte) error) (int64, error) {
	off := int64(walRecords)
	var hdr [recHeader]byte
	var payload []byte
	for {
		if _, err := f.ReadAt(hdr[:], off); err != nil {
			if errors.Is(err, io.EOF) {
				return off, nil
			}
			return off, err
		}
		n := binary.LittleEndian.Uint32(hdr[0:])
		if n == 0 || n > maxLogRecord || binary.LittleEndian.Uint64(hdr[8:]) != gen {
			return off, nil
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := f.ReadAt(payload, off+recHeader); err != nil {
			if errors.Is(err, io.EOF) {
				return off, nil
			}
			return off, err
		}
		crc := crc32.Update(crc32.Checksum(hdr[8:], castagnoli), castagnoli, payload)
		if crc != binary.LittleEndian.Uint32(hdr[4:]) {
			return off, nil
		}
		if err := fn(payload); err != nil {
			return off, err
		}
		off += recHeader + int64(n)
	}
}

// appendPut adds a put to a record being built, and returns the copies of
// key and value in it. They stay valid when rec grows: append then copies
// rec to a new array and leaves the old one as it is.
func appendPut(rec []byte, bucket string, key, value []byte) (_, k, v []byte) {
	rec = append(rec, opPut)
	rec = appendString(rec, bucket)
	rec = binary.AppendUvarint(rec, uint64(len(key)))
	rec = append(rec, key...)
	k = rec[len(rec)-len(key) : len(rec) : len(rec)]
	rec = binary.AppendUvarint(rec, uint64(len(value)))
	rec = append(rec, value...)
	v = rec[len(rec)-len(value) : len(rec) : len(rec)]
	return rec, k, v
}

// appendDelete adds a delete to a record being built.
func appendDelete(rec []byte, bucket string, key []byte) []byte {
	rec = append(rec, opDelete)
	rec = appendString(rec, bucket)
	rec = binary.AppendUvarint(rec, uint64(len(key)))
	return append(rec, key...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errBadRecord reports a record whose checksum holds but whose changes do
// not decode: the log was not written by this package.
var errBadRecord = errors.New("malformed record")

// applyRecord applies the changes of a record's payload in btx.
func applyRecord(btx *bbolt.Tx, payload []byte) error {
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(payload)
		if k <= 0 || n > uint64(len(payload)-k) {
			return nil, false
		}
		f := payload[k : k+int(n)]
		payload = payload[k+int(n):]
		return f, true
	}
	for len(payload) > 0 {
		op := payload[0]
		payload = payload[1:]
		bucket, ok1 := field()
		key, ok2 := field()
		if !ok1 || !ok2 || len(bucket) == 0 || len(key) == 0 {
			return errBadRecord
		}
		switch op {
		case opPut:
			value, ok := field()
			if !ok {
				return errBadRecord
			}
			b, err := btx.CreateBucketIfNotExists(bucket)
			if err != nil {
				return err
			}
			// bbolt keeps value until the commit, and readRecords
			// reuses the payload's buffer for the next record.
			if err := b.Put(key, bytes.Clone(value)); err != nil {
				return err
			}
		case opDelete:
			if b := btx.Bucket(bucket); b != nil {
				if err := b.Delete(key); err != nil {
					return err
				}
			}
		default:
			return errBadRecord
		}
	}
	return nil
}

// openWAL opens the log at path, creating it if needed, and returns its
// header in force; a new log's is a clean one of generation zero.
func openWAL(path string) (w *wal, h walHeader, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, fileMode)
	created := errors.Is(err, fs.ErrNotExist)
	if created {
		f, err = createWAL(path)
	}
	if err != nil {
		return nil, h, err
	}
	w = &wal{f: osWALFile{f}, path: path, limit: walCheckpointBytes, maxRec: maxLogRecord}
	h.clean = true // a new log: the database file is all there is
	if !created {
		var ok bool
		if h, ok, err = readHeader(w.f); err != nil {
			w.close()
			return nil, h, err
		}
		if !ok {
			// A log whose header was never written, by a crash right
			// after its creation: the database file was flushed before.
			h = walHeader{clean: true}
		}
	}
	w.gen = h.gen
	return w, h, nil
}

// createWAL creates the log file, made walRecords+walCheckpointBytes
// long (zeroes, flushed) so that records overwrite data rather than grow
// the file, and flushes the directory.
func createWAL(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return nil, err
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < walRecords+walCheckpointBytes && err == nil; off += int64(len(zero)) {
		_, err = f.WriteAt(zero, off)
	}
	if err == nil {
		err = fdatasync(f)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return f, nil
}

// writeHeader writes h, with the next generation, into its slot and
// flushes it: it is then the header in force, and the records start
// afresh.
func (w *wal) writeHeader(h walHeader) error {
	h.gen = w.gen + 1
	buf := make([]byte, hdrSize)
	h.encode(buf)
	slot := int64(h.gen%2) * walSlot
	_, err := w.f.WriteAt(buf, slot)
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		// The header may have reached the disk, or may yet: zero it, so
		// that the header before stays in force. (A best effort: the
		// disk is failing.)
		clear(buf)
		if _, zerr := w.f.WriteAt(buf, slot); zerr == nil {
			_ = w.f.Sync()
		}
		return err
	}
	w.gen, w.end, w.pending, w.commits = h.gen, walRecords, -1, 0
	return nil
}

// append writes rec, whose first recHeader bytes are left for the record
// header, as the next record, and flushes it.
func (w *wal) append(rec []byte) error {
	n := len(rec) - recHeader
	binary.LittleEndian.PutUint32(rec[0:], uint32(n))
	binary.LittleEndian.PutUint64(rec[8:], w.gen)
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(rec[8:], castagnoli))
	if _, err := w.f.WriteAt(rec, w.end); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	w.end += int64(len(rec))
	w.commits++
	return nil
}

// invalidate zeroes the header of the record that append failed to write
// or flush: it may have reached the disk, or may yet, and it must not be
// replayed, since its commit is refused. (A best effort: the disk is
// failing. If the zeroes do not reach the disk either, a later Open may
// replay a commit whose Update failed.)
func (w *wal) invalidate() {
	var zero [recHeader]byte
	if _, err := w.f.WriteAt(zero[:], w.end); err == nil {
		_ = w.f.Sync()
	}
}

// readMeta reads the meta page of transaction txid, the last committed,
// from the database file at path, whose pages are pageSize bytes.
func readMeta(path string, pageSize int, txid uint64) ([metaSize]byte, error) {
	var m [metaSize]byte
	f, err := os.Open(path)
	if err != nil {
		return m, err
	}
	defer f.Close()
	if _, err := f.ReadAt(m[:], int64(txid%2)*int64(pageSize)); err != nil {
		return m, err
	}
	if !validMeta(m[:]) || binary.NativeEndian.Uint64(m[metaTxidAt:]) != txid {
		return m, fmt.Errorf("meta page of transaction %d not found in its slot", txid)
	}
	return m, nil
}

// validMeta reports whether m is a valid bbolt meta page (as bbolt checks
// it: magic, version and checksum).
func validMeta(m []byte) bool {
	if binary.NativeEndian.Uint32(m[metaMagicAt:]) != boltMagic ||
		binary.NativeEndian.Uint32(m[metaMagicAt+4:]) != boltVersion {
		return false
	}
	h := fnv.New64a()
	h.Write(m[metaMagicAt:metaSumAt])
	return h.Sum64() == binary.NativeEndian.Uint64(m[metaSumAt:])
}

// restoreMeta writes meta over both meta pages of the database file at
// path and flushes them, bringing back the state meta is the root of. It
// fails, changing nothing, if meta is not a valid meta page of pageSize
// bytes, or the file is too short for the state (it is then not the file
// the log belongs to).
func restoreMeta(path string, pageSize int, meta [metaSize]byte) (err error) {
	if !validMeta(meta[:]) || binary.NativeEndian.Uint32(meta[metaPageAt:]) != uint32(pageSize) {
		return errors.New("the log's header holds no valid meta page")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if pages := binary.NativeEndian.Uint64(meta[metaPgidAt:]); uint64(fi.Size()) < pages*uint64(pageSize) {
		return fmt.Errorf("%s is shorter than the state the log starts from: the log belongs to another file", path)
	}
	for id := range 2 {
		page := meta
		binary.NativeEndian.PutUint64(page[0:], uint64(id))
		if _, err := f.WriteAt(page[:], int64(id*pageSize)); err != nil {
			return err
		}
	}
	return fdatasync(f)
}

// needsRecoveryError is the error of a read-only Open of a database whose
// log holds commits to apply.
type needsRecoveryError struct{ path, wal string }

func (e *needsRecoveryError) Error() string {
	return fmt.Sprintf("store/bolt: open %s: the database was not closed cleanly: its write-ahead log %s holds commits that only a read-write open applies", e.path, e.wal)
}

func (e *needsRecoveryError) Unwrap() error { return ErrNeedsRecovery }

// due reports whether a checkpoint is due, given bbolt's count of freed
// pages not yet reusable after a commit: once the log is full, or the pin
// holds checkpointPinned pages and minCheckpointCommits commits have
// been logged. (Commits of many calls each free many pages: the minimum
// spares them a checkpoint every few commits, which would stall every
// caller for its flush, at the cost of a larger file.)
func (w *wal) due(pending int) bool {
	if w.pending < 0 {
		w.pending = pending
	}
	return w.end-walRecords >= w.limit || pending-w.pending >= checkpointPinned && w.commits >= minCheckpointCommits
}

// hooks lets tests watch the log at work and break it. Production code
// leaves Options.hooks nil.
type hooks struct {
	wrapWAL         func(walFile) walFile // wraps the log's file once opened
	checkpointBytes int64                 // the log's checkpoint size; zero means walCheckpointBytes
	maxRecord       int                   // the largest record; zero means maxLogRecord
	mmapSize        int                   // bbolt's initial map size; zero means logMmapSize()
	afterCommit     func()                // a commit's pages are written; its record is not yet
	afterFlush      func()                // the database file has been flushed
	afterCheckpoint func()                // a checkpoint has pinned its state
	// pinRelease is how long a commit runs before the pin is dropped;
	// zero means the constant pinRelease. Tests that count checkpoints
	// set it long, so that a commit slowed by a loaded machine does not
	// make one.
	pinRelease time.Duration
	// failFlush is called before each flush of the database file by this
	// package; an error it returns is the flush's, and the file is then
	// not flushed (what was written stays in the page cache, as after a
	// failed fdatasync whose writes reach the disk later).
	failFlush func() error
	// failCommit is called after each bbolt commit that returned nil; an
	// error it returns stands for the commit's, as if its last write or
	// flush had failed once it had written everything.
	failCommit func() error
}

// prepareLog opens the log of the database at path before bbolt opens the
// file. If the database was not closed cleanly, it restores the meta page
// of the log's checkpoint (see restoreMeta); replay is then true, and the
// log's records are to be replayed (see DB.startLog). The log is created if it is missing and
// will be used; w is nil when there is no log and none is to be used.
func prepareLog(path string, opts *Options) (w *wal, replay bool, err error) {
	use := !opts.ReadOnly && !opts.NoSync && !opts.NoWAL
	walPath := path + walSuffix
	if !use {
		if _, err := os.Stat(walPath); errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
	}
	var h walHeader
	if opts.ReadOnly {
		f, err := os.Open(walPath)
		if err != nil {
			return nil, false, err
		}
		defer f.Close()
		h, ok, err := readHeader(f)
		if err != nil {
			return nil, false, fmt.Errorf("read %s: %w", walPath, err)
		}
		if ok && !h.clean {
			return nil, false, &needsRecoveryError{path: path, wal: walPath}
		}
		return nil, false, nil
	}
	w, h, err = openWAL(walPath)
	if err != nil {
		return nil, false, fmt.Errorf("write-ahead log %s: %w", walPath, err)
	}
	if opts.hooks != nil {
		if opts.hooks.wrapWAL != nil {
			w.f = opts.hooks.wrapWAL(w.f)
		}
		if opts.hooks.checkpointBytes > 0 {
			w.limit = opts.hooks.checkpointBytes
		}
		if opts.hooks.maxRecord > 0 {
			w.maxRec = opts.hooks.maxRecord
		}
	}
	if h.clean {
		return w, false, nil
	}
	if err := restoreMeta(path, h.pageSize, h.meta); err != nil {
		w.close()
		return nil, false, fmt.Errorf("recover from %s: %w", walPath, err)
	}
	return w, true, nil
}

// startLog finishes opening the log prepared by prepareLog, once bbolt has
// the file open: it replays the log's records if replay is set, then
// starts the log afresh with a checkpoint, or, if the log is not to be
// used, removes it.
func (db *DB) startLog(w *wal, replay bool, opts *Options) error {
	if w == nil {
		return nil
	}
	if replay {
		nosync := db.bdb.NoSync
		db.bdb.NoSync = false
		err := db.bdb.Update(func(btx *bbolt.Tx) error {
			_, err := readRecords(w.f, w.gen, func(payload []byte) error { return applyRecord(btx, payload) })
			return err
		})
		db.bdb.NoSync = nosync
		if err != nil {
			return fmt.Errorf("store/bolt: open %s: recover from %s: replay: %w", db.path, w.path, err)
		}
	}
	if opts.NoSync || opts.NoWAL {
		if err := w.remove(); err != nil {
			return fmt.Errorf("store/bolt: open %s: remove the write-ahead log: %w", db.path, err)
		}
		return nil
	}
	db.wal = w
	db.hooks = opts.hooks
	// Commits do not flush the file, nor its growth: the checkpoint's
	// fdatasync flushes both. (bbolt then grows the file by its writes,
	// not ahead of them.)
	db.bdb.NoSync, db.bdb.NoGrowSync = true, true
	return db.checkpoint()
}

// setPin makes p the pin and rolls the previous one back.
func (db *DB) setPin(p *bbolt.Tx) {
	db.pinMu.Lock()
	old := db.pin
	db.pin = p
	db.pinMu.Unlock()
	if old != nil {
		_ = old.Rollback()
	}
}

// pinned reports whether the pin is held.
func (db *DB) pinned() bool {
	db.pinMu.Lock()
	defer db.pinMu.Unlock()
	return db.pin != nil
}

// watchCommit starts the watch over a commit: if the commit is still
// running after pinRelease, the pin is dropped, in case the commit waits
// for it to remap the file. Call endCommit once the commit has returned.
func (db *DB) watchCommit() {
	after := pinRelease
	if db.hooks != nil && db.hooks.pinRelease > 0 {
		after = db.hooks.pinRelease
	}
	db.pinMu.Lock()
	db.committing = true
	if db.pinTimer == nil {
		db.pinTimer = time.AfterFunc(after, db.commitTooLong)
	} else {
		db.pinTimer.Reset(after)
	}
	db.pinMu.Unlock()
}

// endCommit ends the watch started by watchCommit.
func (db *DB) endCommit() {
	db.pinMu.Lock()
	db.committing = false
	db.pinTimer.Stop()
	db.pinMu.Unlock()
}

// commitTooLong drops the pin if a commit is still running.
func (db *DB) commitTooLong() {
	db.pinMu.Lock()
	var old *bbolt.Tx
	if db.committing {
		old, db.pin = db.pin, nil
	}
	db.pinMu.Unlock()
	if old != nil {
		_ = old.Rollback()
	}
}

// checkpoint flushes the database file and makes its current state the
// log's starting point: the log's header names the state's meta page, and
// the pin holds the state's pages. Only the writer calls it. If it fails
// before the header is written, the log and the pin are as they were; if
// writing the header fails, the log is abandoned.
func (db *DB) checkpoint() error {
	pin, err := db.bdb.Begin(false)
	if err != nil {
		return fmt.Errorf("store/bolt: checkpoint %s: %w", db.path, err)
	}
	h := walHeader{pageSize: db.bdb.Info().PageSize}
	if err := db.flush(); err != nil {
		// The pages written since the last checkpoint may be lost from
		// the page cache without ever reaching the disk, and a second
		// flush could report success all the same: only the log still
		// holds those commits for sure.
		_ = pin.Rollback()
		return db.fail("flush the database file", err)
	}
	h.meta, err = readMeta(db.path, h.pageSize, uint64(pin.ID()))
	if err != nil {
		_ = pin.Rollback()
		return fmt.Errorf("store/bolt: checkpoint %s: %w", db.path, err)
	}
	if err := db.wal.writeHeader(h); err != nil {
		_ = pin.Rollback()
		return db.abandonLog(fmt.Errorf("write the header of %s: %w", db.wal.path, err))
	}
	db.setPin(pin)
	db.stats.checkpoints.Add(1)
	if db.hooks != nil && db.hooks.afterCheckpoint != nil {
		db.hooks.afterCheckpoint()
	}
	return nil
}

// flush flushes the database file. After it fails, the DB must not flush
// the file again and trust the result: see DB.fail.
func (db *DB) flush() error {
	if db.hooks != nil && db.hooks.failFlush != nil {
		if err := db.hooks.failFlush(); err != nil {
			return err
		}
	}
	err := db.bdb.Sync()
	if err == nil && db.hooks != nil && db.hooks.afterFlush != nil {
		db.hooks.afterFlush()
	}
	return err
}

// logCommit appends the record of the commit just written and flushes it,
// which makes the commit durable; see the top of this file. rec starts
// with recHeader bytes left for the record header.
func (db *DB) logCommit(rec []byte) error {
	if db.hooks != nil && db.hooks.afterCommit != nil {
		db.hooks.afterCommit()
	}
	if len(rec) == recHeader {
		// No change to replay (a write failed and its fn went on): an
		// empty record would read as the end of the log.
		return nil
	}
	if len(rec)-recHeader > db.wal.maxRec {
		// Too large for the log: the checkpoint makes it durable.
		err := db.checkpoint()
		if err != nil && db.failure() == nil {
			// It failed before writing the header: the commit is neither
			// in the log nor flushed, and later commits may see it. Go on
			// without the log, as when appending fails.
			err = db.abandonLog(err)
		}
		return err
	}
	if err := db.wal.append(rec); err != nil {
		db.wal.invalidate()
		return db.abandonLog(fmt.Errorf("append to %s: %w", db.wal.path, err))
	}
	return nil
}

// abandonLog stops using the log after writing to it failed: the log may
// no longer hold every commit since its checkpoint. The database file is
// flushed, which makes it hold them, and the log removed, so that no later
// Open restores the checkpoint; commits then flush the file themselves,
// and the commit whose record failed is durable, in the file. If the flush
// or the removal fails, the DB is put in the failed state, and the error
// returned: the log still holds every commit Update returned for (and not
// the one whose record failed: see wal.invalidate), and the next Open
// recovers from it.
func (db *DB) abandonLog(cause error) error {
	db.setPin(nil)
	if err := db.flush(); err != nil {
		return db.fail(fmt.Sprintf("the write-ahead log failed (%v), and so did flushing the database file without it", cause), err)
	}
	_ = db.wal.close()
	if err := os.Remove(db.wal.path); err != nil {
		return db.fail(fmt.Sprintf("the write-ahead log failed (%v), and so did removing it", cause), err)
	}
	db.wal = nil
	db.bdb.NoSync, db.bdb.NoGrowSync = false, false
	if err := syncDir(filepath.Dir(db.path)); err != nil {
		// The log is gone and the file holds every commit: the commit
		// stands, but the directory's state on disk is unknown.
		db.fail(fmt.Sprintf("the write-ahead log failed (%v), and so did flushing the directory after removing it", cause), err)
	}
	return nil
}

// closeLog flushes the database file and marks the log clean, so that the
// next Open neither restores nor replays anything; it drops the pin in any
// case. The log stays open.
func (db *DB) closeLog() error {
	db.setPin(nil)
	if db.failure() != nil {
		return nil
	}
	if err := db.flush(); err != nil {
		return db.fail("flush the database file", err)
	}
	if err := db.wal.writeHeader(walHeader{clean: true, pageSize: db.bdb.Info().PageSize}); err != nil {
		return db.fail("mark the write-ahead log "+db.wal.path+" clean", err)
	}
	return nil
}
