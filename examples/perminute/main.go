// Command perminute counts orders per shop and minute of event time, and
// writes each minute's count once, when the minute is over: a tumbling
// window with a grace period for orders that arrive late, emitting final
// results only.
//
//	go run ./examples/perminute -seed 100 -for 10s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Order is a record of the topic shop-orders, as JSON, keyed by shop.
type Order struct {
	ID    string    `json:"id"`
	Shop  string    `json:"shop"`
	Cents int64     `json:"cents"`
	At    time.Time `json:"at"` // when it was placed: its event time
}

// grace is how long after its end a minute still takes orders.
const grace = 10 * time.Second

// pipeline counts the orders of each shop (the key) per minute of their
// own time, and writes each minute's final count to orders-per-minute.
func pipeline() *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "shop-orders", codec.JSON[Order](),
		topology.SourceTimestamp(func(_ []byte, o Order) time.Time { return o.At }))
	counts := topology.CountWindows(topology.GroupByKey(orders, "by-shop"), "per-minute",
		topology.Tumbling(time.Minute).Grace(grace).FinalOnly(), state.Memory())
	printed := topology.Peek(topology.ToStream(counts, "minutes"), "print", func(_ context.Context, shop []byte, w topology.Windowed[int64]) {
		fmt.Printf("%s %s-%s: %d orders\n", shop, w.Window.Start.Format("15:04"), w.Window.End.Format("15:04"), w.Value)
	})
	// Keyed by shop; the window is in the value (see topology.Windowed):
	// {"window":{"start":"2026-01-02T15:04:00.000Z","end":"2026-01-02T15:05:00.000Z"},"value":5}
	topology.To(printed, "orders-per-minute", codec.JSON[topology.Windowed[int64]]())
	return top
}

func main() {
	seed := flag.Int("seed", 0, "first produce this many sample orders, over the last five minutes, to the topic shop-orders")
	runFor := flag.Duration("for", 0, "stop after this long (default: at SIGINT or SIGTERM)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	if err := run(ctx, *seed); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, seed int) error {
	cfg := config.Default()
	cfg.Brokers = []string{"127.0.0.1:9092"} // defaults that EOS_BROKERS, EOS_APP_ID
	cfg.AppID = "perminute-example"          // and the other EOS_* variables override
	cfg, err := config.FromEnv(cfg)
	if err != nil {
		return err
	}
	logger, err := eos.NewLogger(cfg) // follows log_level (EOS_LOG_LEVEL)
	if err != nil {
		return err
	}
	defer logger.Sync()
	r, err := eos.New(cfg, pipeline(), eos.Logger(logger), eos.CreateTopics(3, -1))
	if err != nil {
		return err
	}
	if seed > 0 {
		opts, err := cfg.KgoOpts() // brokers, TLS and SASL as configured
		if err != nil {
			return err
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return err
		}
		err = seedOrders(ctx, cl, seed)
		cl.Close()
		if err != nil {
			return fmt.Errorf("seeding orders: %w", err)
		}
		fmt.Printf("seeded %d orders and one closing order per shop\n", seed)
	}
	if err := r.Run(ctx); err != nil {
		return err
	}
	s := r.Stats()
	fmt.Printf("done: %d orders in, %d minutes closed, %d late\n", s.RecordsIn, s.RecordsOut, s.Skipped)
	return nil
}

var shops = []string{"north", "south", "east", "west"}

// seedOrders produces n orders spread evenly over the five minutes before
// this one, keyed by shop, then one order per shop just past the last
// minute's grace, which closes the minutes before it. Orders of a rerun
// within five minutes fall into minutes already closed: they are late.
func seedOrders(ctx context.Context, cl *kgo.Client, n int) error {
	// The topic as CreateTopics(3, -1) would make it; an existing one is fine.
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, 3, -1, nil, "shop-orders")
	if err == nil {
		err = resps.Error()
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	base := time.Now().Truncate(time.Minute).Add(-5 * time.Minute)
	step := 5 * time.Minute / time.Duration(n)
	var recs []*kgo.Record
	add := func(o Order) error {
		v, err := codec.JSON[Order]().Encode(o)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: "shop-orders", Key: []byte(o.Shop), Value: v})
		return nil
	}
	for i := 0; i < n; i++ {
		if err := add(Order{ID: fmt.Sprintf("o-%d", i), Shop: shops[i%len(shops)], Cents: int64(100 + i), At: base.Add(time.Duration(i) * step)}); err != nil {
			return err
		}
	}
	for _, shop := range shops {
		if err := add(Order{ID: "closing-" + shop, Shop: shop, Cents: 1, At: base.Add(5*time.Minute + grace)}); err != nil {
			return err
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
