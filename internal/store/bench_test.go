package store_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
)

// smallRecords is a changelog of n records with 9-byte keys and 16-byte
// values over n/4 keys, every tenth a delete.
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

// BenchmarkRestore applies 1M small changelog records in batches of 10k,
// the work of a restore after the fetches arrived.
func BenchmarkRestore(b *testing.B) {
	const n, batch = 1_000_000, 10_000
	log := smallRecords(n)
	for _, ec := range benchCases() {
		b.Run(ec.name, func(b *testing.B) {
			var elapsed time.Duration
			for b.Loop() {
				s, err := store.Open(ec.engine(), b.TempDir(), "counts", task)
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
}

// benchCases are the engines benchmarked side by side.
func benchCases() []engineCase {
	return []engineCase{{name: "memory", engine: state.Memory}, {name: "pebble", engine: func() state.Engine { return pebble.New() }}}
}

func benchKey(i int) []byte { return binary.BigEndian.AppendUint64([]byte{'k'}, uint64(i)) }

// benchStore has keys 0..n-1 committed and, when overlay, rewritten in
// the overlay too.
func benchStore(b *testing.B, ec engineCase, n int, overlay bool) *store.Store {
	s, err := store.Open(ec.engine(), b.TempDir(), "counts", task)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for i := range n {
		_ = s.Put(benchKey(i), []byte("committed-value!"))
	}
	if err := s.Commit(0); err != nil {
		b.Fatal(err)
	}
	if overlay {
		for i := range n {
			_ = s.Put(benchKey(i), []byte("overlay-value!!!"))
		}
	}
	return s
}

// BenchmarkGet reads keys the batch wrote (overlay) and keys only the
// engine has (engine, with 1k other keys in the overlay).
func BenchmarkGet(b *testing.B) {
	const n = 100_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = benchKey(i * 7919 % n)
	}
	for _, ec := range benchCases() {
		for _, where := range []string{"overlay", "engine"} {
			b.Run(ec.name+"/"+where, func(b *testing.B) {
				s := benchStore(b, ec, n, where == "overlay")
				if where == "engine" {
					for i := range 1000 {
						_ = s.Put(benchKey(n+i), []byte("x"))
					}
				}
				i := 0
				for b.Loop() {
					if _, ok, err := s.Get(keys[i%n]); !ok || err != nil {
						b.Fatal(ok, err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkPut writes to the overlay, over 10k keys; BenchmarkCommit
// measures the engine write at batch end.
func BenchmarkPut(b *testing.B) {
	const n = 10_000
	for _, ec := range benchCases() {
		b.Run(ec.name, func(b *testing.B) {
			s := benchStore(b, ec, 0, false)
			v := []byte("overlay-value!!!")
			i := 0
			for b.Loop() {
				if err := s.Put(benchKey(i%n), v); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkCommit commits batches of 1000 overlay writes (puts over a
// 100k key space, every tenth a delete); ns/op is per batch. Pebble runs
// with its default flush interval, with none, and with a flush every
// 100 ms: what bounding a crash's loss in time costs.
func BenchmarkCommit(b *testing.B) {
	const n, batch = 100_000, 1000
	cases := append(benchCases(),
		engineCase{name: "pebble/flush-interval-off", engine: func() state.Engine { return pebble.New(pebble.FlushInterval(0)) }},
		engineCase{name: "pebble/flush-interval-100ms", engine: func() state.Engine { return pebble.New(pebble.FlushInterval(100 * time.Millisecond)) }})
	for _, ec := range cases {
		b.Run(ec.name, func(b *testing.B) {
			s := benchStore(b, ec, 0, false)
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
}
