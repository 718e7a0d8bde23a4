package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What produce and consume share: the topic must exist before records go
// to or come from it, and the client that moves them connects as every
// other command does.

// withTopic connects like the other commands (so an unreachable broker or
// a TLS or SASL mistake fails within --timeout, with the usual message),
// checks that topic exists and runs setup with its partitions, sorted.
// The connection closes when setup returns.
func (g *globals) withTopic(cmd *cobra.Command, topic string, setup func(ctx context.Context, adm *kadm.Client, partitions []int32) error) error {
	return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
		// Metadata without auto-creation: a mistyped name must not make a
		// topic on brokers that create them on first use (eosctl dev broker).
		details, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return kafkaErr(fmt.Sprintf("describe topic %q", topic), err)
		}
		d, ok := details[topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return fmt.Errorf("topic %q does not exist — create it with 'eosctl topic create %s' ('eosctl topic list' shows the topics there are)", topic, topic)
		case d.Err != nil:
			return kafkaErr(fmt.Sprintf("describe topic %q", topic), d.Err)
		}
		parts := make([]int32, 0, len(d.Partitions))
		for p := range d.Partitions {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		return setup(ctx, adm, parts)
	})
}

// recordClient builds the client that produces or consumes, with the same
// connection settings as the admin client plus opts.
func (g *globals) recordClient(opts ...kgo.Opt) (*kgo.Client, error) {
	cfg, err := g.pipelineConfig()
	if err != nil {
		return nil, err
	}
	base, err := cfg.KgoOpts()
	if err != nil {
		return nil, fmt.Errorf("invalid client settings: %w", err)
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("invalid client settings: %w", err)
	}
	return cl, nil
}

// checkPartitions returns an error naming the first of want that the
// topic does not have.
func checkPartitions(topic string, have, want []int32) error {
	for _, p := range want {
		if !slices.Contains(have, p) {
			return fmt.Errorf("topic %q has no partition %d; it has %d partition(s), numbered from 0", topic, p, len(have))
		}
	}
	return nil
}
