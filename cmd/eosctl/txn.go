package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// newTxnCmd groups the transaction commands, modelled on Kafka's
// kafka-transactions.sh (KIP-664) but with table and JSON output.
func newTxnCmd(g *globals) *cobra.Command {
	return newGroupingCmd("txn", "Inspect and repair Kafka transactions",
		newTxnListCmd(g),
		newTxnDescribeCmd(g),
		newTxnProducersCmd(g),
		newTxnHangingCmd(g),
		newTxnAbortCmd(g),
		newTxnCommitCmd(g),
	)
}

// txnStates are the transaction states a coordinator reports, as Kafka
// spells them.
var txnStates = []string{
	"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence",
}

// canonicalStates maps user-typed states to Kafka's spelling, case
// insensitively, so `--state ongoing` works.
func canonicalStates(in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		i := slices.IndexFunc(txnStates, func(k string) bool { return strings.EqualFold(k, s) })
		if i < 0 {
			return nil, usageErrorf("unknown transaction state %q; use one of %s", s, strings.Join(txnStates, ", "))
		}
		out = append(out, txnStates[i])
	}
	return out, nil
}

// coordinatorKnows reports whether a coordinator in this state will still
// finish the transaction by itself (writing its markers).
func coordinatorKnows(state string) bool {
	switch state {
	case "Ongoing", "PrepareCommit", "PrepareAbort":
		return true
	}
	return false
}

// partitionsString prints a topic set as topic-p,topic-p in sorted order.
func partitionsString(ts kadm.TopicsSet) string {
	var parts []string
	for _, tp := range ts.Sorted() {
		for _, p := range tp.Partitions {
			parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, p))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// topicsJSON flattens a topic set into {"topic": [partitions]} with sorted
// partitions, for stable JSON.
func topicsJSON(ts kadm.TopicsSet) map[string][]int32 {
	out := make(map[string][]int32, len(ts))
	for t, ps := range ts {
		list := make([]int32, 0, len(ps))
		for p := range ps {
			list = append(list, p)
		}
		sort.Slice(list, func(i, j int) bool { return list[i] < list[j] })
		out[t] = list
	}
	return out
}

// describeTxns describes txnIDs and returns the descriptions keyed by id;
// ids the coordinator does not know are left out rather than failing, as
// callers decide what a missing id means.
func describeTxns(ctx context.Context, adm *kadm.Client, txnIDs []string) (kadm.DescribedTransactions, error) {
	if len(txnIDs) == 0 {
		return kadm.DescribedTransactions{}, nil
	}
	described, err := adm.DescribeTransactions(ctx, txnIDs...)
	if err != nil {
		return nil, kafkaErr("describe transactions", err)
	}
	for id, d := range described {
		if d.Err != nil {
			if errors.Is(d.Err, kerr.TransactionalIDNotFound) {
				delete(described, id)
				continue
			}
			return nil, kafkaErr(fmt.Sprintf("describe transactional id %q", id), d.Err)
		}
	}
	return described, nil
}

// kafkaErr names the operation that failed and, for authorization errors,
// the fix.
func kafkaErr(op string, err error) error {
	if kafkautil.IsFatal(err) {
		return fmt.Errorf("%s: %w — these credentials lack the ACL for it; run as an admin principal or grant it", op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// brokerConfigs returns each broker's configuration as key → value. It
// asks every broker by id: a request without ids only returns cluster-wide
// dynamic values, missing what server.properties sets.
func brokerConfigs(ctx context.Context, adm *kadm.Client) (map[int32]map[string]string, error) {
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return nil, kafkaErr("list brokers", err)
	}
	rs, err := adm.DescribeBrokerConfigs(ctx, brokers.NodeIDs()...)
	if err != nil {
		return nil, kafkaErr("describe broker configs", err)
	}
	out := make(map[int32]map[string]string, len(rs))
	for _, r := range rs {
		if r.Err != nil {
			return nil, kafkaErr("describe configs of broker "+r.Name, r.Err)
		}
		id, err := strconv.ParseInt(r.Name, 10, 32)
		if err != nil {
			continue
		}
		m := make(map[string]string, len(r.Configs))
		for _, c := range r.Configs {
			if c.Value != nil {
				m[c.Key] = *c.Value
			}
		}
		out[int32(id)] = m
	}
	return out, nil
}
