package eos_test

import (
	"context"
	"errors"
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

// A hand-written count under Retry, on the embedded broker: the function
// writes its count, then a call that fails the first time for every
// record. Each retry starts from the state the first attempt found, so
// every record is counted once.
func ExampleRunner_retry() {
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
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, -1, nil, "fruit", "fruit-counts"); err != nil {
		log.Fatal(err)
	}
	for _, f := range []string{"apple", "pear", "apple"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fruit", Key: []byte(f), Value: []byte(f)}).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}

	failed := map[int64]bool{} // the offsets whose first attempt failed
	top := topology.New()
	top.AddStore("counts", state.Memory())
	fruit := topology.Source(top, "fruit", codec.String())
	counted := topology.Process(fruit, "count", func(ctx processor.Context[string], r processor.Record[string]) error {
		counts, err := processor.KV(ctx, "counts", codec.String(), codec.JSON[int]())
		if err != nil {
			return err
		}
		n, _, err := counts.Get(r.Value)
		if err != nil {
			return err
		}
		if err := counts.Put(r.Value, n+1); err != nil {
			return err
		}
		if !failed[r.Offset] { // e.g. a lookup that times out once
			failed[r.Offset] = true
			return errors.New("lookup timed out")
		}
		ctx.Emit(processor.Record[string]{Key: r.Key, Value: fmt.Sprintf("%s=%d", r.Value, n+1)})
		return nil
	}, topology.UseStores("counts"))
	topology.To(counted, "fruit-counts", codec.String())
	top.OnError("count", topology.Retry(3, 10*time.Millisecond, topology.Fail()))

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
	for r.Stats().RecordsIn < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	out, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("fruit-counts"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	for seen := 0; seen < 3; {
		out.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			fmt.Println(string(rec.Value))
			seen++
		})
	}
	fmt.Println("retries:", r.Stats().Retries)
	// Output:
	// apple=1
	// pear=1
	// apple=2
	// retries: 3
}
