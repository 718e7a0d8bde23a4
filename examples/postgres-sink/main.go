// Command postgres-sink writes payments from Kafka into a PostgreSQL table
// exactly once, with no Kafka transaction: each batch's rows and input
// offsets commit in one database transaction (package pgsink).
//
// The table payments has the payment id as its primary key, so a payment
// the producer sent twice is written once (the article's database-constraint
// pattern) and counted as a duplicate; a record that is not JSON goes to the
// table payments_dead in the same transaction.
//
//	integration/postgres/pg.sh start                     # or any PostgreSQL; set EOS_POSTGRES_URL
//	go run ./examples/postgres-sink -seed 100 -for 10s   # 80 rows, 10 duplicates skipped, 10 dead-lettered
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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/sink/pgsink"
)

// Payment is a record of the topic pg-payments, as JSON.
type Payment struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Cents   int64  `json:"cents"`
}

const schema = `CREATE TABLE IF NOT EXISTS payments (
	id text PRIMARY KEY,
	account text NOT NULL,
	cents bigint NOT NULL,
	kafka_offset text NOT NULL)`

func main() {
	seed := flag.Int("seed", 0, "first produce this many sample payments to pg-payments: every 10th not JSON, every 10th a repeat of the one before")
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
	cfg.AppID = "postgres-sink-example"      // and the other EOS_* variables override
	cfg.InstanceID = "postgres-sink-0"
	cfg.LeaveGroupOnClose = true
	cfg, err := config.FromEnv(cfg)
	if err != nil {
		return err
	}
	url := os.Getenv("EOS_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:15432/eosflow?sslmode=disable" // integration/postgres/pg.sh
	}
	logger, err := eos.NewLogger(cfg) // follows log_level (EOS_LOG_LEVEL)
	if err != nil {
		return err
	}
	defer logger.Sync()

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(cctx, schema); err != nil {
		return fmt.Errorf("creating table payments (is PostgreSQL at EOS_POSTGRES_URL up?): %w", err)
	}
	if seed > 0 {
		if err := seedPayments(ctx, cfg, seed); err != nil {
			return fmt.Errorf("seeding payments: %w", err)
		}
		fmt.Printf("seeded %d payments\n", seed)
	}

	write := pgsink.Rows(codec.JSON[Payment](), pgsink.Insert("payments", "id", "account", "cents", "kafka_offset"),
		func(r processor.Record[Payment]) ([]any, error) {
			if r.Value.ID == "" {
				return nil, errors.New("payment without id")
			}
			return []any{r.Value.ID, r.Value.Account, r.Value.Cents, fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)}, nil
		})
	sink, err := pgsink.New(cfg, pool, []string{"pg-payments"}, write,
		pgsink.DeadLetters("payments_dead"), pgsink.Logger(logger))
	if err != nil {
		return err
	}
	if err := sink.Run(ctx); err != nil {
		return err
	}
	s := sink.Stats()
	fmt.Printf("done: %d payments in, %d rows written, %d duplicates skipped, %d dead-lettered\n",
		s.Records, s.Records-s.Unchanged-s.DeadLettered, s.Unchanged, s.DeadLettered)
	return nil
}

// seedPayments produces n sample payments with a plain franz-go producer:
// every 10th is cut short, so it does not decode, and every 10th (another
// one) repeats the payment before it, as a producer retry would.
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
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, "pg-payments"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	accounts := []string{"ada", "grace", "edsger"}
	run := time.Now().UnixNano() // ids new to the table on every run
	recs := make([]*kgo.Record, n)
	for i := range recs {
		id := i
		if i%10 == 4 {
			id = i - 1 // a repeat
		}
		acct := accounts[id%len(accounts)]
		v := fmt.Sprintf(`{"id":"p-%d-%d","account":%q,"cents":%d}`, run, id, acct, 100+id*7%900)
		if i%10 == 9 {
			v = v[:len(v)/2] // poison: undecodable JSON
		}
		recs[i] = &kgo.Record{Topic: "pg-payments", Key: []byte(acct), Value: []byte(v)}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
