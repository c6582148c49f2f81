package store_test

import "testing"

// TestUpgradeFormat8 opens a store written by the code of format 8: the
// upgrade rewrites the keys of the confidence index (their standard ids
// in 16 bytes) and nothing else of the buckets compared; facts and
// queries read as before, and new versions of its chains, written in the
// layout of format 9, retire the format-8 facts they supersede (see
// upgradeAndRetire).
func TestUpgradeFormat8(t *testing.T) { upgradeAndRetire(t, "format8", 8) }
