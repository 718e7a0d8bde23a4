// Command wordcount counts words, exactly once: lines in from topic
// "lines", each word's running count out to "word-counts", keyed by the
// word. The README's first-hour walk-through shows this file whole.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.FromEnv(config.Default()) // EOS_BROKERS, EOS_APP_ID, EOS_LOG_LEVEL, …
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger, err := eos.NewLogger(cfg) // JSON lines on stderr at log_level
	if err != nil {
		return err
	}
	defer logger.Sync()
	r, err := eos.New(cfg, pipeline(), eos.Logger(logger), eos.CreateTopics(3, -1))
	if err != nil {
		return err
	}
	return r.Run(ctx) // until SIGINT or SIGTERM; nil after a clean shutdown
}

// pipeline splits lines into words, keys each by itself and counts them.
func pipeline() *topology.Topology {
	top := topology.New()
	lines := topology.Source(top, "lines", codec.String())
	words := topology.FlatMap(lines, "split", func(_ context.Context, _ []byte, line string) ([]topology.KV[string], error) {
		var out []topology.KV[string]
		for _, w := range strings.Fields(strings.ToLower(line)) {
			out = append(out, topology.KV[string]{Key: []byte(w), Value: w})
		}
		return out, nil
	})
	byWord := topology.GroupByKey(words, "by-word", topology.Repartition(codec.String()))
	counts := topology.Count(byWord, "counts", state.Memory()) // or pebble.New() (state/pebble), kept on disk
	topology.ToTable(counts, "word-counts", codec.JSON[int64]())
	return top
}
