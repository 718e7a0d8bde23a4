package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// newTopicCmd groups the topic commands, so a pipeline's topics can be
// made and checked without Kafka's shell scripts (which `eosctl dev broker`
// users do not have).
func newTopicCmd(g *globals) *cobra.Command {
	return newGroupingCmd("topic", "Create, list, describe and delete topics",
		newTopicCreateCmd(g),
		newTopicListCmd(g),
		newTopicDescribeCmd(g),
		newTopicDeleteCmd(g),
	)
}

// maxTopicNameLen is the longest topic name Kafka accepts.
const maxTopicNameLen = 249

// topicNames checks the NAME arguments as Kafka would and drops duplicates,
// keeping the order given; a name Kafka cannot hold is a usage error, so
// no request is sent for it.
func topicNames(args []string) ([]string, error) {
	var names []string
	for _, n := range args {
		if err := validTopicName(n); err != nil {
			return nil, err
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// validTopicName applies Kafka's rules for topic names: 1 to 249 of
// a-z A-Z 0-9 . _ -, and not "." or "..".
func validTopicName(n string) error {
	switch {
	case n == "":
		return usageErrorf("topic name must not be empty")
	case n == "." || n == "..":
		return usageErrorf("topic name %q is not allowed; Kafka reserves \".\" and \"..\"", n)
	case len(n) > maxTopicNameLen:
		return usageErrorf("topic name %q is %d characters; Kafka allows at most %d", n, len(n), maxTopicNameLen)
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return usageErrorf("topic name %q contains %q; Kafka allows only letters, digits, '.', '_' and '-'", n, r)
		}
	}
	return nil
}

// replicationFactor is a topic's replica count: the most replicas any of
// its partitions has (they differ only during a reassignment), or -1 when
// the broker reported no partitions.
func replicationFactor(d kadm.TopicDetail) int {
	rf := -1
	for _, p := range d.Partitions {
		rf = max(rf, len(p.Replicas))
	}
	return rf
}

// errNoSuchTopics names topics the cluster does not have and how to see
// the ones it has.
func errNoSuchTopics(names []string) error {
	what := "topic " + quoteAll(names) + " does not exist"
	if len(names) > 1 {
		what = "topics " + quoteAll(names) + " do not exist"
	}
	return fmt.Errorf("%s — check the name(s); 'eosctl topic list' shows the topics there are", what)
}

// brokerMessage appends the broker's explanation of a per-topic error, when
// it sent one.
func brokerMessage(msg string) string {
	if msg = strings.TrimSpace(msg); msg != "" {
		return " (" + msg + ")"
	}
	return ""
}
