package kafkautil

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CreateTopics creates topics with partitions each, replication copies of
// each partition (-1: the broker's default.replication.factor) and
// configs, then waits until the cluster's metadata shows every one with a
// leader for each partition, so that a client started next finds them. A
// topic that exists already counts as created: callers want the topics to
// be there, and a retried request may have made them. ctx bounds the whole
// call.
func CreateTopics(ctx context.Context, adm *kadm.Client, partitions int32, replication int16, configs map[string]*string, topics ...string) error {
	if err := RequestTopics(ctx, adm, partitions, replication, configs, topics...); err != nil {
		return err
	}
	return awaitTopics(ctx, adm, topics)
}

// RequestTopics is CreateTopics without the wait for the metadata, for a
// caller whose clients retry a topic they do not see yet (and whose admin
// client may have cached the topics as missing).
func RequestTopics(ctx context.Context, adm *kadm.Client, partitions int32, replication int16, configs map[string]*string, topics ...string) error {
	resps, err := adm.CreateTopics(ctx, partitions, replication, configs, topics...)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range topics {
		r, ok := resps[t]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("topic %q: the broker did not answer for it", t))
		case r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists):
			errs = append(errs, fmt.Errorf("topic %q: %w", t, r.Err))
		}
	}
	return errors.Join(errs...)
}

// awaitTopics polls the metadata until every topic is there with a leader
// for each of its partitions, or ctx ends.
func awaitTopics(ctx context.Context, adm *kadm.Client, topics []string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		details, err := adm.ListTopics(ctx, topics...)
		if err == nil {
			err = notReady(details, topics)
		}
		if err == nil || IsFatal(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %s not in the metadata yet: %w (%w)", strings.Join(topics, ", "), ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// notReady returns why the first topic in details is not usable yet.
func notReady(details kadm.TopicDetails, topics []string) error {
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case !ok:
			return fmt.Errorf("topic %q: %w", t, kerr.UnknownTopicOrPartition)
		case d.Err != nil:
			return fmt.Errorf("topic %q: %w", t, d.Err)
		case len(d.Partitions) == 0:
			return fmt.Errorf("topic %q has no partitions yet", t)
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Errorf("topic %q partition %d has no leader yet", t, p.Partition)
			}
		}
	}
	return nil
}
