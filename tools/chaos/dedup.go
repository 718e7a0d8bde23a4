package chaos

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
)

// PipelineDedup is the article's dedup-store pattern (DedupPipeline): every
// record runs a side effect outside Kafka, an HINCRBY of its id in a Redis
// hash, behind topology.Dedup with a redisdedup.Store, then is upper-cased
// to the output like PipelineUpper. The output is judged record by record;
// the hash is judged id by id (DedupVerdict).
const PipelineDedup PipelineKind = "dedup"

// DedupMode says when PipelineDedup marks an id in its store, which decides
// what its effects risk.
type DedupMode string

const (
	// DedupAfter is topology.MarkAfter, Dedup's default: an effect is never
	// lost, but one is repeated when a worker dies between an effect and
	// its mark: at most one per SIGKILL. On the Redis store, which holds
	// leases, it claims as DedupBefore does, and the repeat waits for the
	// dead worker's lease.
	DedupAfter DedupMode = "after"
	// DedupBefore is topology.MarkBefore on the Redis store, which holds
	// leases: the mark is pending until the effect returned, and a worker
	// that dies between the two leaves it pending until its lease expires,
	// when the partition's new owner takes it over and runs the effect.
	// None is lost; one is repeated when the worker died after the effect
	// but before its mark was done: at most one per SIGKILL.
	DedupBefore DedupMode = "before"
	// DedupNone runs the effect with no Dedup node: the control, which
	// shows why the store is needed. Judged as DedupAfter, it must fail:
	// every aborted batch repeats its effects.
	DedupNone DedupMode = "none"
)

// dedupModes lists every DedupMode, for help and errors.
var dedupModes = []DedupMode{DedupAfter, DedupBefore, DedupNone}

// valid reports whether m names a mode.
func (m DedupMode) valid() bool {
	for _, k := range dedupModes {
		if m == k {
			return true
		}
	}
	return false
}

// EnvRedisURL is the environment variable the workers of PipelineDedup
// read the Redis URL from, so a password in it does not show in ps.
const EnvRedisURL = "EOS_REDIS_URL"

// effectTimeout bounds one effect, which runs to its end once started.
const effectTimeout = 5 * time.Second

// DedupPipeline is the sample topology of PipelineDedup: for every record
// of in, effect runs with the record's seeded id (verdict.ID) behind
// topology.Dedup in store, marking in mode (DedupNone: no Dedup node,
// effect runs for every record), and the value goes upper-cased to out,
// keeping the key. before runs ahead of each record; nil skips it. opts
// are the Dedup node's other options.
func DedupPipeline(in, out string, store dedup.Store, effect func(ctx context.Context, id string) error, mode DedupMode, before func(), opts ...topology.DedupOption) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("input"))
	paced := topology.Peek(src, "pace", func(context.Context, []byte, []byte) {
		if before != nil {
			before()
		}
	})
	id := func(r topology.Record[[]byte]) string {
		n, ok := verdict.ID(r.Value)
		if !ok {
			return ""
		}
		return strconv.Itoa(n)
	}
	run := func(ctx context.Context, r topology.Record[[]byte]) error { return effect(ctx, id(r)) }
	var effected topology.Stream[[]byte]
	switch mode {
	case DedupNone:
		effected = topology.MapValues(paced, "effect", func(ctx context.Context, v []byte) ([]byte, error) {
			return v, run(ctx, topology.Record[[]byte]{Value: v})
		})
	case DedupBefore:
		effected = topology.Dedup(paced, "dedup", id, store, run, append(opts, topology.MarkBefore())...)
	default:
		effected = topology.Dedup(paced, "dedup", id, store, run, append(opts, topology.MarkAfter())...)
	}
	up := topology.MapValues(effected, "upper", func(_ context.Context, v []byte) ([]byte, error) {
		return bytes.ToUpper(v), nil
	})
	topology.To(up, out, codec.Bytes(), topology.Named("output"))
	return top
}

// dedupTopology builds PipelineDedup for a worker: the store and the
// effect's client on the Redis at o.RedisURL. close releases both.
func (o WorkerOptions) dedupTopology(before func()) (top *topology.Topology, close func(), err error) {
	switch {
	case o.RedisURL == "":
		return nil, nil, fmt.Errorf("chaos: pipeline %s needs a Redis URL: give --redis-url or set %s", PipelineDedup, EnvRedisURL)
	case o.DedupPrefix == "" || o.EffectsKey == "":
		return nil, nil, fmt.Errorf("chaos: pipeline %s needs --dedup-prefix and --effects-key, which eosctl verify picks per run", PipelineDedup)
	case o.DedupMode != "" && !o.DedupMode.valid():
		return nil, nil, fmt.Errorf("chaos: dedup mode %q is not one of %v", o.DedupMode, dedupModes)
	}
	store, err := redisdedup.New(o.RedisURL, redisdedup.Prefix(o.DedupPrefix))
	if err != nil {
		return nil, nil, err
	}
	ro, err := redis.ParseURL(o.RedisURL)
	if err != nil {
		store.Close()
		return nil, nil, fmt.Errorf("chaos: the redis url does not parse; want redis://[user:password@]host:port/db")
	}
	ro.MaxRetries = -1 // a retried HINCRBY whose answer was lost would count twice
	cl := redis.NewClient(ro)
	effect := func(ctx context.Context, id string) error {
		// Once started, the effect runs to its end, as a payment call
		// does: a revoke or a shutdown does not undo it. Only a process
		// death can then come between the effect and its mark.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), effectTimeout)
		defer cancel()
		return cl.HIncrBy(ctx, o.EffectsKey, id, 1).Err()
	}
	return DedupPipeline(o.In, o.Out, store, effect, o.DedupMode, before, topology.DedupLease(workerDedupLease)), func() { store.Close(); cl.Close() }, nil
}

// workerDedupLease is how long a killed worker's claim holds the id it
// was running: the next owner of its partition waits that long before it
// runs the effect again. The workers are killed, never paused, so it is
// kept below the default (30 s) to keep a run short.
const workerDedupLease = 10 * time.Second

// ProblemEffectsMissing and ProblemEffectsRepeated are the checks of
// PipelineDedup's effects, named as in Result.Failed.
const (
	// ProblemEffectsMissing: seeded ids whose effect never ran, beyond
	// what the mode allows (mark-before: one per SIGKILL; otherwise none).
	ProblemEffectsMissing Problem = "effects_missing"
	// ProblemEffectsRepeated: effects that ran more than once, beyond
	// what the mode allows (mark-after and the control: one per SIGKILL;
	// mark-before: none).
	ProblemEffectsRepeated Problem = "effects_repeated"
	// ProblemEffectsUnknown: the effects hash counts ids that were never
	// seeded.
	ProblemEffectsUnknown Problem = "effects_unknown"
)

// DedupVerdict is the id-by-id judgement of PipelineDedup's effects hash:
// how many times each seeded id's effect ran.
type DedupVerdict struct {
	// DedupMode is when ids were marked: after, before, or none (the
	// control, with no Dedup node).
	DedupMode DedupMode `json:"dedup_mode"`
	// EffectsKey is the Redis hash the effects counted in; DedupPrefix
	// starts the store's keys.
	EffectsKey  string `json:"effects_key"`
	DedupPrefix string `json:"dedup_prefix"`
	// EffectsRun adds up every effect that ran.
	EffectsRun int64 `json:"effects_run"`
	// EffectsMissing counts the seeded ids whose effect never ran.
	EffectsMissing int `json:"effects_missing"`
	// EffectsRepeated counts the seeded ids whose effect ran more than
	// once; EffectsExtraRuns the runs beyond the first, over all ids.
	EffectsRepeated  int   `json:"effects_repeated"`
	EffectsExtraRuns int64 `json:"effects_extra_runs"`
	// EffectsUnknown counts fields of the hash that are no seeded id.
	EffectsUnknown int `json:"effects_unknown"`
	// EffectsBound is what the mode allows of its risk: mark-after (and
	// the control) may repeat at most this many runs, mark-before lose at
	// most this many effects. It is the run's SIGKILLs: a worker handles
	// a record's effect and mark before its next record, so a killed
	// worker stands between the two for at most one record.
	EffectsBound int `json:"effects_bound"`
	// Examples names a few missing or repeated ids.
	Examples []string `json:"effects_examples,omitempty"`
}

// String is the verdict on one line, for logs.
func (v DedupVerdict) String() string {
	return fmt.Sprintf("mark %s: %d effects run, %d ids missing, %d repeated (%d extra runs), %d unknown, bound %d",
		v.DedupMode, v.EffectsRun, v.EffectsMissing, v.EffectsRepeated, v.EffectsExtraRuns, v.EffectsUnknown, v.EffectsBound)
}

// dedupProblems names the effects checks r fails, through add.
func dedupProblems(r Result, add func(cond bool, name Problem, format string, a ...any)) {
	v := r.DedupVerdict
	if v == nil {
		return
	}
	// Both modes, with a store that leases, lose none and repeat at most
	// one effect per SIGKILL (see DedupBefore).
	lost, repeated := 0, int64(v.EffectsBound)
	mode := "mark " + string(v.DedupMode)
	if v.DedupMode == DedupNone {
		mode = "the control (no dedup store, judged as mark after)"
	}
	add(v.EffectsMissing > lost, ProblemEffectsMissing, "%d seeded ids never had their effect run; %s allows %d, one per SIGKILL (%v)",
		v.EffectsMissing, mode, lost, v.Examples)
	add(v.EffectsExtraRuns > repeated, ProblemEffectsRepeated, "%d effects ran again (%d ids more than once); %s allows %d, one per SIGKILL (%v)",
		v.EffectsExtraRuns, v.EffectsRepeated, mode, repeated, v.Examples)
	add(v.EffectsUnknown > 0, ProblemEffectsUnknown, "the effects hash %s counts %d ids that were never seeded", v.EffectsKey, v.EffectsUnknown)
}

// dedupRedis connects to the Redis of a PipelineDedup run and checks that
// it answers, before anything is seeded.
func dedupRedis(ctx context.Context, url string) (*redis.Client, error) {
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("chaos: the redis url does not parse (not repeated here: it may hold a password); want redis://[user:password@]host:port/db")
	}
	cl := redis.NewClient(ro)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := cl.Ping(pctx).Err(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("chaos: the Redis at %s does not answer (start one with integration/redis/redis.sh start): %w", ro.Addr, err)
	}
	return cl, nil
}

// judgeEffects reads the effects hash and counts each seeded id's runs.
func judgeEffects(ctx context.Context, cl *redis.Client, v *DedupVerdict, records int) error {
	runs, err := cl.HGetAll(ctx, v.EffectsKey).Result()
	if err != nil {
		return fmt.Errorf("chaos: reading the effects hash %s: %w", v.EffectsKey, err)
	}
	seen := make([]int64, records)
	for field, s := range runs {
		id, err1 := strconv.Atoi(field)
		n, err2 := strconv.ParseInt(s, 10, 64)
		if err1 != nil || err2 != nil || id < 0 || id >= records {
			v.EffectsUnknown++
			continue
		}
		seen[id] = n
		v.EffectsRun += n
	}
	for id, n := range seen {
		switch {
		case n == 0:
			v.EffectsMissing++
			if len(v.Examples) < 5 {
				v.Examples = append(v.Examples, fmt.Sprintf("id %d: no effect", id))
			}
		case n > 1:
			v.EffectsRepeated++
			v.EffectsExtraRuns += n - 1
			if len(v.Examples) < 5 {
				v.Examples = append(v.Examples, fmt.Sprintf("id %d: %d effects", id, n))
			}
		}
	}
	return nil
}

// dropDedupKeys removes a run's effects hash and its store's keys.
func dropDedupKeys(cl *redis.Client, v *DedupVerdict) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl.Del(ctx, v.EffectsKey)
	iter := cl.Scan(ctx, 0, v.DedupPrefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			cl.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		cl.Unlink(ctx, batch...)
	}
}
