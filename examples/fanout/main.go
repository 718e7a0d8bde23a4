// Command fanout routes events to topics by their type: purchases to the
// topic purchases, partitioned by store; clicks and views to a topic per
// type (events-click, events-view), chosen per record; anything else is
// dropped.
//
//	go run ./examples/fanout -seed 100 -for 10s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Event is a record of the topic events, as JSON, keyed by user.
type Event struct {
	Type  string `json:"type"` // click, view, purchase, ...
	User  string `json:"user"`
	Store int32  `json:"store"`
	Cents int64  `json:"cents,omitempty"`
}

func isPurchase(_ []byte, e Event) bool { return e.Type == "purchase" }

func isPageEvent(_ []byte, e Event) bool { return e.Type == "click" || e.Type == "view" }

// pipeline is the graph: one source, a branch, two sinks.
func pipeline() *topology.Topology {
	top := topology.New()
	events := topology.Source(top, "events", codec.JSON[Event]())
	branches := topology.Branch(events, "split", isPurchase, isPageEvent)
	purchases, pages := branches[0], branches[1]

	// Purchases go by store, not by user (the key): all of a store's
	// purchases are in one partition, in order.
	purchases = topology.Peek(purchases, "print-purchase", func(_ context.Context, _ []byte, e Event) {
		fmt.Printf("purchase: %s paid %d cents at store %d\n", e.User, e.Cents, e.Store)
	})
	topology.To(purchases, "purchases", codec.JSON[Event](),
		topology.Partitioner(func(r topology.Record[Event], partitions int32) int32 { return r.Value.Store % partitions }))

	// Clicks and views go to a topic per type.
	pages = topology.Peek(pages, "print-page", func(_ context.Context, _ []byte, e Event) {
		fmt.Printf("%s: %s to events-%s\n", e.Type, e.User, e.Type)
	})
	topology.ToTopicFunc(pages, "by-type", func(_ context.Context, r topology.Record[Event]) (string, error) {
		return "events-" + r.Value.Type, nil
	}, codec.JSON[Event]())
	return top
}

func main() {
	seed := flag.Int("seed", 0, "first produce this many sample events to the topic events")
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
	cfg.AppID = "fanout-example"             // and the other EOS_* variables override
	cfg, err := config.FromEnv(cfg)
	if err != nil {
		return err
	}
	logger, err := eos.NewLogger(cfg) // follows log_level (EOS_LOG_LEVEL)
	if err != nil {
		return err
	}
	defer logger.Sync()
	opts, err := cfg.KgoOpts() // brokers, TLS and SASL as configured
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// CreateTopics below makes the topics known before running; the
	// per-type ones are chosen per record, so make them here.
	if err := createTopics(ctx, cl, "events", "events-click", "events-view"); err != nil {
		return err
	}
	if seed > 0 {
		if err := seedEvents(ctx, cl, seed); err != nil {
			return fmt.Errorf("seeding events: %w", err)
		}
		fmt.Printf("seeded %d events\n", seed)
	}

	r, err := eos.New(cfg, pipeline(), eos.Logger(logger), eos.CreateTopics(3, -1))
	if err != nil {
		return err
	}
	if err := r.Run(ctx); err != nil {
		return err
	}
	s := r.Stats()
	fmt.Printf("done: %d events in, %d routed\n", s.RecordsIn, s.RecordsOut)
	return nil
}

// createTopics makes topics as CreateTopics(3, -1) would; existing ones are fine.
func createTopics(ctx context.Context, cl *kgo.Client, topics ...string) error {
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, 3, -1, nil, topics...)
	if err != nil {
		return err
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// seedEvents produces n sample events with a plain franz-go producer.
func seedEvents(ctx context.Context, cl *kgo.Client, n int) error {
	types := []string{"view", "click", "view", "purchase", "heartbeat"}
	users := []string{"ada", "grace", "edsger", "barbara"}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		e := Event{Type: types[i%len(types)], User: users[i%len(users)], Store: int32(i % 7)}
		if e.Type == "purchase" {
			e.Cents = int64(500 + i*13%5000)
		}
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		recs[i] = &kgo.Record{Topic: "events", Key: []byte(e.User), Value: v}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
