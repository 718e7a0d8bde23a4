// Command dlq sends records it cannot decode to a dead-letter topic and, with
// -replay, sends the dead letters back to the topic they came from.
//
// The pipeline copies payments from the topic payments to payments-valid;
// a payment that is not valid JSON goes to payments-dlq with headers saying
// why and where from. The replay is itself a pipeline, so each dead letter
// goes back exactly once even if the replay is killed halfway.
//
//	go run ./examples/dlq -seed 100 -for 10s   # 10 of the 100 end in payments-dlq
//	go run ./examples/dlq -replay -for 10s     # and go back to payments
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

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Payment is a record of the topic payments, as JSON.
type Payment struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Cents   int64  `json:"cents"`
}

// pipeline copies payments to payments-valid. A record that does not
// decode fails at its source node, whose policy dead-letters it.
func pipeline() *topology.Topology {
	top := topology.New()
	payments := topology.Source(top, "payments", codec.JSON[Payment]())
	printed := topology.Peek(payments, "print", func(_ context.Context, _ []byte, p Payment) {
		fmt.Printf("payment %s: %s %d cents\n", p.ID, p.Account, p.Cents)
	})
	topology.To(printed, "payments-valid", codec.JSON[Payment]())
	top.OnError("payments", topology.DeadLetter("payments-dlq"))
	return top
}

// letter is a dead letter on its way back: its original value and the
// topic it was read from.
type letter struct {
	topic string
	value []byte
}

// replay sends each dead letter back to its source topic as it was read
// there: same key, value, timestamp and headers, less those DeadLetter
// added. An expired entry's dead letter is not an input record: it is
// left where it is.
func replay() *topology.Topology {
	top := topology.New()
	dead := topology.Source(top, "payments-dlq", codec.Bytes())
	letters := topology.Process(dead, "unwrap", func(ctx processor.Context[letter], r processor.Record[[]byte]) error {
		dl, ok := processor.ParseDeadLetter(r.Headers)
		if !ok {
			return errors.New("not a dead letter: no eosflow.source.topic header")
		}
		if dl.ExpiryNode != "" {
			// An expired entry (a join's unmatched record, a window's
			// result) was read from no topic: there is nowhere to send it.
			fmt.Printf("not replaying the %s of %s (%s)\n", dl.ExpiryWhat, dl.ExpiryNode, dl.Error)
			return nil
		}
		fmt.Printf("replaying %s/%d@%d (%s)\n", dl.Topic, dl.Partition, dl.Offset, dl.Error)
		ctx.Emit(processor.Record[letter]{Key: r.Key, Value: letter{topic: dl.Topic, value: r.Value},
			Headers: processor.WithoutDeadLetter(r.Headers), Timestamp: r.Timestamp})
		return nil
	})
	topology.ToTopicFunc(letters, "to-source",
		func(_ context.Context, r topology.Record[letter]) (string, error) { return r.Value.topic, nil }, // "" fails the record
		codec.Func[letter]{EncodeFunc: func(l letter) ([]byte, error) { return l.value, nil }})
	return top
}

func main() {
	seed := flag.Int("seed", 0, "first produce this many sample payments to the topic payments, every 10th not JSON")
	doReplay := flag.Bool("replay", false, "send the dead letters in payments-dlq back to their source topic")
	runFor := flag.Duration("for", 0, "stop after this long (default: at SIGINT or SIGTERM)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	if err := run(ctx, *seed, *doReplay); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, seed int, doReplay bool) error {
	cfg := config.Default()
	cfg.Brokers = []string{"127.0.0.1:9092"} // defaults that EOS_BROKERS, EOS_APP_ID
	cfg.AppID = "dlq-example"                // and the other EOS_* variables override
	cfg, err := config.FromEnv(cfg)
	if err != nil {
		return err
	}
	logger, err := eos.NewLogger(cfg) // follows log_level (EOS_LOG_LEVEL)
	if err != nil {
		return err
	}
	defer logger.Sync()
	if seed > 0 {
		if err := seedPayments(ctx, cfg, seed); err != nil {
			return fmt.Errorf("seeding payments: %w", err)
		}
		fmt.Printf("seeded %d payments\n", seed)
	}

	top := pipeline()
	if doReplay {
		top = replay()
		cfg.AppID += "-replay" // its own consumer group and transactional ids
	}
	r, err := eos.New(cfg, top, eos.Logger(logger), eos.CreateTopics(3, -1))
	if err != nil {
		return err
	}
	if err := r.Run(ctx); err != nil {
		return err
	}
	s := r.Stats()
	if doReplay {
		fmt.Printf("done: %d dead letters replayed\n", s.RecordsOut)
	} else {
		fmt.Printf("done: %d payments in, %d dead-lettered\n", s.RecordsIn, s.DeadLettered)
	}
	return nil
}

// seedPayments produces n sample payments with a plain franz-go producer;
// every 10th is cut short, so it does not decode.
func seedPayments(ctx context.Context, cfg config.Config, n int) error {
	opts, err := cfg.KgoOpts() // brokers, TLS and SASL as configured
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Make the topic as CreateTopics(3, -1) would; one that exists is fine.
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, "payments"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	accounts := []string{"ada", "grace", "edsger"}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		acct := accounts[i%len(accounts)]
		v := fmt.Sprintf(`{"id":"p-%d","account":%q,"cents":%d}`, i, acct, 100+i*7%900)
		if i%10 == 9 {
			v = v[:len(v)/2] // poison: undecodable JSON
		}
		recs[i] = &kgo.Record{Topic: "payments", Key: []byte(acct), Value: []byte(v)}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
