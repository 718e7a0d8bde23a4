package eos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/conformance"
	"github.com/eosflow/eosflow/internal/kafkatest"
	"github.com/eosflow/eosflow/internal/verdict"
)

// A batch ends once its records' bytes reach max_memory's batch share, so
// large records do not make batches of max_batch_records; with room for
// them, the same backlog goes in larger batches.
func TestBatchEndsOnItsByteCap(t *testing.T) {
	const (
		n   = 600
		pad = 20 << 10 // value bytes
	)
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 1, "in", "out", "out-roomy")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := verdict.Seed(ctx, env.Client(t), "in", n, 97, pad); err != nil {
				t.Fatal(err)
			}
			run := func(app, out string, maxMemory config.ByteSize) (batches []int, capBytes int64) {
				cfg := env.Config(app, "a", g)
				cfg.MaxMemory = maxMemory
				cfg.CommitInterval, cfg.TransactionTimeout = 2*time.Second, 30*time.Second
				var mu sync.Mutex
				x := conformance.Start(t, cfg, conformance.Upper("in", out, nil), eos.BeforeCommit(func(_ context.Context, b eos.BatchInfo) error {
					mu.Lock()
					defer mu.Unlock()
					batches = append(batches, b.Records)
					return nil
				}))
				x.WaitCommitted(t, n, time.Minute)
				x.Stop()
				if err := x.Wait(t, 30*time.Second); err != nil {
					t.Fatal(err)
				}
				if g == config.ExactlyOnce {
					conformance.ExactlyOnce(t, env, out, n)
				}
				mu.Lock()
				defer mu.Unlock()
				return batches, cfg.Memory().BatchBytes
			}

			batches, capBytes := run("capped", "out", config.MinMaxMemory)
			t.Logf("max_memory %s, batch cap %d bytes: batches of %v records", config.MinMaxMemory, capBytes, batches)
			// The record that reaches the cap is the batch's last; keys
			// are at least 2 bytes ("k0").
			most := int((capBytes + pad + 2 - 1) / (pad + 2))
			full := 0
			for _, b := range batches {
				if b > most {
					t.Fatalf("a batch of %d records of %d bytes, past the %d-byte cap (at most %d records); batches %v", b, pad, capBytes, most, batches)
				}
				if b >= most-1 {
					full++
				}
			}
			if full < n/most-1 {
				t.Fatalf("%d batches ended on the byte cap (%d records), want at least %d: batches %v", full, most, n/most-1, batches)
			}

			roomy, _ := run("roomy", "out-roomy", config.GiB)
			biggest := 0
			for _, b := range roomy {
				biggest = max(biggest, b)
			}
			if biggest <= most {
				t.Fatalf("with max_memory 1GiB the largest batch held %d records, no more than the capped %d: the cap is not what ends batches (batches %v)", biggest, most, roomy)
			}
		})
	}
}
