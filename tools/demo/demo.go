// Package demo runs the example pipeline under injected failures and judges
// the output: the self-contained proof behind `eosctl demo`.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Options shape one demo run. Zero values take the documented defaults.
type Options struct {
	Brokers    []string         // empty: an embedded kfake broker
	Base       *config.Config   // TLS, SASL and timeouts for a real cluster; nil: config.Default()
	Guarantee  config.Guarantee // default exactly-once
	Records    int              // default 100,000
	Partitions int32            // default 6
	FailEvery  int              // a processing error on every FailEvery'th record, once; default Records/8
	PoisonEvry int              // an undecodable record every PoisonEvry records, dead-lettered; default Records/20
	Restarts   int              // pipeline restarts spread over the run; default 2
	// MetricsAddr is the pipeline's metrics_addr, so that a dashboard or
	// `eosctl top` can watch the run; empty serves no metrics.
	MetricsAddr string
	Logger      *zap.Logger
}

// Result is the verdict plus what was injected.
type Result struct {
	verdict.Verdict
	Pass                bool    `json:"pass"`
	DeadLettered        int     `json:"dead_lettered"`
	AbortedTransactions uint64  `json:"aborted_transactions"`
	InjectedErrors      int     `json:"injected_errors"`
	BrokerFaults        int     `json:"broker_faults"`
	Restarts            int     `json:"restarts"`
	Guarantee           string  `json:"guarantee"`
	Broker              string  `json:"broker"`
	Seconds             float64 `json:"seconds"`
	RecordsPerSec       float64 `json:"records_per_sec"`
}

func (o *Options) defaults() {
	if o.Guarantee == "" {
		o.Guarantee = config.ExactlyOnce
	}
	if o.Records <= 0 {
		o.Records = 100_000
	}
	if o.Partitions <= 0 {
		o.Partitions = 6
	}
	if o.FailEvery <= 0 {
		o.FailEvery = max(o.Records/8, 1)
	}
	if o.PoisonEvry <= 0 {
		o.PoisonEvry = max(o.Records/20, 1)
	}
	if o.Restarts < 0 {
		o.Restarts = 0
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

var errInjected = errors.New("injected processing error")

// Run seeds the input, runs the pipeline with failures until every record
// committed, then drains the output and dead-letter topics read_committed.
func Run(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	res := Result{Guarantee: string(o.Guarantee)}
	var fake *kfake.Cluster
	if len(o.Brokers) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return res, fmt.Errorf("starting the embedded broker: %w", err)
		}
		defer c.Close()
		fake, o.Brokers = c, c.ListenAddrs()
		res.Broker = "embedded kfake " + o.Brokers[0]
	} else {
		res.Broker = fmt.Sprint(o.Brokers)
	}
	cfg := config.Default()
	if o.Base != nil {
		cfg = *o.Base
	}
	cfg.InstanceID = "demo"
	cfg.Brokers = o.Brokers
	cfg.Guarantee = o.Guarantee
	cfg.MetricsAddr = o.MetricsAddr
	suffix := fmt.Sprintf("%06x", rand.Uint32()&0xffffff)
	cfg.AppID = "eosflow-demo-" + suffix
	in, out, dlq := "demo-in-"+suffix, "demo-out-"+suffix, "demo-dlq-"+suffix
	conn, err := kafkautil.Connect(cfg)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	cl, adm, base := conn.Client, conn.Admin, conn.Opts
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout+20*time.Second)
	err = kafkautil.CreateTopics(cctx, adm, o.Partitions, -1, nil, in, out, dlq)
	cancel()
	if err != nil {
		return res, fmt.Errorf("creating demo topics on %v: %w", o.Brokers, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		topics := []string{in, out, dlq}
		if cfg.Guarantee == config.ExactlyOnce {
			topics = append(topics, topology.OffsetsTopic(cfg.AppID)) // the runtime made it
		}
		_, _ = adm.DeleteTopics(dctx, topics...)
	}()
	poison, err := seed(ctx, cl, in, o)
	if err != nil {
		return res, err
	}

	var mu sync.Mutex
	failed := map[int]bool{} // each injected error fires once, like a transient fault
	top := pipeline(in, out, dlq, func(id int) bool {
		if id%o.FailEvery != o.FailEvery/2 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if failed[id] {
			return false
		}
		failed[id] = true
		res.InjectedErrors++
		return true
	})
	var faults *kfake.FaultHandle
	if fake != nil && o.Guarantee == config.ExactlyOnce {
		// The broker fails two commits outright: the client must abort
		// and redo those batches.
		faults = fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 2})
	}

	start := time.Now()
	var committed uint64
	restartAt := func(i int) uint64 { return uint64(o.Records * (i + 1) / (o.Restarts + 1)) }
	restartsLeft := o.Restarts
	finished := false
	for !finished {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		r, err := eos.New(cfg, top, eos.Logger(o.Logger))
		if err != nil {
			return res, err
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		var target uint64
		if restartsLeft > 0 {
			target = restartAt(o.Restarts - restartsLeft)
		}
		runErr := supervise(ctx, done, func() bool {
			if verdict.CaughtUp(ctx, adm, cfg.AppID, in) {
				finished = true
				return true
			}
			if target > 0 && committed+r.Stats().RecordsIn >= target {
				restartsLeft--
				res.Restarts++
				return true
			}
			return false
		})
		stop()
		if runErr == nil {
			runErr = <-done
		}
		st := r.Stats()
		committed += st.RecordsIn
		res.AbortedTransactions += st.Aborted
		if runErr != nil && !errors.Is(runErr, errInjected) {
			return res, runErr
		}
		if runErr != nil {
			res.Restarts++ // a supervisor restarts the failed pipeline
			o.Logger.Info("pipeline stopped on an injected error; restarting", zap.Error(runErr))
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.RecordsPerSec = float64(o.Records) / res.Seconds
	if faults != nil {
		res.BrokerFaults = faults.Hits()
	}

	// Under at-most-once lost records never come: do not wait long for them.
	wait := 2 * time.Minute
	if o.Guarantee == config.AtMostOnce {
		wait = 15 * time.Second
	}
	drain := func(topic string, want int) ([]*kgo.Record, error) {
		dctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return verdict.Drain(dctx, base, topic, want, time.Second)
	}
	outRecs, err := drain(out, o.Records-poison)
	if err != nil {
		return res, err
	}
	dlqRecs, err := drain(dlq, poison)
	if err != nil {
		return res, err
	}
	res.DeadLettered = len(dlqRecs)
	// Judge output and dead letters together: each input must be in
	// exactly one of them, once.
	res.Verdict = verdict.Judge(o.Records, append(outRecs, dlqRecs...))
	res.Pass = res.Verdict.OK()
	res.RecordsOut = len(outRecs)
	return res, nil
}

// supervise waits until Run returns (its error) or enough is true (nil).
func supervise(ctx context.Context, done <-chan error, enough func() bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("pipeline stopped early")
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if enough() {
				return nil
			}
		}
	}
}

// seed writes the input; every PoisonEvry'th record carries a byte the
// pipeline's decoder rejects, so it must end up dead-lettered. It returns
// how many poison records it wrote.
func seed(ctx context.Context, cl *kgo.Client, topic string, o Options) (int, error) {
	poison := 0
	err := kafkautil.ProduceAll(ctx, cl, o.Records, func(id int) *kgo.Record {
		v := verdict.Value(id, 64)
		if id%o.PoisonEvry == 0 {
			v[len(v)-1] = poisonByte
			poison++
		}
		return &kgo.Record{Topic: topic, Key: verdict.Key(id, 1000), Value: v}
	})
	if err != nil {
		return 0, fmt.Errorf("seeding %s: %w", topic, err)
	}
	return poison, nil
}

// poisonByte is never valid UTF-8, so the decoder can reject it for real.
const poisonByte = 0xff

// order is what the demo pipeline decodes; poison records fail to decode.
type order struct {
	ID    int
	Value []byte
}

type orderCodec struct{}

func (orderCodec) Decode(b []byte) (order, error) {
	if !utf8.Valid(b) {
		return order{}, errors.New("value is not valid UTF-8")
	}
	id, ok := verdict.ID(b)
	if !ok {
		return order{}, fmt.Errorf("no id in %q", b)
	}
	return order{ID: id, Value: b}, nil
}

func (orderCodec) Encode(o order) ([]byte, error) { return o.Value, nil }

// pipeline: decode (poison → dead letter) → upper-case (injected errors →
// abort and stop) → output.
func pipeline(in, out, dlq string, fail func(id int) bool) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Codec[order](orderCodec{}), topology.Named("orders"))
	up := topology.MapValues(src, "enrich", func(_ context.Context, o order) (order, error) {
		if fail(o.ID) {
			return o, fmt.Errorf("record %d: %w", o.ID, errInjected)
		}
		return order{ID: o.ID, Value: bytes.ToUpper(o.Value)}, nil
	})
	topology.To(up, out, codec.Codec[order](orderCodec{}))
	top.OnError("orders", topology.DeadLetter(dlq))
	return top
}
