package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The event-time pipelines: their records carry event times and go to
// partitions the verifier picks, in an order it knows, so that it can
// compute their expected output from the seed in plain Go.
const (
	// PipelineWindowed counts each key's records per tumbling window of
	// event time and emits each window's count once, when it closes
	// (WindowedPipeline): judged window by window.
	PipelineWindowed PipelineKind = "windowed"
	// PipelineJoin joins two co-partitioned streams, orders and payments,
	// by key within a window of event time (JoinPipeline): judged pair by
	// pair.
	PipelineJoin PipelineKind = "join"
)

// pipelines lists every sample pipeline, for help and errors.
var pipelines = []PipelineKind{PipelineUpper, PipelineCount, PipelineWindowed, PipelineJoin, PipelineOuterJoin, PipelineGlobalJoin, PipelineDedup}

// known reports whether k names a sample pipeline.
func (k PipelineKind) known() bool {
	for _, p := range pipelines {
		if k == p {
			return true
		}
	}
	return false
}

// stateful reports whether pipeline k keeps state stores: it takes a
// store engine (--state) and refuses at-most-once.
func (k PipelineKind) stateful() bool {
	return k == PipelineCount || k.eventTime()
}

// eventTime reports whether k is an event-time pipeline, seeded and
// judged by an eventRun.
func (k PipelineKind) eventTime() bool {
	return k == PipelineWindowed || k == PipelineJoin || k == PipelineOuterJoin || k == PipelineGlobalJoin
}

// The checks of the event-time pipelines, named as in Result.Failed.
const (
	// ProblemWindowMissing: a window the seed closes never came out.
	ProblemWindowMissing Problem = "window_missing"
	// ProblemWindowDuplicates: a window's final result came out again.
	// Expected of the at-least-once control, a failure under exactly-once.
	ProblemWindowDuplicates Problem = "window_duplicates"
	// ProblemWindowWrongCount: a window came out with a count other than
	// the one computed from the seed.
	ProblemWindowWrongCount Problem = "window_wrong_count"
	// ProblemWindowUnexpected: a window came out that the seed does not
	// close, e.g. one counting only late records.
	ProblemWindowUnexpected Problem = "window_unexpected"
	// ProblemWindowUnreadable: an output record is not a window result.
	ProblemWindowUnreadable Problem = "window_unreadable"
	// ProblemPairMissing: a pair the seed makes never came out.
	ProblemPairMissing Problem = "pair_missing"
	// ProblemPairDuplicates: a pair came out again.
	ProblemPairDuplicates Problem = "pair_duplicates"
	// ProblemPairUnexpected: an output record is no pair of the seed.
	ProblemPairUnexpected Problem = "pair_unexpected"
)

// eventProblems names the window or pair checks r fails, through add.
func eventProblems(r Result, add func(cond bool, name Problem, format string, a ...any)) {
	if v := r.WindowVerdict; v != nil {
		add(v.WindowMissing > 0, ProblemWindowMissing, "%d of %d windows never came out: lost final results", v.WindowMissing, v.WindowsExpected)
		add(v.WindowDuplicates > 0, ProblemWindowDuplicates, "%d window results came out again: final results repeated", v.WindowDuplicates)
		add(v.WindowWrongCount > 0, ProblemWindowWrongCount, "%d of %d windows came out with a count other than the seed's: records lost or counted twice",
			v.WindowWrongCount, v.WindowsExpected)
		add(v.WindowUnexpected > 0, ProblemWindowUnexpected, "%d windows came out that the seed does not close", v.WindowUnexpected)
		add(v.WindowUnreadable > 0, ProblemWindowUnreadable, "%d output records are no window result", v.WindowUnreadable)
	}
	if v := r.JoinVerdict; v != nil {
		add(v.PairMissing > 0, ProblemPairMissing, "%d of %d pairs never came out: lost joins", v.PairMissing, v.PairsExpected)
		add(v.PairDuplicates > 0, ProblemPairDuplicates, "%d pairs came out again", v.PairDuplicates)
		add(v.PairUnexpected > 0, ProblemPairUnexpected, "%d output records are no pair of the seed", v.PairUnexpected)
	}
	lonelyProblems(r, add)
	globalProblems(r, add)
}

// eventRun seeds and judges one run of an event-time pipeline.
type eventRun interface {
	// records are the seed, each with its topic and partition, in order.
	records() []eventRecord
	// describe says what the seed holds, for -v.
	describe() string
	// identify names the output record r for the live reader, which
	// must see no name twice; false when r is not a result of the seed.
	identify(r *kgo.Record) (string, bool)
	// expected is how many output records a correct run writes.
	expected() int
	// judge sets res's verdict from the committed output.
	judge(out []*kgo.Record, res *Result)
}

// tableUpdater is an eventRun that updates a table its pipeline reads
// while the workers run, and judges by what it wrote.
type tableUpdater interface {
	// startUpdates starts writing through a transactional producer of
	// id txnID made from base, reporting through event.
	startUpdates(base []kgo.Opt, txnID string, event func(string, ...any))
	// stopUpdates stops writing and waits for the writer; idempotent.
	stopUpdates()
}

// prober is a tableUpdater that, once the loop is over, checks that the
// workers' copies of its table followed the updates.
type prober interface {
	// probe stops the updates, then writes late input to in and reads
	// what comes out of out, until it has its finding or ctx ends.
	probe(ctx context.Context, in, out string)
}

// newEventRun makes the seed of o's event-time pipeline for input topic
// in (and right, the join's payments or the global join's table), or
// returns nil for any other
// pipeline. o has its defaults.
func newEventRun(o Options, in, right string) eventRun {
	switch o.Pipeline {
	case PipelineWindowed:
		return newWindowedRun(o, in)
	case PipelineJoin:
		return newJoinRun(o, in, right)
	case PipelineOuterJoin:
		return newOuterRun(o, in)
	case PipelineGlobalJoin:
		return newGlobalRun(o, in, right)
	}
	return nil
}

// validateEvents checks what the event-time pipelines need beyond the
// other options.
func (o Options) validateEvents() error {
	partitions, records, keys := o.Partitions, o.Records, o.Keys
	if partitions == 0 {
		partitions = 6
	}
	if records == 0 {
		records = 100_000
	}
	if keys == 0 {
		keys = 1000
	}
	switch o.Pipeline {
	case PipelineWindowed, PipelineOuterJoin:
		if records <= int(partitions) {
			return fmt.Errorf("--pipeline %s seeds one closing record per partition, so --records %d must exceed --partitions %d",
				o.Pipeline, records, partitions)
		}
	case PipelineJoin:
		if span := joinSpan(records, keys); span >= JoinGrace {
			return fmt.Errorf("--pipeline %s: %d records over %d keys span %s of event time, beyond the join's grace of %s, so records would expire; raise --keys or lower --records",
				PipelineJoin, records, keys, span.Round(time.Minute), JoinGrace)
		}
	}
	return nil
}

// seedEvents produces recs, each to its own partition, in order, through
// a client of its own made from base, and waits until all are
// acknowledged.
func seedEvents(ctx context.Context, base []kgo.Opt, recs []eventRecord) error {
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return kafkautil.ProduceAll(ctx, cl, len(recs), func(i int) *kgo.Record { return recs[i].record() })
}

// startLiveIdentities starts a liveReader on topic, from its start, that
// names each record with identify: a name seen before is a duplicate, a
// record identify refuses is unknown.
func startLiveIdentities(base []kgo.Opt, topic string, identify func(*kgo.Record) (string, bool)) (*liveReader, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &liveReader{cancel: cancel, done: make(chan struct{})}
	r.last.Store(time.Now().UnixNano())
	go func() {
		defer close(r.done)
		defer cl.Close()
		seen := map[string]bool{}
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			got := false
			fs.EachRecord(func(rec *kgo.Record) {
				got = true
				r.read.Add(1)
				id, ok := identify(rec)
				switch {
				case !ok:
					r.unknown.Add(1)
				case seen[id]:
					r.dups.Add(1)
				default:
					seen[id] = true
				}
			})
			if got {
				r.last.Store(time.Now().UnixNano())
			}
		}
	}()
	return r, nil
}

// deleteAppTopics deletes every topic of app on the cluster (named
// "<app>-…": inputs, output, changelogs, the offsets mirror), best effort.
func deleteAppTopics(adm *kadm.Client, app string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return
	}
	var mine []string
	for _, t := range topics.Names() {
		if strings.HasPrefix(t, app+"-") {
			mine = append(mine, t)
		}
	}
	if len(mine) > 0 {
		_, _ = adm.DeleteTopics(ctx, mine...)
	}
}

// eventTopology builds the event-time pipeline o names.
func (o WorkerOptions) eventTopology(before func()) (*topology.Topology, error) {
	e, err := o.State.engine()
	if err != nil {
		return nil, err
	}
	if o.Pipeline == PipelineJoin {
		if o.Payments == "" {
			return nil, fmt.Errorf("chaos: pipeline %s joins two topics: give the payments topic (--payments) besides the orders (--in)", PipelineJoin)
		}
		return JoinPipeline(o.In, o.Payments, o.Out, e, before), nil
	}
	if o.Payments != "" {
		return nil, fmt.Errorf("chaos: a payments topic is only for pipeline %s, not %s", PipelineJoin, o.Pipeline)
	}
	if (o.Table != "") != (o.Pipeline == PipelineGlobalJoin) {
		return nil, fmt.Errorf("chaos: pipeline %s, and only it, joins a global table: give its topic (--table) with it alone", PipelineGlobalJoin)
	}
	if o.TableSnapshot && o.Pipeline != PipelineGlobalJoin {
		return nil, fmt.Errorf("chaos: --table-snapshot is for pipeline %s alone", PipelineGlobalJoin)
	}
	if o.Pipeline == PipelineGlobalJoin && o.TableSnapshot {
		return GlobalSnapshotPipeline(o.In, o.Out, nil, before), nil
	}
	if o.Pipeline == PipelineGlobalJoin {
		return GlobalJoinPipeline(o.In, o.Table, o.Out, e, before), nil
	}
	if o.Pipeline == PipelineOuterJoin {
		return OuterJoinPipeline(o.In, o.Out, e, before), nil
	}
	return WindowedPipeline(o.In, o.Out, e, before), nil
}
