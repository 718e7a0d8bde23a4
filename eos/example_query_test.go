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
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Interactive queries, on the embedded broker: while Run counts fruit per
// key, another goroutine reads the committed counts from the "counts"
// store. Every answer is a committed value; a key this instance cannot
// answer for (its partition restoring, owned elsewhere, or Run stopped)
// gets a *eos.QueryError instead. Under the consumer group protocol a
// partition that just moved may answer from here, with a committed but
// older value, for up to a quarter second (docs/state.md).
func ExampleRunner_Query() {
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
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 3, -1, nil, "fruit", "fruit-counts"); err != nil {
		log.Fatal(err)
	}
	for _, f := range []string{"apple", "pear", "apple", "fig", "apple", "pear"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fruit", Key: []byte(f)}).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}

	top := topology.New()
	fruit := topology.Source(top, "fruit", codec.Bytes())
	counts := topology.Count(topology.GroupByKey(fruit, "by-fruit"), "counts", state.Memory())
	topology.ToTable(counts, "fruit-counts", codec.Int64())

	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = cluster.ListenAddrs(), "fruit", "a"
	cfg.StateDir, err = os.MkdirTemp("", "fruit")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cfg.StateDir)
	r, err := eos.New(cfg, top, eos.Logger(zap.NewNop()))
	if err != nil {
		log.Fatal(err)
	}
	q, err := r.Query("counts")
	if err != nil {
		log.Fatal(err)
	}
	_, _, err = q.Get(ctx, []byte("apple"))
	fmt.Println("before Run:", errors.Is(err, eos.ErrStopped))

	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	deadline := time.Now().Add(time.Minute) // a query loop needs a bound
	for r.Stats().RecordsIn < 6 {
		if time.Now().After(deadline) {
			log.Fatalf("the records were not counted within a minute: %+v", r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, f := range []string{"apple", "pear", "fig", "kiwi"} {
		for {
			n, found, err := eos.GetAs(ctx, q, []byte(f), codec.Int64())
			if errors.Is(err, eos.ErrRestoring) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // just assigned: ask again
				continue
			}
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(f, n, found)
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// before Run: true
	// apple 3 true
	// pear 2 true
	// fig 1 true
	// kiwi 0 false
}
