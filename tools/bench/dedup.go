package bench

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/topology"
)

// Dedup stores of the dedup cases, by name (WorkerSpec.Dedup).
const (
	DedupMemory = "memory" // dedup.NewMemory
	DedupRedis  = "redis"  // redisdedup.New: SET key 1 NX PX ttl per id
	DedupBloom  = "bloom"  // redisdedup.NewBloom, sized for the run's ids
)

// DedupBloomRate is the false-positive rate the Bloom filter of the
// dedup-bloom case is sized for: about 1% of the run's ids are taken for
// repeats, and their (empty) effects skipped; every record still passes.
const DedupBloomRate = 0.01

// dedupRetention is how long the dedup cases keep ids: longer than any
// run, so that each record's id is new. The harness deletes a run's Redis
// keys after it; what an interrupted run leaves expires by itself.
const dedupRetention = time.Hour

// DedupTopology is Topology with a topology.Dedup node in front of the
// upper-casing: input → Dedup(store, an effect that does nothing) →
// MapValues(Upper) → output. The id is the value's "id=<n>", unique per
// input record, so that every record checks and marks a new id: against
// Topology, the difference is what the operator and its store cost.
func DedupTopology(input, output string, store dedup.Store, opts ...topology.DedupOption) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, input, codec.Bytes(), topology.Named("in"))
	once := topology.Dedup(in, "dedup", dedupID, store, func(context.Context, topology.Record[[]byte]) error { return nil }, opts...)
	up := topology.MapValues(once, "upper", func(_ context.Context, v []byte) ([]byte, error) { return Upper(v), nil })
	topology.To(up, output, codec.Bytes(), topology.Named("out"))
	return top
}

// dedupID is a record's message id: its value up to the first ';'
// ("id=<n>", see value).
func dedupID(r topology.Record[[]byte]) string {
	if i := bytes.IndexByte(r.Value, ';'); i > 0 {
		return string(r.Value[:i])
	}
	return string(r.Value)
}

// dedupStore is a worker's store for DedupTopology, with the options it
// needs and what releases it.
type dedupStore struct {
	dedup.Store
	opts  []topology.DedupOption
	close func()
}

// openDedupStore builds the store spec names and checks that a Redis
// answers, so that a wrong URL fails before the worker says it is ready.
func openDedupStore(ctx context.Context, spec WorkerSpec) (*dedupStore, error) {
	opts := []topology.DedupOption{topology.DedupRetention(dedupRetention)}
	if spec.Dedup == DedupMemory {
		m, err := dedup.NewMemory(dedup.MaxEntries(max(dedup.DefaultMaxEntries, spec.DedupEntries)))
		if err != nil {
			return nil, err
		}
		return &dedupStore{Store: m, opts: opts, close: func() {}}, nil
	}
	url := spec.RedisURL
	if url == "" {
		return nil, fmt.Errorf("bench worker: dedup store %s needs a Redis URL in %s", spec.Dedup, EnvRedisURL)
	}
	if spec.DedupName == "" {
		return nil, fmt.Errorf("bench worker: dedup store %s needs a name for the run's keys (dedup_name)", spec.Dedup)
	}
	prefix := redisdedup.Prefix(redisPrefix(spec.DedupName))
	var (
		store interface {
			dedup.Store
			Ping(context.Context) error
			Close() error
		}
		err error
	)
	switch spec.Dedup {
	case DedupRedis:
		store, err = redisdedup.New(url, prefix)
	case DedupBloom:
		store, err = redisdedup.NewBloom(url, "bloom", dedup.BloomOptions{
			Entries: int64(max(spec.DedupEntries, 1)), FalsePositiveRate: DedupBloomRate, Retention: dedupRetention,
		}, prefix)
		opts = append(opts, topology.AcceptFalsePositives())
	default:
		return nil, fmt.Errorf("bench worker: dedup store %q is not one of %s, %s, %s", spec.Dedup, DedupMemory, DedupRedis, DedupBloom)
	}
	if err != nil {
		return nil, fmt.Errorf("bench worker: dedup store %s: %w", spec.Dedup, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := store.Ping(pctx); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("bench worker: dedup store %s: %w; check --redis-url, or start one with integration/redis/redis.sh start", spec.Dedup, err)
	}
	return &dedupStore{Store: store, opts: opts, close: func() { _ = store.Close() }}, nil
}

// redisPrefix starts every Redis key of the run named name.
func redisPrefix(name string) string { return name + ":" }

// dropRedisKeys deletes the Redis keys of the run named name, so that
// runs leave nothing behind; a failure only leaves keys that expire.
func (h *harness) dropRedisKeys(name string) {
	opts, err := redis.ParseURL(h.o.RedisURL)
	if err != nil {
		return
	}
	cl := redis.NewClient(opts)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := cl.Scan(ctx, cursor, redisPrefix(name)+"*", 1000).Result()
		if err != nil {
			progressf(h.o.Progress, "deleting the Redis keys %s*: %v; they expire within %s", redisPrefix(name), err, 2*dedupRetention)
			return
		}
		if len(keys) > 0 {
			cl.Unlink(ctx, keys...)
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}
