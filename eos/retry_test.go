package eos_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
)

// A Process function that counts per key, then fails once after its
// write, counts every record once under Retry: what its store commits
// (read back from its changelog) and what it emits hold each record's
// count once, not the failed attempts' too.
func TestRetriedCountCommitsOnce(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	const n, keys = 300, 10
	conformance.Seed(t, env, "in", n)
	var mu sync.Mutex
	failed := map[int64]bool{} // offsets whose first attempt failed
	top := topology.New()
	top.AddStore("counts", state.Memory())
	src := topology.Source(top, "in", codec.Bytes())
	counted := topology.Process(src, "count", func(ctx processor.Context[string], r processor.Record[[]byte]) error {
		id, ok := verdict.ID(r.Value)
		if !ok {
			return fmt.Errorf("no id in %q", r.Value)
		}
		counts, err := processor.KV(ctx, "counts", codec.String(), codec.JSON[int]())
		if err != nil {
			return err
		}
		key := fmt.Sprint(id % keys)
		c, _, err := counts.Get(key)
		if err != nil {
			return err
		}
		if err := counts.Put(key, c+1); err != nil {
			return err
		}
		mu.Lock()
		first := !failed[r.Offset]
		failed[r.Offset] = true
		mu.Unlock()
		if first {
			return errors.New("fails once after writing")
		}
		ctx.Emit(processor.Record[string]{Key: []byte(key), Value: fmt.Sprint(c + 1)})
		return nil
	}, topology.UseStores("counts"))
	topology.To(counted, "out", codec.String())
	top.OnError("count", topology.Retry(2, time.Millisecond, topology.Fail()))
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)
	x.WaitCommitted(t, n, 60*time.Second)
	mu.Lock()
	failures := len(failed)
	mu.Unlock()
	// A batch redone after an abort finds its records failed already, so
	// not every retry need commit.
	if got := x.R.Stats().Retries; failures != n || got == 0 {
		t.Fatalf("%d records failed once, %d retries committed; want every record failed once, and retries committed", failures, got)
	}

	last := map[string]string{}
	for _, r := range conformance.Drain(t, env, topology.ChangelogTopic("app", "counts"), keys) {
		last[string(r.Key)] = string(r.Value)
	}
	emitted := map[string]int{}
	for _, r := range conformance.Drain(t, env, "out", n) {
		emitted[string(r.Key)+"="+string(r.Value)]++
	}
	for k := range keys {
		key := fmt.Sprint(k)
		if got, want := last[key], fmt.Sprint(n/keys); got != want {
			t.Errorf("the store committed %s for key %s, want %s", got, key, want)
		}
		for c := 1; c <= n/keys; c++ {
			if got := emitted[fmt.Sprintf("%s=%d", key, c)]; got != 1 {
				t.Fatalf("count %d of key %s emitted %d times, want once", c, key, got)
			}
		}
	}
}
