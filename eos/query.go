package eos

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/store"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StoreQuery reads one state store of a running pipeline from outside it
// (an HTTP handler, a gRPC service): interactive queries. It reads only
// committed state, what batches whose transactions committed applied,
// never a batch still open, and only the tasks this Runner owns whose
// stores have caught up with their changelogs; for any other partition it
// answers with a *QueryError (ErrNotOwner, ErrRestoring, ErrStopped)
// rather than with data that may be stale: a revoke that franz-go's
// transact session swallowed stops reads when the client takes its new
// assignment, under the consumer protocol possibly a moment after the
// partition moved (docs/state.md, "The bound"). Safe for concurrent use
// while Run runs; with workers > 1 each key is read from the worker that
// owns its partition.
type StoreQuery struct {
	r    *Runner
	spec graph.Store
}

// KeyLocation is where a key of a store lives: the partition of the
// store's source topic the key maps to, whether this Runner owns it, and
// which instance the group said holds it.
type KeyLocation struct {
	Topic     string
	Partition int32
	// Owned reports whether this Runner (one of its workers) is assigned
	// the partition now, while Run runs; its store may still be restoring.
	Owned bool
	// Worker is the index of the worker that owns it (0 with one
	// worker), -1 when not Owned.
	Worker int
	// Instance is the instance_id of the instance whose member the
	// group, as this Runner last described it (at its last new
	// generation), listed as holding the partition; "" when it was not
	// described yet or no member held it (a rebalance moving it). It is
	// a hint for routing a query: that instance answers for itself.
	Instance string
}

// QueryEntry is one key of a store and its committed value, with the
// partition whose task holds it.
type QueryEntry struct {
	Key       []byte
	Value     []byte
	Partition int32
}

// Query returns a read-only view of the store called name, for reads
// from any goroutine while Run runs. The store must be declared by the
// topology (AddStore, or an aggregation's or join's own store); otherwise
// the error wraps ErrUnknownStore and lists the stores there are.
func (r *Runner) Query(name string) (*StoreQuery, error) {
	var names []string
	for _, w := range r.queried() {
		if w.state == nil {
			continue
		}
		for _, s := range w.state.specs {
			if s.Name == name {
				return &StoreQuery{r: r, spec: s}, nil
			}
			names = append(names, s.Name)
		}
		break
	}
	return nil, fmt.Errorf("%w %q; the topology's stores: [%s]", ErrUnknownStore, name, strings.Join(names, ", "))
}

// Name is the store's name.
func (q *StoreQuery) Name() string { return q.spec.Name }

// isRunning reports whether Run runs (for workers, any worker's).
func (r *Runner) isRunning() bool {
	for _, w := range r.queried() {
		if w.health.running.Load() {
			return true
		}
	}
	return false
}

// queried is the Runners whose stores a query reads: the workers, or r.
func (r *Runner) queried() []*Runner {
	if r.workers != nil {
		return r.workers.runners
	}
	return []*Runner{r}
}

// Locate returns the partition key maps to, by the partitioner records
// keyed like it are given (Kafka's murmur2 of the key, as the Java client
// and franz-go compute it; the runtime partitions repartition topics so),
// whether this Runner owns it, and which instance holds it. It asks the
// brokers for the source topic's partition count at most once a minute,
// and after they failed to answer at most every 5 seconds.
// A store whose keys are not its input records' keys (a windowed store, a
// Process node's own keys) has no such mapping: read it with Range
// instead.
func (q *StoreQuery) Locate(ctx context.Context, key []byte) (KeyLocation, error) {
	n, err := q.r.queryParts.count(ctx, q.r.queried(), q.spec.Source)
	if errors.Is(err, ErrStopped) {
		// Running but not connected yet is starting: as good as restoring.
		return KeyLocation{}, q.status(-1, q.r.isRunning(), ErrRestoring)
	}
	if err != nil {
		return KeyLocation{}, err
	}
	if key == nil {
		key = []byte{} // a nil key would be spread, not hashed
	}
	// defaultPartitioner's hash for a keyed record, without its stickiness.
	p := int32(kgo.StickyKeyPartitioner(nil).ForTopic(q.spec.Source).Partition(&kgo.Record{Key: key}, int(n)))
	loc := KeyLocation{Topic: q.spec.Source, Partition: p, Worker: -1}
	t := state.Task{Topic: q.spec.Source, Partition: p}
	for i, w := range q.r.queried() {
		if w.state == nil || !w.health.running.Load() {
			continue
		}
		if loc.Instance == "" {
			// A worker's group.instance.id is its process's instance_id
			// with a suffix that instance_id never contains.
			loc.Instance, _, _ = strings.Cut(w.state.holder(t), config.WorkerSeparator)
		}
		if !loc.Owned && w.state.owns(t) {
			loc.Owned, loc.Worker = true, i
		}
	}
	if loc.Owned {
		loc.Instance = q.r.cfg.InstanceID
	}
	return loc, nil
}

// Get returns key's committed value, and whether key exists, from the
// task its partition maps to (see Locate). When this Runner cannot answer
// for that partition the error is a *QueryError.
func (q *StoreQuery) Get(ctx context.Context, key []byte) (value []byte, found bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	loc, err := q.Locate(ctx, key)
	if err != nil {
		return nil, false, err
	}
	return q.getAt(loc, key)
}

// getAt is Get of key, located at loc.
func (q *StoreQuery) getAt(loc KeyLocation, key []byte) (value []byte, found bool, err error) {
	err = q.read(state.Task{Topic: loc.Topic, Partition: loc.Partition}, func(s *store.Store) error {
		value, found, err = s.CommittedGet(key)
		return err
	})
	return value, found, err
}

// read calls fn with the store of task t from the worker that serves it,
// or returns why none can.
func (q *StoreQuery) read(t state.Task, fn func(*store.Store) error) error {
	running := false
	var restoring error
	for _, w := range q.r.queried() {
		if w.state == nil || !w.health.running.Load() {
			continue
		}
		running = true
		err := w.state.serve.read(q.spec.Name, t, fn)
		if !errors.Is(err, errNotServing) {
			return err
		}
		if restoring == nil {
			restoring = w.state.restoring(t)
		}
	}
	return q.status(t.Partition, running, restoring)
}

// status is the *QueryError for a partition no worker could read:
// restoring is why an owner could not (nil: none owns it).
func (q *StoreQuery) status(p int32, running bool, restoring error) error {
	why := ErrNotOwner
	switch {
	case !running:
		why = ErrStopped
	case restoring != nil:
		why = restoring
	}
	return &QueryError{Store: q.spec.Name, Topic: q.spec.Source, Partition: p, Err: why}
}

// Range yields the committed entries with keys in [from, to) (nil from:
// from the first key; nil to: to the last) of every partition this Runner
// owns, partition by partition in ascending order, in key order within
// each. If an owned partition is still restoring, nothing is yielded but
// a *QueryError (ErrRestoring); if one moves away while it is read, the
// iteration ends with a *QueryError (ErrNotOwner). The entries of one
// partition are read in pieces: each was committed, but a batch that
// commits while the range is read may show in later pieces only. An
// error is yielded once, last.
func (q *StoreQuery) Range(ctx context.Context, from, to []byte) iter.Seq2[QueryEntry, error] {
	return func(yield func(QueryEntry, error) bool) {
		tasks, err := q.tasks()
		if err != nil {
			yield(QueryEntry{}, err)
			return
		}
		for _, t := range tasks {
			if !q.rangeTask(ctx, t, from, to, yield) {
				return
			}
		}
	}
}

// Prefix yields the committed entries whose keys start with prefix, like
// Range.
func (q *StoreQuery) Prefix(ctx context.Context, prefix []byte) iter.Seq2[QueryEntry, error] {
	return q.Range(ctx, prefix, prefixEnd(prefix))
}

// prefixEnd is the first key after every key that starts with p, or nil
// when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// tasks lists, by partition, the tasks a Range reads: every task of the
// store's source topic owned here, all of them served.
func (q *StoreQuery) tasks() ([]state.Task, error) {
	running := false
	var out []state.Task
	for _, w := range q.r.queried() {
		if w.state == nil || !w.health.running.Load() {
			continue
		}
		running = true
		served := w.state.serve.served(q.spec.Source)
		for _, t := range w.state.ownedTasks(q.spec.Source) {
			if !slices.Contains(served, t) {
				return nil, q.status(t.Partition, true, w.state.restoring(t))
			}
		}
		out = append(out, served...)
	}
	if !running {
		return nil, q.status(-1, false, nil)
	}
	slices.SortFunc(out, func(a, b state.Task) int { return int(a.Partition - b.Partition) })
	return out, nil
}

// rangePiece is how many entries a Range reads under the serving lock
// at a time, so that a slow consumer never holds up a revoke.
const rangePiece = 256

// rangeTask yields task t's entries in [from, to); false when the
// iteration is over (the consumer stopped, or an error was yielded).
func (q *StoreQuery) rangeTask(ctx context.Context, t state.Task, from, to []byte, yield func(QueryEntry, error) bool) bool {
	cursor := from
	for {
		var piece []QueryEntry
		var last []byte
		err := q.read(t, func(s *store.Store) error {
			var err error
			last, err = s.CommittedRange(cursor, to, rangePiece, func(k, v []byte) bool {
				piece = append(piece, QueryEntry{Key: k, Value: v, Partition: t.Partition})
				return true
			})
			return err
		})
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			yield(QueryEntry{}, err)
			return false
		}
		for _, e := range piece {
			if !yield(e, nil) {
				return false
			}
		}
		if len(piece) < rangePiece {
			return true
		}
		cursor = keyAfter(last)
	}
}

// keyAfter is the first key after k, in an array of its own.
func keyAfter(k []byte) []byte {
	return append(slices.Clip(k), 0)
}

// GetAs is StoreQuery.Get with the value decoded by c, the codec the
// store's values were written with (codec.Int64() for Count's store).
func GetAs[V any](ctx context.Context, q *StoreQuery, key []byte, c codec.Codec[V]) (V, bool, error) {
	var zero V
	b, ok, err := q.Get(ctx, key)
	if err != nil || !ok {
		return zero, ok, err
	}
	v, err := c.Decode(b)
	if err != nil {
		return zero, false, fmt.Errorf("store %q: decoding the value of key %q: %w", q.spec.Name, key, err)
	}
	return v, true, nil
}
