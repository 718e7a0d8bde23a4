package conformance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
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

// answers tallies what queries answered during a run.
type answers struct {
	mu      sync.Mutex
	values  map[string][]int64 // per key, every value answered, per querier in order
	absent  int
	status  map[string]int // per sentinel
	unknown []error
}

func (a *answers) note(key string, v int64, found bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err == nil && found:
		a.values[key] = append(a.values[key], v)
	case err == nil:
		a.absent++
	case errors.Is(err, eos.ErrNotOwner):
		a.status["not owner"]++
	case errors.Is(err, eos.ErrRestoring):
		a.status["restoring"]++
	case errors.Is(err, eos.ErrStopped):
		a.status["stopped"]++
	default:
		a.unknown = append(a.unknown, err)
	}
}

// queryAll queries every key of r over and over until stop closes, into
// a per-querier tally, and fails if a key's count ever goes down (or a
// counted key reads absent).
func queryAll(t *testing.T, r *eos.Runner, keys []string, stop <-chan struct{}, into *answers) func() {
	q, err := r.Query("counts")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := map[string]int64{}
		for {
			time.Sleep(time.Millisecond) // leave the pipeline some CPU
			for _, k := range keys {
				select {
				case <-stop:
					return
				default:
				}
				v, found, err := eos.GetAs(context.Background(), q, []byte(k), codec.Int64())
				into.note(k, v, found, err)
				if err == nil { // absent reads as 0: a key once counted never is
					if v < last[k] {
						t.Errorf("key %s: count went down from %d to %d (found %v)", k, last[k], v, found)
					}
					last[k] = v
				}
			}
		}
	}()
	return func() { <-done }
}

// QueriesDuringRebalance runs two instances counting while one joins and
// then leaves, and a goroutine per instance queries every key all along.
// Every value answered is one the committed output also shows (1 to the
// key's final count), never decreasing per instance (a counted key never
// reads absent again); the other answers say the partition is not owned
// there, restoring, or the instance stopped. Values, not-owner and
// stopped answers all occur, and in the end every key reads its final
// count.
func QueriesDuringRebalance(t *testing.T, env *kafkatest.Env, e state.Engine) {
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
	cfg.StateDir = t.TempDir()
	top := func() *topology.Topology { return CountTopology(in, out, e) }
	a := Start(t, cfg, top())
	WaitAssigned(t, env, app, "a")

	produced := map[string]int64{}
	stopProducing, producing := make(chan struct{}), make(chan struct{})
	cl := env.Client(t)
	go func() {
		defer close(producing)
		for i := 0; ; i++ {
			select {
			case <-stopProducing:
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

	tally := &answers{values: map[string][]int64{}, status: map[string]int{}}
	stopQueries := make(chan struct{})
	waitA := queryAll(t, a.R, keyNames, stopQueries, tally)
	a.WaitCommitted(t, 200, 60*time.Second)

	bcfg := cfg
	bcfg.InstanceID, bcfg.StateDir = "b", t.TempDir()
	b := Start(t, bcfg, top())
	waitB := queryAll(t, b.R, keyNames, stopQueries, tally)
	WaitAssigned(t, env, app, "b")
	b.WaitCommitted(t, 200, 60*time.Second)
	b.Stop()
	if err := b.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	base := a.R.Stats().RecordsIn
	a.WaitCommitted(t, base+200, 60*time.Second)
	close(stopProducing)
	<-producing
	var total int64
	for _, c := range produced {
		total += c
	}
	a.WaitCommitted(t, uint64(total)-b.R.Stats().RecordsIn, 60*time.Second)
	for _, k := range keyNames {
		Until(t, 30*time.Second, "key "+k+" reads its final count", func() bool {
			v, _, err := queryCount(a.R, k)
			return err == nil && v == produced[k]
		})
	}
	close(stopQueries)
	waitA()
	waitB()

	checkAnswers(t, env, out, topology.ChangelogTopic(app, "counts"), tally, produced, int(total))
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
	t.Logf("answers: %d values, %d absent, statuses %v", values, tally.absent, tally.status)
	if len(tally.unknown) > 0 {
		t.Fatalf("queries failed other than with a status: %v", tally.unknown)
	}
	if values == 0 || tally.status["not owner"] == 0 || tally.status["stopped"] == 0 {
		t.Fatalf("want values, not-owner and stopped answers: %d values, statuses %v", values, tally.status)
	}
}
