// Command match matches payments (topic match-payments) with their orders
// (match-orders): an order and a payment of the same order id (the key)
// whose event times are at most ten minutes apart are written together to
// paid-orders, exactly once; a payment too far from its order matches
// nothing.
//
//	go run ./examples/match -seed 100 -for 10s
package main

import (
	"context"
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
	"github.com/twmb/franz-go/pkg/kgo"
)

// Order is a record of the topic match-orders, keyed by order id.
type Order struct {
	Cents int64     `json:"cents"`
	At    time.Time `json:"at"`
}

// Payment is a record of the topic match-payments, keyed by the order id.
type Payment struct {
	Cents int64     `json:"cents"`
	At    time.Time `json:"at"`
}

// Paid is an order with its payment.
type Paid struct {
	Order   Order   `json:"order"`
	Payment Payment `json:"payment"`
}

// pipeline joins orders and payments, both keyed by order id and so
// co-partitioned, within ten minutes of their own times. The two topics'
// records are merged by their Kafka timestamps (not these event times)
// only as far as they have been fetched, so one can run ahead of the other
// in event time: the grace covers that skew (here up to half an hour), or
// the side behind would be late.
func pipeline() *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "match-orders", codec.JSON[Order](),
		topology.SourceTimestamp(func(_ []byte, o Order) time.Time { return o.At }))
	payments := topology.Source(top, "match-payments", codec.JSON[Payment](),
		topology.SourceTimestamp(func(_ []byte, p Payment) time.Time { return p.At }))
	paid := topology.JoinStreams(orders, payments, "match", topology.Within(10*time.Minute).Grace(30*time.Minute),
		func(_ context.Context, _ []byte, o Order, p Payment) (Paid, error) { return Paid{o, p}, nil },
		state.Memory(), codec.JSON[Order](), codec.JSON[Payment]())
	paid = topology.Peek(paid, "print", func(_ context.Context, id []byte, p Paid) {
		fmt.Printf("paid %s: %d cents, %s after the order\n", id, p.Payment.Cents, p.Payment.At.Sub(p.Order.At))
	})
	topology.To(paid, "paid-orders", codec.JSON[Paid]())
	return top
}

func main() {
	seed := flag.Int("seed", 0, "first produce this many sample orders and a payment for each")
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
	cfg.AppID = "match-example"              // and the other EOS_* variables override
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
			return fmt.Errorf("seeding: %w", err)
		}
		fmt.Printf("seeded %d orders and %d payments\n", seed, seed)
	}
	if err := r.Run(ctx); err != nil {
		return err
	}
	s := r.Stats()
	fmt.Printf("done: %d records in, %d orders paid, %d late\n", s.RecordsIn, s.RecordsOut, s.Skipped)
	return nil
}

// seedOrders produces n orders from now on, two seconds apart, and a
// payment for each one to five minutes later, but every tenth payment
// fifteen minutes later: too late to match. The two topics get three
// partitions each, as CreateTopics(3, -1) would make them.
func seedOrders(ctx context.Context, cl *kgo.Client, n int) error {
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 3, -1, nil, "match-orders", "match-payments"); err != nil {
		return err
	}
	base := time.Now().Truncate(time.Minute)
	run := time.Now().Format("150405") // order ids differ from run to run
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		id := []byte(fmt.Sprintf("o-%s-%d", run, i))
		o := Order{Cents: int64(500 + i), At: base.Add(time.Duration(i) * 2 * time.Second)}
		after := time.Duration(i%5+1) * time.Minute
		if i%10 == 9 {
			after = 15 * time.Minute
		}
		p := Payment{Cents: o.Cents, At: o.At.Add(after)}
		ov, _ := codec.JSON[Order]().Encode(o)
		pv, _ := codec.JSON[Payment]().Encode(p)
		recs = append(recs, &kgo.Record{Topic: "match-orders", Key: id, Value: ov}, &kgo.Record{Topic: "match-payments", Key: id, Value: pv})
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
