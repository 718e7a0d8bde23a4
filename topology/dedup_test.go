package topology_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// flakyStore is a Memory store whose calls fail while down is set.
type flakyStore struct {
	*dedup.Memory
	mu    sync.Mutex
	down  int // fail this many more calls; -1: every call
	calls []string
	// failOp fails the next calls of an operation: this many.
	failOp map[string]int
}

var errStoreDown = errors.New("store down")

func (f *flakyStore) fail(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op)
	if f.failOp[op] > 0 {
		f.failOp[op]--
		return errStoreDown
	}
	if f.down == 0 {
		return nil
	}
	if f.down > 0 {
		f.down--
	}
	return errStoreDown
}

func (f *flakyStore) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := f.fail("mark"); err != nil {
		return false, err
	}
	return f.Memory.Mark(ctx, id, ttl)
}

func (f *flakyStore) Seen(ctx context.Context, id string) (bool, error) {
	if err := f.fail("seen"); err != nil {
		return false, err
	}
	return f.Memory.Seen(ctx, id)
}

func (f *flakyStore) Claim(ctx context.Context, id, owner string, d, ttl time.Duration) (dedup.Claim, error) {
	if err := f.fail("claim"); err != nil {
		return dedup.Claim{}, err
	}
	return f.Memory.Claim(ctx, id, owner, d, ttl)
}

func (f *flakyStore) Complete(ctx context.Context, id string, ttl time.Duration) error {
	if err := f.fail("complete"); err != nil {
		return err
	}
	return f.Memory.Complete(ctx, id, ttl)
}

func (f *flakyStore) Release(ctx context.Context, id, owner string) error {
	if err := f.fail("release"); err != nil {
		return err
	}
	return f.Memory.Release(ctx, id, owner)
}

func (f *flakyStore) Forget(ctx context.Context, id string) error {
	if err := f.fail("forget"); err != nil {
		return err
	}
	return f.Memory.Forget(ctx, id)
}

func newFlaky(t *testing.T) *flakyStore {
	m, err := dedup.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	return &flakyStore{Memory: m}
}

// effects records each call of the effect node, and fails or panics on
// demand.
type effects struct {
	mu    sync.Mutex
	ran   []string
	fail  map[string]int // fail the effect for this id this many more times
	panic map[string]int
}

func (e *effects) run(_ context.Context, r topology.Record[string]) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := r.Value
	if e.panic[v] > 0 {
		e.panic[v]--
		panic("effect panicked")
	}
	if e.fail[v] > 0 {
		e.fail[v]--
		return errors.New("effect failed")
	}
	e.ran = append(e.ran, v)
	return nil
}

func byValue(r topology.Record[string]) string { return r.Value }

// dedupTop is in → Dedup (id = value, the effect) → out.
func dedupTop(store dedup.Store, fx *effects, opts ...topology.DedupOption) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	once := topology.Dedup(in, "once", byValue, store, fx.run, opts...)
	topology.To(once, "out", codec.String())
	return top
}

// mode is a Dedup mode, on a store that holds leases or one that does
// not (plain): the two take different paths.
type mode struct {
	name  string
	opt   topology.DedupOption
	plain bool
}

// store is f, or f without its leases.
func (m mode) store(f *flakyStore) dedup.Store {
	if m.plain {
		return plainStore{f}
	}
	return f
}

var modes = []mode{
	{"MarkBefore", topology.MarkBefore(), false}, {"MarkAfter", topology.MarkAfter(), false},
	{"MarkBefore/plain", topology.MarkBefore(), true}, {"MarkAfter/plain", topology.MarkAfter(), true},
}

// Both modes run the effect once per id, and pass every record on: a
// repeated id and the records of an aborted batch (the store's marks are not
// part of it) are written out again, the effect is not run again.
func TestDedupRunsEffectOncePerID(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			fx := &effects{}
			r := newRig(t, dedupTop(m.store(newFlaky(t)), fx, m.opt))
			var outs []string
			for _, v := range []string{"a", "b", "a", "c", "b"} {
				outs = append(outs, r.must("in", 0, "", v)...)
			}
			r.abort() // the batch is redone after an abort: the effects must not be
			for _, v := range []string{"a", "b", "c"} {
				outs = append(outs, r.must("in", 0, "", v)...)
			}
			if want := []string{"a", "b", "c"}; !slices.Equal(fx.ran, want) {
				t.Errorf("effects ran for %v, want %v once each", fx.ran, want)
			}
			if want := []string{"out:=a", "out:=b", "out:=a", "out:=c", "out:=b", "out:=a", "out:=b", "out:=c"}; !slices.Equal(outs, want) {
				t.Errorf("outputs %v, want %v: every record passes Dedup", outs, want)
			}
		})
	}
}

// A failed or panicking effect leaves its id unmarked in both modes (mark
// before forgets its mark), so the redelivery runs it.
func TestDedupFailedEffectRunsAgain(t *testing.T) {
	for _, m := range modes {
		for _, how := range []string{"error", "panic"} {
			t.Run(m.name+"/"+how, func(t *testing.T) {
				fx := &effects{fail: map[string]int{}, panic: map[string]int{}}
				if how == "error" {
					fx.fail["a"] = 1
				} else {
					fx.panic["a"] = 1
				}
				store := newFlaky(t)
				r := newRig(t, dedupTop(m.store(store), fx, m.opt))
				got, _, err := r.send("in", 0, "", "a")
				if got != engine.Failed || err == nil {
					t.Fatalf("failing effect: outcome %v, error %v; want Failed under the default policy", got, err)
				}
				if seen, _ := store.Seen(context.Background(), "a"); seen {
					t.Fatal(`id "a" is marked after its effect failed; its redelivery would be dropped`)
				}
				r.abort()
				r.must("in", 0, "", "a")
				r.must("in", 0, "", "a")
				if want := []string{"a"}; !slices.Equal(fx.ran, want) {
					t.Errorf("effects ran for %v, want %v", fx.ran, want)
				}
			})
		}
	}
}

// The order of store calls is the mode's, and the store's: with a store
// that holds leases both modes claim first (a pending mark, so no two
// owners of a partition run the effect at once) and complete the mark
// after the effect; with one that does not, mark before marks first, and
// mark after asks Seen, runs the effect, then marks.
func TestDedupModesCallTheStoreInTheirOrder(t *testing.T) {
	for _, c := range []struct {
		name   string
		opt    topology.DedupOption
		leases bool
		want   []string
	}{
		{"MarkBefore/leases", topology.MarkBefore(), true, []string{"claim", "complete", "claim"}},
		{"MarkAfter/leases", topology.MarkAfter(), true, []string{"claim", "complete", "claim"}},
		{"MarkBefore/plain", topology.MarkBefore(), false, []string{"mark", "mark"}},
		{"MarkAfter/plain", topology.MarkAfter(), false, []string{"seen", "mark", "seen"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newFlaky(t)
			var s dedup.Store = store
			if !c.leases {
				s = plainStore{store}
			}
			fx := &effects{}
			r := newRig(t, dedupTop(s, fx, c.opt))
			r.must("in", 0, "", "a")
			r.must("in", 0, "", "a")
			if !slices.Equal(store.calls, c.want) {
				t.Errorf("store calls %v, want %v", store.calls, c.want)
			}
			if want := []string{"a"}; !slices.Equal(fx.ran, want) {
				t.Errorf("effects ran for %v, want %v", fx.ran, want)
			}
		})
	}
}

// plainStore is a store without leases: Mark, Seen and Forget only.
type plainStore struct{ f *flakyStore }

func (p plainStore) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	return p.f.Mark(ctx, id, ttl)
}
func (p plainStore) Seen(ctx context.Context, id string) (bool, error) { return p.f.Seen(ctx, id) }
func (p plainStore) Forget(ctx context.Context, id string) error       { return p.f.Forget(ctx, id) }

// Failing open, a store that is down lets records through (a duplicate
// effect is the risk) and onErr hears of it; failing closed, the record
// fails under the node's policy, and a Retry policy rides out a short
// outage.
func TestDedupStoreDown(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name+"/FailOpen", func(t *testing.T) {
			store := newFlaky(t)
			store.down = -1
			fx := &effects{}
			var reported []string
			r := newRig(t, dedupTop(m.store(store), fx, m.opt, topology.FailOpen(func(_ context.Context, id string, err error) {
				if !errors.Is(err, errStoreDown) {
					t.Errorf("onErr got %v, want the store's error", err)
				}
				reported = append(reported, id)
			})))
			var outs []string
			for _, v := range []string{"a", "b", "a"} {
				outs = append(outs, r.must("in", 0, "", v)...)
			}
			// Failing open runs each effect without the store; an id
			// whose effect ran here is known to this engine, which does
			// not run it again.
			if want := []string{"a", "b"}; !slices.Equal(fx.ran, want) {
				t.Errorf("effects ran for %v, want %v: failing open runs the effects, and this engine knows which ran", fx.ran, want)
			}
			if want := []string{"out:=a", "out:=b", "out:=a"}; !slices.Equal(outs, want) {
				t.Errorf("outputs %v, want %v: failing open lets every record through", outs, want)
			}
			if len(reported) == 0 {
				t.Error("onErr was never called")
			}
		})
		t.Run(m.name+"/FailClosed", func(t *testing.T) {
			store := newFlaky(t)
			store.down = -1
			fx := &effects{}
			r := newRig(t, dedupTop(m.store(store), fx, m.opt, topology.FailClosed()))
			got, _, err := r.send("in", 0, "", "a")
			if got != engine.Failed || !errors.Is(err, errStoreDown) {
				t.Fatalf("outcome %v, error %v; want Failed wrapping the store's error", got, err)
			}
			var ne *topology.NodeError
			if !errors.As(err, &ne) || ne.Node != "once" {
				t.Errorf("error %v does not name the Dedup node", err)
			}
			if len(fx.ran) != 0 {
				t.Errorf("effects ran for %v while the store was down, failing closed", fx.ran)
			}
		})
		t.Run(m.name+"/FailClosedRetry", func(t *testing.T) {
			store := newFlaky(t)
			store.down = 2
			fx := &effects{}
			top := dedupTop(m.store(store), fx, m.opt, topology.FailClosed())
			top.OnError("once", topology.Retry(3, time.Millisecond, topology.Fail()))
			r := newRig(t, top)
			r.must("in", 0, "", "a")
			r.must("in", 0, "", "a")
			if want := []string{"a"}; !slices.Equal(fx.ran, want) {
				t.Errorf("effects ran for %v, want %v", fx.ran, want)
			}
		})
	}
}

// An effect that ran while the store did not take the mark after it (a
// failed completion with leases, a failed mark after): failing closed,
// the record fails and is redone; failing open, it goes on, and an abort
// redoes it. Either way the redo on this engine marks the id again and
// does not run the effect a second time (a paused store did that).
func TestDedupEffectWhoseMarkFailedIsNotRunAgain(t *testing.T) {
	for _, m := range []struct {
		mode
		after string // the store call after the effect
	}{{modes[0], "complete"}, {modes[1], "complete"}, {modes[3], "mark"}} {
		for _, closed := range []bool{true, false} {
			name := m.name + "/FailOpen"
			opt := topology.FailOpen(func(context.Context, string, error) {})
			if closed {
				name, opt = m.name+"/FailClosed", topology.FailClosed()
			}
			t.Run(name, func(t *testing.T) {
				store := newFlaky(t)
				store.failOp = map[string]int{m.after: 1}
				fx := &effects{}
				r := newRig(t, dedupTop(m.store(store), fx, m.opt, opt))
				got, _, err := r.send("in", 0, "", "a")
				if closed && (got != engine.Failed || !errors.Is(err, errStoreDown)) {
					t.Fatalf("outcome %v, error %v; want Failed with the store's error", got, err)
				}
				if store.failOp[m.after] != 0 {
					t.Fatalf("the %s call after the effect never failed: the fault did not fire", m.after)
				}
				r.abort()
				r.must("in", 0, "", "a")
				r.must("in", 0, "", "a")
				if want := []string{"a"}; !slices.Equal(fx.ran, want) {
					t.Errorf("effects ran for %v, want %v: the redo ran the effect again", fx.ran, want)
				}
				if seen, _ := store.Memory.Seen(context.Background(), "a"); !seen {
					t.Error(`id "a" is not marked after the redo`)
				}
			})
		}
	}
}

func TestDedupEmptyIDGoesToThePolicy(t *testing.T) {
	fx := &effects{}
	top := dedupTop(newFlaky(t), fx)
	top.OnError("once", topology.Skip())
	r := newRig(t, top)
	got, out, err := r.send("in", 0, "", "")
	if got != engine.Skipped || err != nil || len(out) != 0 {
		t.Fatalf("empty id under Skip: outcome %v, outputs %v, error %v; want Skipped", got, out, err)
	}
	top = dedupTop(newFlaky(t), fx)
	r = newRig(t, top)
	if _, _, err := r.send("in", 0, "", ""); !errors.Is(err, topology.ErrEmptyDedupID) {
		t.Fatalf("empty id under Fail: error %v, want ErrEmptyDedupID", err)
	}
}

func TestDedupValidateAndDescribe(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	fx := &effects{}
	d := topology.Dedup(in, "no-store", byValue, nil, fx.run)
	d = topology.Dedup(d, "no-id", nil, newFlaky(t), fx.run)
	d = topology.Dedup(d, "no-effect", byValue, newFlaky(t), nil)
	d = topology.Dedup(d, "no-retention", byValue, newFlaky(t), fx.run, topology.DedupRetention(0))
	topology.To(d, "out", codec.String())
	err := top.Validate()
	for _, want := range []string{`"no-store": Dedup has no store`, `"no-id": Dedup has a nil function`, `"no-effect": Dedup has a nil function`, `"no-retention": Dedup retention 0s is below 1ms`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to contain %q", err, want)
		}
	}

	desc := dedupTop(newFlaky(t), fx, topology.MarkBefore(), topology.DedupRetention(8*time.Hour), topology.FailClosed()).Describe()
	if want := "Processor: once (Dedup, mark before, retention 8h0m0s, fail closed)"; !strings.Contains(desc, want) {
		t.Errorf("Describe() =\n%s\nwant a line with %q", desc, want)
	}
	desc = dedupTop(newFlaky(t), fx).Describe()
	if want := "Processor: once (Dedup, mark after, retention 24h0m0s, fail open)"; !strings.Contains(desc, want) {
		t.Errorf("Describe() =\n%s\nwant a line with %q (the defaults)", desc, want)
	}
}

// A Dedup node retries up to three calls per record (store check, effect,
// mark), so CheckRetryTime counts its policy's waits three times.
func TestDedupRetryTimeCountsEveryRetriedCall(t *testing.T) {
	top := dedupTop(newFlaky(t), &effects{})
	top.OnError("once", topology.Retry(3, time.Second, topology.Fail())) // 1s+2s per call, 9s per record
	err := top.CheckRetryTime(8 * time.Second)
	if !errors.Is(err, topology.ErrRetryTooLong) || !strings.Contains(err.Error(), "9s") {
		t.Errorf("CheckRetryTime(8s) = %v; want the node reported with 9s (3 calls × 3s)", err)
	}
	if err := top.CheckRetryTime(10 * time.Second); err != nil {
		t.Errorf("CheckRetryTime(10s) = %v; want nil", err)
	}
}

// ctxStore is a store without leases that refuses calls whose context
// ended, as a network store would: mark after checks and marks.
type ctxStore struct{ dedup.Store }

func (s ctxStore) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return s.Store.Mark(ctx, id, ttl)
}

// Mark after: an effect that succeeded is marked even when the record's
// context ends meanwhile (a revoke or a shutdown), so the redo of the
// record does not run it again.
func TestDedupMarkAfterSurvivesTheRecordContextEnding(t *testing.T) {
	m, err := dedup.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := 0
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	once := topology.Dedup(in, "once", byValue, ctxStore{m}, func(context.Context, topology.Record[string]) error {
		ran++
		cancel() // the partition is revoked as the effect returns
		return nil
	})
	topology.To(once, "out", codec.String())
	r := newRig(t, top)
	if _, err := r.e.Process(ctx, &kgo.Record{Topic: "in", Value: []byte("a")}, func(*kgo.Record) {}); err != nil {
		t.Logf("process: %v", err)
	}
	if seen, _ := m.Seen(context.Background(), "a"); !seen || ran != 1 {
		t.Fatalf("effect ran %d times, id marked %v: an effect that happened must be marked, or its redo repeats it", ran, seen)
	}
}

// bloomLike is a Memory store that says it is approximate and keeps ids for
// a fixed retention, as redisdedup.Bloom does.
type bloomLike struct {
	dedup.Store // without leases, as a Bloom filter
	rate        float64
	retention   time.Duration
}

func (b bloomLike) FalsePositiveRate() float64 { return b.rate }
func (b bloomLike) Retention() time.Duration   { return b.retention }

func newBloomLike(t *testing.T, rate float64) bloomLike {
	m, err := dedup.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	return bloomLike{Store: m, rate: rate, retention: 48 * time.Hour}
}

// An approximate store loses the effects of its false positives: Validate
// refuses it unless AcceptFalsePositives says that is acceptable, always
// refuses it with MarkBefore (it cannot forget a failed effect's mark), and
// Describe states the rate.
func TestDedupApproximateStoreNeedsConsent(t *testing.T) {
	fx := &effects{}
	for _, c := range []struct {
		name    string
		rate    float64
		opts    []topology.DedupOption
		want    []string // in Validate's error; none: valid
		wantNot []string
	}{
		{"silent", 0.01, nil, []string{
			`"once": Dedup store is a Bloom filter: about 1 in 100 new ids looks already seen and its effect is skipped; pass topology.AcceptFalsePositives() if losing those effects is acceptable, or use an exact store (redisdedup.New, pgdedup.New)`,
		}, []string{"MarkBefore"}},
		{"silent at 0.1%", 0.001, nil, []string{"about 1 in 1000 new ids"}, nil},
		{"mark before", 0.01, []topology.DedupOption{topology.AcceptFalsePositives(), topology.MarkBefore()}, []string{
			`"once": Dedup with MarkBefore needs a store that can forget the mark of a failed effect, and a Bloom filter cannot`,
		}, []string{"AcceptFalsePositives"}},
		{"mark before, silent", 0.01, []topology.DedupOption{topology.MarkBefore()}, []string{"AcceptFalsePositives()", "MarkBefore"}, nil},
		{"accepted", 0.01, []topology.DedupOption{topology.AcceptFalsePositives()}, nil, nil},
		{"retention beyond the store's", 0.01, []topology.DedupOption{topology.AcceptFalsePositives(), topology.DedupRetention(72 * time.Hour)}, []string{
			`"once": Dedup retention 72h0m0s is longer than the store's 48h0m0s, and every Mark would fail; pass topology.DedupRetention(48h0m0s)`,
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := dedupTop(newBloomLike(t, c.rate), fx, c.opts...).Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error saying %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant no mention of %q", err, w)
				}
			}
		})
	}

	desc := dedupTop(newBloomLike(t, 0.01), fx, topology.AcceptFalsePositives(), topology.DedupRetention(time.Hour)).Describe()
	if want := "Processor: once (Dedup, mark after, retention 1h0m0s, fail open, Bloom filter: false positives skip about 1% of new ids)"; !strings.Contains(desc, want) {
		t.Errorf("Describe() =\n%s\nwant a line with %q", desc, want)
	}
	desc = dedupTop(newBloomLike(t, 0.0025), fx, topology.AcceptFalsePositives()).Describe()
	if want := "false positives skip about 0.25% of new ids"; !strings.Contains(desc, want) {
		t.Errorf("Describe() =\n%s\nwant a line with %q", desc, want)
	}
	// An exact store is described as before and needs no consent.
	if err := dedupTop(newFlaky(t), fx).Validate(); err != nil {
		t.Errorf("Validate() with an exact store = %v", err)
	}
}

// An accepted approximate store runs under MarkAfter like any other: one
// effect per id, every record passed on.
func TestDedupApproximateStoreRunsEffectOncePerID(t *testing.T) {
	fx := &effects{}
	r := newRig(t, dedupTop(newBloomLike(t, 0.01), fx, topology.AcceptFalsePositives()))
	for _, v := range []string{"a", "b", "a"} {
		r.must("in", 0, "", v)
	}
	if want := []string{"a", "b"}; !slices.Equal(fx.ran, want) {
		t.Errorf("effects ran for %v, want %v", fx.ran, want)
	}
}

// MarkBefore never skips an effect whose mark is only pending for another
// instance (its effect may still fail there): it waits, and once that
// lease expired it takes the mark over and runs the effect, once; an id
// another instance completed is skipped.
func TestDedupMarkBeforeWaitsForPendingMark(t *testing.T) {
	store := newFlaky(t)
	ctx := context.Background()
	if c, err := store.Memory.Claim(ctx, "a", "other-instance", 200*time.Millisecond, time.Minute); err != nil || c.State != dedup.Claimed {
		t.Fatalf("claim by the other instance: %+v, %v", c, err)
	}
	if c, err := store.Memory.Claim(ctx, "b", "other-instance", time.Minute, time.Minute); err != nil || c.State != dedup.Claimed {
		t.Fatalf("claim by the other instance: %+v, %v", c, err)
	}
	if err := store.Memory.Complete(ctx, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	fx := &effects{}
	r := newRig(t, dedupTop(store, fx, topology.MarkBefore()))
	r.must("in", 0, "", "a")
	r.must("in", 0, "", "b")
	r.must("in", 0, "", "a")
	if want := []string{"a"}; !slices.Equal(fx.ran, want) {
		t.Fatalf("effects ran for %v, want %v: a pending mark whose lease expired is taken over, a done one skipped", fx.ran, want)
	}
	if n := slices.Index(store.calls, "complete"); n < 0 {
		t.Fatalf("store calls %v: the taken-over mark was never completed", store.calls)
	}
}
