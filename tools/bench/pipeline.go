package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Upper is the benchmark's transform, the same in every case (Kafka Streams
// included): ASCII upper-case of the value into a new slice, every byte
// outside 'a'..'z' copied unchanged. A nil value stays nil.
func Upper(v []byte) []byte {
	if v == nil {
		return nil
	}
	out := make([]byte, len(v))
	for i, c := range v {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// Topology is the framework side of the benchmark: input → MapValues(Upper)
// → output, bytes in and out.
func Topology(input, output string) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, input, codec.Bytes(), topology.Named("in"))
	up := topology.MapValues(in, "upper", func(_ context.Context, v []byte) ([]byte, error) { return Upper(v), nil })
	topology.To(up, output, codec.Bytes(), topology.Named("out"))
	return top
}

// NewRunner builds the framework pipeline for cfg (whose Guarantee,
// CommitInterval and MaxBatchRecords the caller has set).
func NewRunner(cfg config.Config, input, output string, opts ...eos.Option) (*eos.Runner, error) {
	return eos.New(cfg, Topology(input, output), opts...)
}

// RawOptions are the client options of the hand-written loop: those
// eos.Runner uses under exactly-once, from the same builder, so that only
// the code differs.
func RawOptions(cfg config.Config, input string) ([]kgo.Opt, error) {
	cfg.Guarantee = config.ExactlyOnce
	return kafkautil.PipelineOptions(cfg, []string{input})
}

// RunRaw is the baseline the framework is measured against: a hand-written
// franz-go GroupTransactSession loop doing the same transform with the same
// batching as eos.Runner under exactly-once (poll, Begin, keep polling and
// producing until CommitInterval has passed or MaxBatchRecords are in,
// then End with TryCommit; polls shrink to a quarter of the interval's
// worth of records when the transform is slow). beforeEnd, if not nil, is called
// with the batch's record count just before End, where eos.BeforeCommit
// hooks into the framework. It returns nil when ctx ends.
func RunRaw(ctx context.Context, cfg config.Config, input, output string, beforeEnd func(records int)) error {
	return RunRawFunc(ctx, cfg, input, output, func(v []byte) ([]byte, error) { return Upper(v), nil }, beforeEnd)
}

// RunRawFunc is RunRaw with another transform of each value, such as
// Crunch; a transform error aborts the open transaction and ends the loop
// with that error, as the framework's default error policy (fail) does.
func RunRawFunc(ctx context.Context, cfg config.Config, input, output string, transform func([]byte) ([]byte, error), beforeEnd func(records int)) error {
	opts, err := RawOptions(cfg, input)
	if err != nil {
		return err
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	defer sess.Close()

	var failed kafkautil.FirstError
	promise := failed.Promise // bound once: a method value per record would allocate
	limit := cfg.MaxBatchRecords
	var (
		n    int
		terr error // the first transform error of the open transaction
	)
	produce := func(r *kgo.Record) {
		if terr != nil {
			return
		}
		v, err := transform(r.Value)
		if err != nil {
			terr = fmt.Errorf("raw loop: transform of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			return
		}
		n++
		sess.Produce(context.Background(), &kgo.Record{
			Topic: output, Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp,
		}, promise)
	}
	// chunk is how many records one poll takes: a quarter of the commit
	// interval's worth at the last transaction's cost per record, so that
	// a slow transform ends its transaction near the interval as the
	// framework's adaptive polls do, rather than after a whole poll (which
	// can outlast the transaction timeout); small until a transaction has
	// timed the transform.
	chunk := min(limit, 1000)
	for {
		fs := sess.PollRecords(ctx, chunk)
		if fs.IsClientClosed() || ctx.Err() != nil && fs.NumRecords() == 0 {
			return nil
		}
		if err := fatalFetchError(fs); err != nil {
			return err
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		n = 0
		began := time.Now()
		deadline := began.Add(cfg.CommitInterval)
		fs.EachRecord(produce)
		for n < limit && terr == nil && ctx.Err() == nil && time.Until(deadline) > 0 {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			more := sess.PollRecords(pctx, min(chunk, limit-n))
			cancel()
			if more.IsClientClosed() {
				break
			}
			if err := fatalFetchError(more); err != nil {
				return err
			}
			more.EachRecord(produce)
		}
		if n > 0 {
			perRecord := time.Since(began) / time.Duration(n)
			chunk = int(min(max(cfg.CommitInterval/4/max(perRecord, 1), 1), time.Duration(limit)))
		}
		if beforeEnd != nil {
			beforeEnd(n)
		}
		perr := failed.Take()
		ectx, cancel := context.WithTimeout(context.Background(), cfg.TransactionTimeout+10*time.Second)
		_, err := sess.End(ectx, kgo.TransactionEndTry(perr == nil && terr == nil))
		cancel()
		switch {
		case err != nil:
			return fmt.Errorf("raw loop: end transaction: %w", err)
		case perr != nil:
			return fmt.Errorf("raw loop: produce: %w", perr)
		case terr != nil:
			return terr
		}
		// committed false without an error: aborted by a rebalance, and
		// the session rewound; the records come again.
	}
}

// fatalFetchError returns the first fetch error no retry can fix: an
// authorization failure. The client retries everything else itself
// (broker restarts included), so the loop carries on, as eos.Runner does.
func fatalFetchError(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		if kafkautil.IsFatal(fe.Err) {
			return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
	}
	return nil
}

// CountStore is the store the count pipeline counts in, on both sides:
// its changelog is topology.ChangelogTopic(appID, CountStore), the name
// Kafka Streams gives the changelog of Materialized.as("counts") too.
const CountStore = "counts"

// CountTopology is the framework side of the stateful benchmark: input →
// GroupByKey → Count in the store CountStore of engine e → ToTable(output),
// every input record emitting its key with the key's new count (codec.Int64).
func CountTopology(input, output string, e state.Engine) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, input, codec.Bytes(), topology.Named("in"))
	counts := topology.Count(topology.GroupByKey(in, "by-key"), CountStore, e)
	topology.ToTable(counts, output, codec.Int64(), topology.Named("out"))
	return top
}

// WindowedCount encodes a window's count as 16 bytes: the window's start
// in unix milliseconds, then the count, both big-endian int64. Kafka
// Streams' side writes the same bytes (the window's start and count of a
// Windowed key), so the windowed pipeline's outputs of both compare and
// one reader checks them. size is the windows' length, which the bytes
// leave out, to rebuild the window's end on decoding.
func WindowedCount(size time.Duration) codec.Codec[topology.Windowed[int64]] {
	return codec.Func[topology.Windowed[int64]]{
		EncodeFunc: func(w topology.Windowed[int64]) ([]byte, error) {
			b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(w.Window.Start.UnixMilli()))
			return binary.BigEndian.AppendUint64(b, uint64(w.Value)), nil
		},
		DecodeFunc: func(b []byte) (topology.Windowed[int64], error) {
			start, n, err := decodeWindowedCount(b)
			if err != nil {
				return topology.Windowed[int64]{}, err
			}
			s := time.UnixMilli(start).UTC()
			return topology.Windowed[int64]{Window: topology.Window{Start: s, End: s.Add(size)}, Value: n}, nil
		},
	}
}

func decodeWindowedCount(b []byte) (start, count int64, err error) {
	if len(b) != 16 {
		return 0, 0, fmt.Errorf("a windowed count has 16 bytes (window start in ms, then the count, big-endian), got %d", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:])), nil
}

// WindowedTopology is the framework side of the windowed benchmark: input
// → GroupByKey → CountWindows(w) in the store CountStore of engine e →
// ToTable(output), each key with a window's count (WindowedCount): every
// update, or with w.FinalOnly() once per window when it closes. Event
// time is the input record's timestamp.
func WindowedTopology(input, output string, e state.Engine, w topology.Windows, size time.Duration) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, input, codec.Bytes(), topology.Named("in"))
	counts := topology.CountWindows(topology.GroupByKey(in, "by-key"), CountStore, w, e)
	topology.ToTable(counts, output, WindowedCount(size), topology.Named("out"))
	return top
}

// runRawWorkers runs runcfg.WorkerCount(cfg) raw loops (RunRawFunc), each
// on its own goroutine with its own GroupTransactSession and the
// configuration runcfg.ForWorker(cfg, i) gives it (its own transactional id and group
// instance), the raw equivalent of the framework's workers. One loop alone
// keeps cfg as it is. The first loop to fail stops the others; its
// error, naming the loop, is returned.
func runRawWorkers(ctx context.Context, cfg config.Config, input, output string, transform func([]byte) ([]byte, error)) error {
	n := runcfg.WorkerCount(cfg)
	if n <= 1 {
		return RunRawFunc(ctx, cfg, input, output, transform, nil)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, n)
	for i := range n {
		wc := runcfg.ForWorker(cfg, i)
		go func() {
			err := RunRawFunc(ctx, wc, input, output, transform, nil)
			if err != nil {
				err = fmt.Errorf("raw loop %d (instance_id %q): %w", i, wc.InstanceID, err)
				cancel()
			}
			errc <- err
		}()
	}
	var first error
	for range n {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}
