package pgsink_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/sink/pgsink"
)

type Payment struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Cents   int64  `json:"cents"`
}

// A Kafka-to-Postgres pipeline: each payment is a row, a repeated id is
// skipped by the table's primary key, and rows and offsets commit together.
func Example() {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Brokers = []string{"127.0.0.1:9092"}
	cfg.AppID, cfg.InstanceID = "payments-to-db", "worker-0"
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:15432/eosflow?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	write := pgsink.Rows(codec.JSON[Payment](), pgsink.Insert("payments", "id", "account", "cents"),
		func(r processor.Record[Payment]) ([]any, error) {
			return []any{r.Value.ID, r.Value.Account, r.Value.Cents}, nil
		})
	sink, err := pgsink.New(cfg, pool, []string{"payments"}, write, pgsink.DeadLetters("payments_dead"))
	if err != nil {
		log.Fatal(err)
	}
	if err := sink.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// The article's versioned state: a row changes only when the record's
// version is newer, so late and repeated versions change nothing.
func ExampleVersioned() {
	fmt.Println(pgsink.Versioned("balances", []string{"account"}, "version", "account", "version", "cents"))
	// Output:
	// INSERT INTO "balances" AS cur ("account", "version", "cents") VALUES ($1, $2, $3) ON CONFLICT ("account") DO UPDATE SET "version" = EXCLUDED."version", "cents" = EXCLUDED."cents" WHERE cur."version" < EXCLUDED."version"
}

// The article's database-constraint pattern: with a unique key on id, a
// repeat is skipped and counted in Stats.Unchanged.
func ExampleInsert() {
	fmt.Println(pgsink.Insert("payments", "id", "account", "cents"))
	// Output:
	// INSERT INTO "payments" AS cur ("id", "account", "cents") VALUES ($1, $2, $3) ON CONFLICT DO NOTHING
}
