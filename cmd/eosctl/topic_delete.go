package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// deletedTopicJSON is one topic of `topic delete`.
type deletedTopicJSON struct {
	Topic   string `json:"topic"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

// newTopicDeleteCmd deletes topics, e.g. to start a test pipeline afresh.
// It asks for --yes since the records cannot be brought back.
func newTopicDeleteCmd(g *globals) *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:   "delete NAME... --yes",
		Short: "Delete topics and all their records",
		Long: `Delete topics with all their records. This cannot be undone, so it needs
--yes. Delete a pipeline's topics only while the pipeline is stopped.

Prints whether each topic was deleted; exits 1 naming any that was not,
e.g. because it does not exist.`,
		Example: "  eosctl topic delete orders-test orders-test-dlq --yes",
		Args:    usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := topicNames(args)
			if err != nil {
				return err
			}
			if !yes {
				return usageErrorf("deleting topic(s) %s removes all their records for good; add --yes to delete them", quoteAll(names))
			}
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				resps, err := adm.DeleteTopics(ctx, names...)
				if err != nil {
					return kafkaErr("delete topic(s) "+quoteAll(names), err)
				}
				res, failed := deleteResults(names, resps)
				t := newTable("TOPIC", "RESULT")
				for _, r := range res {
					result := "deleted"
					if !r.Deleted {
						result = r.Error
					}
					t.add(r.Topic, result)
				}
				if err := g.render(cmd.OutOrStdout(), res, t); err != nil {
					return err
				}
				return failed
			})
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "confirm that the topics and their records are to be deleted")
	return c
}

// deleteResults turns the broker's answer into one row per topic, in the
// order given, and an error naming every topic that was not deleted (nil
// if all were).
func deleteResults(names []string, resps kadm.DeleteTopicResponses) ([]deletedTopicJSON, error) {
	res := make([]deletedTopicJSON, 0, len(names))
	var missing []string
	var errs []error
	for _, name := range names {
		r := deletedTopicJSON{Topic: name}
		resp, ok := resps[name]
		switch {
		case !ok:
			r.Error = "no answer for this topic"
			errs = append(errs, fmt.Errorf("delete topic %q: the broker did not answer for it; check with 'eosctl topic describe %s'", name, name))
		case errors.Is(resp.Err, kerr.UnknownTopicOrPartition):
			r.Error = "does not exist"
			missing = append(missing, name)
		case errors.Is(resp.Err, kerr.TopicDeletionDisabled):
			r.Error = resp.Err.Error()
			errs = append(errs, fmt.Errorf("delete topic %q: %w — the brokers run with delete.topic.enable=false; enable it to delete topics", name, resp.Err))
		case resp.Err != nil:
			r.Error = resp.Err.Error() + brokerMessage(resp.ErrMessage)
			errs = append(errs, kafkaErr(fmt.Sprintf("delete topic %q", name), fmt.Errorf("%w%s", resp.Err, brokerMessage(resp.ErrMessage))))
		default:
			r.Deleted = true
		}
		res = append(res, r)
	}
	if len(missing) > 0 {
		errs = append([]error{errNoSuchTopics(missing)}, errs...)
	}
	return res, errors.Join(errs...)
}
