package eos_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/topology"
	"go.uber.org/zap"
)

// A whole application: configuration from EOS_* variables, a topology, and
// Run until SIGINT or SIGTERM, after which the open batch commits and Run
// returns nil. It needs a broker, e.g. `eosctl dev broker` on 127.0.0.1:9092.
func ExampleNew() {
	cfg := config.Default()
	cfg.Brokers = []string{"127.0.0.1:9092"} // EOS_BROKERS overrides it
	cfg.AppID = "shout"                      // EOS_APP_ID overrides it
	cfg, err := config.FromEnv(cfg)
	if err != nil {
		log.Fatal(err)
	}
	logger, err := zap.NewProduction()
	if err != nil {
		log.Fatal(err)
	}

	top := topology.New()
	in := topology.Source(top, "words", codec.String())
	upper := topology.MapValues(in, "upper", func(_ context.Context, v string) (string, error) {
		return strings.ToUpper(v), nil
	})
	topology.To(upper, "shouts", codec.String())

	r, err := eos.New(cfg, top, eos.Logger(logger), eos.CreateTopics(3, -1))
	if err != nil {
		log.Fatal(err) // every problem of cfg and top, each named
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = r.Run(ctx)
	var fenced *eos.FencedError
	switch {
	case errors.As(err, &fenced):
		log.Printf("another process runs as %s; this one stopped", fenced.TransactionalID)
	case err != nil:
		log.Print(err)
	}
	s := r.Stats()
	fmt.Printf("%d records in, %d out, %d transactions committed\n", s.RecordsIn, s.RecordsOut, s.Committed)
}
