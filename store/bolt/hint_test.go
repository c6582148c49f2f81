package bolt

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

// TestFillHints: appended keys fill their pages to appendFillPercent with
// HintAppend and completely with HintWriteOnce, against half without a
// hint.
func TestFillHints(t *testing.T) {
	pages := func(hint func(*tx, string)) int {
		db, err := Open(filepath.Join(t.TempDir(), "crux.db"), &Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		value := []byte(strings.Repeat("v", 300))
		for batch := range 10 {
			err := db.Update(context.Background(), func(stx store.Tx) error {
				if hint != nil {
					hint(stx.(*tx), "b")
				}
				for i := range 200 {
					if err := stx.Put("b", binary.BigEndian.AppendUint32(nil, uint32(batch*200+i)), value); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		var n int
		db.bdb.View(func(btx *bbolt.Tx) error { n = btx.Bucket([]byte("b")).Stats().LeafPageN; return nil })
		return n
	}
	none := pages(nil)
	appended := pages((*tx).HintAppend)
	once := pages((*tx).HintWriteOnce)
	if !(once < appended && appended < none) {
		t.Errorf("leaf pages: write-once %d, append %d, no hint %d; want fewer with each", once, appended, none)
	}
}
