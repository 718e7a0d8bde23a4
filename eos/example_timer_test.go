package eos_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fruitCounts counts records per key and reports every count each 10 s
// of event time.
type fruitCounts struct{}

// Init schedules the report: once per task each time the task's stream
// time passes a multiple of 10 s.
func (fruitCounts) Init(ctx processor.InitContext) error {
	return processor.Schedule(ctx, processor.StreamTime, 10*time.Second, report)
}

func (fruitCounts) Process(ctx processor.Context[string], r processor.Record[string]) error {
	counts, err := processor.KV(ctx, "counts", codec.String(), codec.JSON[int]())
	if err != nil {
		return err
	}
	n, _, err := counts.Get(string(r.Key))
	if err != nil {
		return err
	}
	return counts.Put(string(r.Key), n+1)
}

func (fruitCounts) Close() error { return nil }

// report emits the task's counts; they commit with the batch of the
// record that moved stream time, or are redone with it.
func report(ctx processor.Context[string], now time.Time) error {
	counts, err := processor.KV(ctx, "counts", codec.String(), codec.JSON[int]())
	if err != nil {
		return err
	}
	for e, err := range counts.All() {
		if err != nil {
			return err
		}
		ctx.Emit(processor.Record[string]{Key: []byte(e.Key), Value: fmt.Sprintf("%s=%d at %s", e.Key, e.Value, now.UTC().Format("15:04:05"))})
	}
	return nil
}

// A stream-time timer (Kafka Streams' punctuator), on the embedded broker:
// a record at 0:12 passes 0:10 and reports; the one at 0:31 passes 0:20
// and 0:30, and reports once.
func ExampleRunner_timers() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, -1, nil, "fruit", "reports"); err != nil {
		log.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []struct {
		key string
		at  int // seconds of event time
	}{{"apple", 1}, {"pear", 4}, {"apple", 9}, {"apple", 12}, {"pear", 15}, {"pear", 31}} {
		rec := &kgo.Record{Topic: "fruit", Key: []byte(f.key), Value: []byte("1"), Timestamp: start.Add(time.Duration(f.at) * time.Second)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}

	top := topology.New()
	top.AddStore("counts", state.Memory())
	fruit := topology.Source(top, "fruit", codec.String())
	reports := topology.ProcessWith(fruit, "count", func() processor.Processor[string, string] { return fruitCounts{} },
		topology.UseStores("counts"), topology.Timers())
	topology.To(reports, "reports", codec.String())

	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = cluster.ListenAddrs(), "fruit", "a"
	cfg.StateDir, err = os.MkdirTemp("", "fruit")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cfg.StateDir)
	r, err := eos.New(cfg, top)
	if err != nil {
		log.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	for r.Stats().RecordsIn < 6 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("timer firings:", r.Stats().TimerFirings)

	out, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("reports"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	for seen := 0; seen < 4; {
		out.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			fmt.Println(string(rec.Value))
			seen++
		})
	}
	// Output:
	// timer firings: 2
	// apple=3 at 00:00:12
	// pear=1 at 00:00:12
	// apple=3 at 00:00:31
	// pear=3 at 00:00:31
}
