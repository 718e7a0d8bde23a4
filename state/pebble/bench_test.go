package pebble

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/state"
)

// smallRecords is a changelog of n records with 9-byte keys and 16-byte
// values over n/4 keys, every tenth a delete: the same as state's
// benchmarks, so the engines' numbers compare.
func smallRecords(n int) []state.Write {
	out := make([]state.Write, n)
	for i := range out {
		k := binary.BigEndian.AppendUint64([]byte{'k'}, uint64(i*7919%(n/4)))
		if i%10 == 9 {
			out[i] = state.Write{Key: k}
			continue
		}
		out[i] = state.Write{Key: k, Value: []byte(fmt.Sprintf("value-%010d", i))}
	}
	return out
}

func benchKey(i int) []byte { return binary.BigEndian.AppendUint64([]byte{'k'}, uint64(i)) }

// BenchmarkRestore applies 1M small changelog records in batches of 10k,
// the work of a restore after the fetches arrived.
func BenchmarkRestore(b *testing.B) {
	const n, batch = 1_000_000, 10_000
	log := smallRecords(n)
	b.Run("pebble", func(b *testing.B) {
		var elapsed time.Duration
		for b.Loop() {
			s, err := state.Open(New(), b.TempDir(), "counts", task)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for i := 0; i < n; i += batch {
				if err := s.Restore(log[i:i+batch], int64(i+batch-1)); err != nil {
					b.Fatal(err)
				}
			}
			elapsed += time.Since(start)
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "records/s")
	})
}

// BenchmarkGet reads 100k committed keys, with 1k other keys in the
// overlay: what the engine adds to a read.
func BenchmarkGet(b *testing.B) {
	const n = 100_000
	s, err := state.Open(New(), b.TempDir(), "counts", task)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		_ = s.Put(benchKey(i), []byte("committed-value!"))
	}
	if err := s.Commit(0); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		_ = s.Put(benchKey(n+i), []byte("x"))
	}
	b.Run("pebble/engine", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok, err := s.Get(benchKey(i * 7919 % n)); !ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
}

// BenchmarkCommit commits batches of 1000 overlay writes (puts over a
// 100k key space, every tenth a delete); ns/op is per batch.
func BenchmarkCommit(b *testing.B) {
	const n, batch = 100_000, 1000
	b.Run("pebble", func(b *testing.B) {
		s, err := state.Open(New(), b.TempDir(), "counts", task)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		v := []byte("overlay-value!!!")
		off, i := int64(0), 0
		for b.Loop() {
			for range batch {
				k := benchKey(i * 7919 % n)
				if i%10 == 9 {
					_ = s.Delete(k)
				} else {
					_ = s.Put(k, v)
				}
				i++
			}
			if err := s.Commit(off); err != nil {
				b.Fatal(err)
			}
			off++
		}
		b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "writes/s")
	})
}
