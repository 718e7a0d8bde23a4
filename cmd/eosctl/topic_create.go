package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Results of `topic create` for one topic.
const (
	resultCreated = "created"
	resultExists  = "exists" // left as it was, with --if-not-exists
	resultFailed  = "failed"

	errAlreadyExists = "already exists" // the row's error without --if-not-exists
)

// createdTopicJSON is one topic of `topic create`.
type createdTopicJSON struct {
	Topic             string            `json:"topic"`
	Partitions        int32             `json:"partitions"`         // -1 when unknown
	ReplicationFactor int16             `json:"replication_factor"` // -1 when unknown
	Configs           map[string]string `json:"configs,omitempty"`
	Result            string            `json:"result"` // created, exists or failed
	Error             string            `json:"error,omitempty"`
}

// newTopicCreateCmd creates topics, so a pipeline's inputs and outputs
// exist before eos.Run checks for them.
func newTopicCreateCmd(g *globals) *cobra.Command {
	var (
		partitions  int32
		replication int16
		configs     []string
		ifNotExists bool
	)
	c := &cobra.Command{
		Use:   "create NAME... [--partitions N] [--replication-factor R] [--topic-config KEY=VALUE...]",
		Short: "Create topics",
		Long: `Create topics with the same partition count, replication factor and configs,
and print what was created.

A pipeline needs its input and output topics to exist: it refuses to start
without them and names the command to create them. Partitions bound how many
pipeline instances can share the work; they can be added later (which moves
keys to other partitions) but never removed.

A topic that exists already is an error naming it, unless --if-not-exists
is given; the others are still created. Exits 1 if any topic was not created.`,
		Example: `  eosctl topic create orders invoices
  eosctl topic create orders-dlq --partitions 1 --topic-config retention.ms=1209600000
  eosctl topic create orders --partitions 12 --replication-factor 3 --if-not-exists`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := topicNames(args)
			if err != nil {
				return err
			}
			if partitions == 0 || partitions < -1 {
				return usageErrorf("--partitions must be at least 1, or -1 for the broker's num.partitions; got %d", partitions)
			}
			if replication == 0 || replication < -1 {
				return usageErrorf("--replication-factor must be at least 1, or -1 for the broker's default.replication.factor; got %d", replication)
			}
			cfgs, err := topicConfigs(configs)
			if err != nil {
				return err
			}
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.CreateTopics(ctx, partitions, replication, cfgs, names...)
				if err != nil {
					return kafkaErr("create topic(s) "+quoteAll(names), err)
				}
				res, failed := createResults(names, partitions, replication, cfgs, resps, ifNotExists)
				if slices.ContainsFunc(res, existed) {
					fillExisting(ctx, adm, res)
				}
				t := newTable("TOPIC", "PARTITIONS", "REPLICAS", "CONFIGS", "RESULT")
				for _, r := range res {
					result := r.Result
					if r.Error != "" {
						result = r.Error
					} else if r.Result == resultExists {
						result = "exists, left unchanged"
					}
					t.add(r.Topic, countCell(int64(r.Partitions)), countCell(int64(r.ReplicationFactor)), configsCell(r.Configs), result)
				}
				if err := g.render(cmd.OutOrStdout(), res, t); err != nil {
					return err
				}
				return failed
			})
		},
	}
	f := c.Flags()
	f.Int32Var(&partitions, "partitions", 3, "partitions per topic, or -1 for the broker's num.partitions")
	f.Int16Var(&replication, "replication-factor", -1, "copies of each partition, or -1 for the broker's default.replication.factor (use 3 in production)")
	// Not --config: that is every command's pipeline config file, which
	// create needs too for the cluster's TLS and SASL settings.
	f.StringArrayVar(&configs, "topic-config", nil, "topic config as KEY=VALUE, e.g. retention.ms=604800000 (repeatable)")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "skip topics that exist already instead of failing")
	return c
}

// topicConfigs parses the --topic-config KEY=VALUE values. A key given twice is
// a usage error rather than a silent last-one-wins.
func topicConfigs(values []string) (map[string]*string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]*string, len(values))
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usageErrorf("--topic-config %q is not KEY=VALUE, e.g. retention.ms=604800000", kv)
		}
		if _, dup := out[k]; dup {
			return nil, usageErrorf("--topic-config %s is given twice; give each key once", k)
		}
		out[k] = &v
	}
	return out, nil
}

// createResults turns the broker's answer into one row per topic, in the
// order given, and an error naming every topic that was not created (nil
// if all were, or existed with ifNotExists).
func createResults(names []string, partitions int32, replication int16, cfgs map[string]*string,
	resps kadm.CreateTopicResponses, ifNotExists bool) ([]createdTopicJSON, error) {
	res := make([]createdTopicJSON, 0, len(names))
	var exists []string
	var errs []error
	for _, name := range names {
		r := createdTopicJSON{Topic: name, Partitions: -1, ReplicationFactor: -1}
		resp, ok := resps[name]
		switch {
		case !ok:
			r.Result, r.Error = resultFailed, "no answer for this topic"
			errs = append(errs, fmt.Errorf("create topic %q: the broker did not answer for it; check with 'eosctl topic describe %s'", name, name))
		case errors.Is(resp.Err, kerr.TopicAlreadyExists):
			r.Result = resultExists
			if !ifNotExists {
				r.Result, r.Error = resultFailed, errAlreadyExists
				exists = append(exists, name)
			}
		case resp.Err != nil:
			r.Result, r.Error = resultFailed, resp.Err.Error()+brokerMessage(resp.ErrMessage)
			errs = append(errs, createErr(name, partitions, replication, resp))
		default:
			r.Result = resultCreated
			// Brokers before 2.4 do not say what they used; then
			// what was asked for is what was made, unless -1.
			r.Partitions, r.ReplicationFactor = partitions, replication
			if resp.NumPartitions > 0 {
				r.Partitions = resp.NumPartitions
			}
			if resp.ReplicationFactor > 0 {
				r.ReplicationFactor = resp.ReplicationFactor
			}
			r.Configs = configValues(cfgs)
		}
		res = append(res, r)
	}
	if len(exists) > 0 {
		what := "topic " + quoteAll(exists) + " already exists"
		if len(exists) > 1 {
			what = "topics " + quoteAll(exists) + " already exist"
		}
		errs = append([]error{fmt.Errorf("%s — add --if-not-exists to keep existing topics as they are, or delete first with 'eosctl topic delete %s --yes'",
			what, strings.Join(exists, " "))}, errs...)
	}
	return res, errors.Join(errs...)
}

// createErr explains why the broker refused to create one topic, with the
// flag to change where one is to blame.
func createErr(name string, partitions int32, replication int16, resp kadm.CreateTopicResponse) error {
	err := fmt.Errorf("%w%s", resp.Err, brokerMessage(resp.ErrMessage))
	switch {
	case errors.Is(resp.Err, kerr.InvalidReplicationFactor):
		return fmt.Errorf("create topic %q with replication factor %d: %w — set --replication-factor to at most the number of brokers, or -1 for the broker default", name, replication, err)
	case errors.Is(resp.Err, kerr.InvalidPartitions):
		return fmt.Errorf("create topic %q with %d partitions: %w — change --partitions", name, partitions, err)
	case errors.Is(resp.Err, kerr.InvalidConfig):
		return fmt.Errorf("create topic %q: %w — check the --topic-config keys and values against Kafka's topic configs", name, err)
	case errors.Is(resp.Err, kerr.InvalidTopicException):
		return fmt.Errorf("create topic %q: %w — topics whose names differ only in '.' and '_' collide; pick another name", name, err)
	}
	return kafkaErr(fmt.Sprintf("create topic %q", name), err)
}

// existed reports whether a row is a topic that was there before, with
// --if-not-exists or without.
func existed(r createdTopicJSON) bool {
	return r.Result == resultExists || r.Error == errAlreadyExists
}

// fillExisting puts the actual partitions and replicas of topics that
// existed already into their rows, so the output shows what is there, not
// what was asked for. Without an answer they stay unknown.
func fillExisting(ctx context.Context, adm *kadm.Client, res []createdTopicJSON) {
	var names []string
	for _, r := range res {
		if existed(r) {
			names = append(names, r.Topic)
		}
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return
	}
	for i, r := range res {
		if d, ok := details[r.Topic]; ok && existed(r) && d.Err == nil {
			res[i].Partitions = int32(len(d.Partitions))
			res[i].ReplicationFactor = int16(replicationFactor(d))
		}
	}
}

// configValues copies the configs for output, sensitive or not: they are
// the user's own arguments.
func configValues(cfgs map[string]*string) map[string]string {
	if len(cfgs) == 0 {
		return nil
	}
	out := make(map[string]string, len(cfgs))
	for k, v := range cfgs {
		out[k] = *v
	}
	return out
}

// configsCell prints configs as k=v,k=v sorted by key, or "-" for none.
func configsCell(cfgs map[string]string) string {
	if len(cfgs) == 0 {
		return "-"
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(cfgs)) {
		kv = append(kv, k+"="+cfgs[k])
	}
	return strings.Join(kv, ",")
}

// countCell prints a partition or replica count, or "-" when unknown.
func countCell(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
