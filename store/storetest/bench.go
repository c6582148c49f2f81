package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/crux-go/crux/store"
)

// benchBucket is the bucket the benchmarks write to.
const benchBucket = "bench"

// Bench runs the standard benchmarks against backends made by newBackend,
// a fresh one per sub-benchmark (newBackend registers its own cleanup):
//
//   - UpdateSequential: one goroutine, one small Put per Update.
//   - UpdateConcurrent32: the same from 32 goroutines.
//   - Get: one Get per View, from a bucket of 10,000 keys.
//   - ScanPrefix, ScanPrefixReverse: one View scanning the 100 keys of a
//     prefix, in a bucket of 10,000 keys.
//
// Each reports ops/s (Updates, Views) besides ns/op.
func Bench(b *testing.B, newBackend func(b *testing.B) store.Backend) {
	b.Run("UpdateSequential", func(b *testing.B) { BenchUpdate(b, newBackend(b), 1) })
	b.Run("UpdateConcurrent32", func(b *testing.B) { BenchUpdate(b, newBackend(b), 32) })
	b.Run("Get", func(b *testing.B) { benchGet(b, newBackend(b)) })
	b.Run("ScanPrefix", func(b *testing.B) { benchScan(b, newBackend(b), false) })
	b.Run("ScanPrefixReverse", func(b *testing.B) { benchScan(b, newBackend(b), true) })
}

// BenchUpdate measures b.N Updates spread over the given number of
// goroutines, each Update putting a 64-byte value under a new 8-byte key.
// It reports the throughput as ops/s. Backends use it for their own
// benchmarks, to add backend-specific metrics.
func BenchUpdate(b *testing.B, be store.Backend, goroutines int) {
	value := bytes.Repeat([]byte{'v'}, 64)
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range max(goroutines, 1) {
		wg.Go(func() {
			key := make([]byte, 8)
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				binary.BigEndian.PutUint64(key, uint64(i))
				err := be.Update(ctx, func(tx store.Tx) error {
					return tx.Put(benchBucket, key, value)
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportOps(b)
}

// reportOps reports b.N operations per second of measured time.
func reportOps(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
}

// fill puts keys "s/GGG/KKKK" (groups × perGroup) in one Update.
func fill(b *testing.B, be store.Backend, groups, perGroup int) {
	b.Helper()
	value := bytes.Repeat([]byte{'v'}, 64)
	err := be.Update(context.Background(), func(tx store.Tx) error {
		for g := range groups {
			for k := range perGroup {
				if err := tx.Put(benchBucket, fmt.Appendf(nil, "s/%03d/%04d", g, k), value); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func benchGet(b *testing.B, be store.Backend) {
	const groups, perGroup = 100, 100
	fill(b, be, groups, perGroup)
	ctx := context.Background()
	key := []byte("s/000/0000")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		g, k := (i*7919)%groups, (i*104729)%perGroup
		key = fmt.Appendf(key[:0], "s/%03d/%04d", g, k)
		err := be.View(ctx, func(tx store.Tx) error {
			_, err := tx.Get(benchBucket, key)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportOps(b)
}

func benchScan(b *testing.B, be store.Backend, reverse bool) {
	const groups, perGroup = 100, 100
	fill(b, be, groups, perGroup)
	ctx := context.Background()
	prefix := []byte("s/000/")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		prefix = fmt.Appendf(prefix[:0], "s/%03d/", (i*7919)%groups)
		n := 0
		err := be.View(ctx, func(tx store.Tx) error {
			n = 0
			return tx.Scan(benchBucket, prefix, reverse, func(_, _ []byte) error {
				n++
				return nil
			})
		})
		if err != nil {
			b.Fatal(err)
		}
		if n != perGroup {
			b.Fatalf("scan of %q visited %d keys, want %d", prefix, n, perGroup)
		}
	}
	b.StopTimer()
	reportOps(b)
}
