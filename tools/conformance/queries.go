package conformance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// queryCount reads key's count from the "counts" store of r.
func queryCount(r *eos.Runner, key string) (int64, bool, error) {
	q, err := r.Query("counts")
	if err != nil {
		return 0, false, err
	}
	return eos.GetAs(context.Background(), q, []byte(key), codec.Int64())
}

// produce writes keyed records to in, one every 5ms, counting them per key
// in produced, until the returned stop is called.
func produce(t *testing.T, cl *kgo.Client, in string, keys int, produced map[string]int64) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
			k := verdict.Key(i, keys)
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: in, Key: k, Value: []byte("v")}).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			produced[string(k)]++
		}
	}()
	return func() { close(quit); <-done }
}

// total sums produced.
func total(produced map[string]int64) (n int64) {
	for _, c := range produced {
		n += c
	}
	return n
}

// QueriesDuringRebalance runs instances counting while they join and
// leave under group protocol gp, records arriving all along so that
// values change during every rebalance, and per instance one goroutine
// queries every key and another reads the store with Range and Prefix.
// Every value answered is one the committed output also shows (1 to the
// key's final count); no answer, on any instance, is smaller than one
// that ended before it started (a counted key never reads absent again);
// the other answers say the partition is not owned there, restoring, or
// the instance stopped. Values (from Get and from ranges), not-owner and
// stopped answers all occur; once the group settles, Locate says owned
// exactly for the partitions the group assigned each instance; and in
// the end every key reads its final count.
func QueriesDuringRebalance(t *testing.T, env *kafkatest.Env, e state.Engine, gp config.GroupProtocol) {
	names := topics(t, env, 6, "in", "out")
	in, out := names[0], names[1]
	app := env.Name("queries")
	const keys = 24
	var keyNames []string
	for i := range keys {
		keyNames = append(keyNames, string(verdict.Key(i, keys)))
	}
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 50
	cfg.GroupProtocol = gp
	tally := newAnswers()
	stopQueries := make(chan struct{})
	var waits []func()
	start := func(id string) *Run {
		c := cfg
		c.InstanceID, c.StateDir = id, t.TempDir()
		// b leaves for good: a static member that stops without leaving
		// keeps its partitions until the broker's session timeout under
		// the consumer protocol.
		c.LeaveGroupOnClose = id == "b"
		r := Start(t, c, CountTopology(in, out, e))
		waits = append(waits, queryAll(t, id, r.R, keyNames, stopQueries, tally), rangeAll(t, id, r.R, keyNames, stopQueries, tally))
		return r
	}
	a := start("a")
	WaitAssigned(t, env, app, "a")
	produced := map[string]int64{}
	cl := env.Client(t)

	stop := produce(t, cl, in, keys, produced)
	a.WaitCommitted(t, 200, 60*time.Second)
	b := start("b") // records keep coming: values change while partitions move
	WaitAssigned(t, env, app, "b")
	b.WaitCommitted(t, 50, 60*time.Second)
	c := start("c")
	WaitAssigned(t, env, app, "c")
	c.WaitCommitted(t, 50, 60*time.Second)
	b.Stop()
	if err := b.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	a.WaitCommitted(t, a.R.Stats().RecordsIn+50, 60*time.Second)
	c.WaitCommitted(t, c.R.Stats().RecordsIn+50, 60*time.Second)
	stop()
	for _, k := range keyNames {
		Until(t, 60*time.Second, "key "+k+" reads its final count", func() bool {
			va, _, ea := queryCount(a.R, k)
			vc, _, ec := queryCount(c.R, k)
			return ea == nil && va == produced[k] || ec == nil && vc == produced[k]
		})
	}
	checkOwned(t, env, app, in, keyNames, map[string]*eos.Runner{"a": a.R, "c": c.R})
	close(stopQueries)
	for _, wait := range waits {
		wait()
	}

	tally.checkHistory(t)
	checkAnswers(t, env, out, topology.ChangelogTopic(app, "counts"), tally, produced, int(total(produced)))
}

// checkOwned waits for the group to settle on the instances of rs, and
// fails t unless each one's Locate then says owned exactly for the keys
// whose partitions the group assigned it.
func checkOwned(t *testing.T, env *kafkatest.Env, app, in string, keys []string, rs map[string]*eos.Runner) {
	t.Helper()
	cl := env.Client(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		why := ownedMismatch(cl, app, in, keys, rs)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s, Locate does not match the group's assignment: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ownedMismatch says how Locate on rs and the group's assignment differ,
// or that the group has not settled on rs; "" when they match.
func ownedMismatch(cl *kgo.Client, app, in string, keys []string, rs map[string]*eos.Runner) string {
	g, err := kafkautil.DescribeGroup(context.Background(), cl, app)
	if err != nil || g.State != "Stable" || len(g.Members) != len(rs) {
		return fmt.Sprintf("group not settled: %v %+v", err, g)
	}
	for id, r := range rs {
		m, ok := g.Member(id)
		if !ok {
			return "no member " + id
		}
		q, err := r.Query("counts")
		if err != nil {
			return err.Error()
		}
		for _, k := range keys {
			loc, err := q.Locate(context.Background(), []byte(k))
			if err != nil {
				return err.Error()
			}
			if want := slices.Contains(m.Assigned[in], loc.Partition); loc.Owned != want {
				return fmt.Sprintf("%s: key %s partition %d Locate owned %v, group assigned %v", id, k, loc.Partition, loc.Owned, m.Assigned)
			}
		}
	}
	return ""
}

// checkAnswers fails t unless the committed output shows, per key, the
// counts 1 to its final count in order, every value answered is among
// them, and both values and statuses were answered.
func checkAnswers(t *testing.T, env *kafkatest.Env, out, changelog string, tally *answers, produced map[string]int64, total int) {
	t.Helper()
	outs := map[string]int64{}
	for _, r := range Drain(t, env, out, total) {
		var c int64
		if err := json.Unmarshal(r.Value, &c); err != nil {
			t.Fatal(err)
		}
		if k := string(r.Key); c != outs[k]+1 {
			t.Fatalf("key %s: output %d after %d", k, c, outs[k])
		}
		outs[string(r.Key)] = c
	}
	last := map[string]int64{}
	for _, r := range Drain(t, env, changelog, len(produced)) {
		last[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
	}
	values := 0
	for k, vs := range tally.values {
		for _, v := range vs {
			if v < 1 || v > outs[k] || v > produced[k] {
				t.Fatalf("key %s: a query answered %d, which no committed output had (final %d, produced %d)", k, v, outs[k], produced[k])
			}
		}
		values += len(vs)
		if outs[k] != produced[k] || last[k] != produced[k] {
			t.Fatalf("key %s: output %d, changelog %d, produced %d", k, outs[k], last[k], produced[k])
		}
	}
	t.Logf("answers: %d values (%d from ranges), %d absent, statuses %v", values, tally.ranged, tally.absent, tally.status)
	if len(tally.unknown) > 0 {
		t.Fatalf("queries failed other than with a status: %v", tally.unknown)
	}
	if values == 0 || tally.ranged == 0 || tally.status["not owner"] == 0 || tally.status["stopped"] == 0 {
		t.Fatalf("want values, from ranges too, and not-owner and stopped answers: %d values (%d from ranges), statuses %v", values, tally.ranged, tally.status)
	}
}
