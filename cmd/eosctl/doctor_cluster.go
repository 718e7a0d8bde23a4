package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// txnStateTopic is Kafka's internal transaction log.
const txnStateTopic = "__transaction_state"

// minMaxVersion is the highest version of key every broker supports, or -1
// when some broker lacks it: a client can only rely on what all support.
func minMaxVersion(vs kadm.BrokersApiVersions, key kmsg.Key) int16 {
	low := int16(-1)
	for i, v := range vs.Sorted() {
		m, ok := v.KeyMaxVersion(int16(key))
		if !ok {
			return -1
		}
		if i == 0 || m < low {
			low = m
		}
	}
	return low
}

// checkAPIs checks the request versions transactions and eosctl need, and
// the KIP-890 transaction.version feature.
func (e *doctorEnv) checkAPIs(fs *findings) error {
	vs, err := e.adm.ApiVersions(e.ctx)
	if err != nil {
		return kafkaErr("api versions", err)
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return kafkaErr(fmt.Sprintf("api versions of broker %d", v.NodeID), v.Err)
		}
	}
	sorted := vs.Sorted()
	// The guess is only shown when it names one release: a cluster that
	// is not Apache Kafka (such as kfake) matches none exactly.
	detail := fmt.Sprintf("%d broker(s)", len(sorted))
	if guess := sorted[0].VersionGuess(kversion.TryRaftBroker()); strings.HasPrefix(guess, "v") {
		detail += ", API versions of Kafka " + guess
	}
	fs.ok("cluster", "%s", detail)

	var missing []string
	for _, k := range []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit} {
		if minMaxVersion(vs, k) < 0 {
			missing = append(missing, k.Name())
		}
	}
	if len(missing) > 0 {
		fs.fail("api: transactions", "brokers lack "+strings.Join(missing, ", ")+": no transactions at all",
			"upgrade every broker to Kafka 2.5 or later (3.x or 4.x recommended)")
		return nil
	}
	fs.ok("api: transactions", "InitProducerId v%d, AddPartitionsToTxn v%d, EndTxn v%d on every broker",
		minMaxVersion(vs, kmsg.InitProducerID), minMaxVersion(vs, kmsg.AddPartitionsToTxn), minMaxVersion(vs, kmsg.EndTxn))

	if v := minMaxVersion(vs, kmsg.TxnOffsetCommit); v < 3 {
		fs.fail("api: KIP-447", fmt.Sprintf("TxnOffsetCommit v%d < 3: no fencing by consumer group metadata, so a zombie instance can commit duplicates after a rebalance", v),
			"upgrade every broker to Kafka 2.5 or later")
	} else {
		fs.ok("api: KIP-447", "TxnOffsetCommit v%d: offsets commit with group metadata, fencing zombies", v)
	}
	if v := minMaxVersion(vs, kmsg.InitProducerID); v < 3 {
		fs.warn("api: KIP-360", fmt.Sprintf("InitProducerId v%d < 3: a producer cannot bump its epoch to recover from an aborted transaction and must be rebuilt", v),
			"upgrade every broker to Kafka 2.5 or later")
	}

	missing = nil
	for _, k := range []kmsg.Key{kmsg.DescribeProducers, kmsg.DescribeTransactions, kmsg.ListTransactions, kmsg.WriteTxnMarkers} {
		if minMaxVersion(vs, k) < 0 {
			missing = append(missing, k.Name())
		}
	}
	if len(missing) > 0 {
		fs.warn("api: KIP-664", "brokers lack "+strings.Join(missing, ", ")+": 'eosctl txn' cannot find or abort hanging transactions",
			"upgrade every broker to Kafka 3.0 or later")
	} else {
		fs.ok("api: KIP-664", "DescribeProducers, DescribeTransactions, ListTransactions, WriteTxnMarkers available")
	}
	e.checkTxnVersion(fs, sorted)
	return nil
}

// checkTxnVersion reads the transaction.version feature (KIP-584 features
// ride on ApiVersions; Kafka has no separate DescribeFeatures request).
// Level 2 turns on KIP-890's server-side defence against hanging
// transactions.
func (e *doctorEnv) checkTxnVersion(fs *findings, vs []kadm.BrokerApiVersions) {
	const feature = "transaction.version"
	supported, finalized := false, int16(0)
	for _, v := range vs {
		raw := v.Raw()
		if raw == nil {
			continue
		}
		if slices.ContainsFunc(raw.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool { return f.Name == feature }) {
			supported = true
		}
		for _, f := range raw.FinalizedFeatures {
			if f.Name == feature {
				finalized = max(finalized, f.MaxVersionLevel)
			}
		}
	}
	switch {
	case finalized >= 2:
		fs.ok("feature: KIP-890", "%s=%d: transactions v2, brokers reject writes outside an ongoing transaction", feature, finalized)
	case supported:
		fs.warn("feature: KIP-890", fmt.Sprintf("%s=%d: transactions v2 is off, so a late write can still leave a hanging transaction", feature, finalized),
			fmt.Sprintf("kafka-features.sh --bootstrap-server %s upgrade --feature %s=2", e.cfg.Brokers[0], feature))
	default:
		fs.warn("feature: KIP-890", "brokers predate KIP-890 (Kafka < 4.0): hanging transactions are possible",
			"upgrade to Kafka 4.0+; until then run 'eosctl txn hanging' periodically")
	}
}

// intConfig parses the first broker-reported value of key, or -1.
func (e *doctorEnv) intConfig(key string) int {
	for _, v := range e.brokerConfig(key) {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return -1
}

// checkTxnLog checks that the transaction log can exist and take writes: a
// replication factor the cluster can host and a min ISR it can meet.
func (e *doctorEnv) checkTxnLog(fs *findings) {
	const check = "transaction log"
	n := len(e.brokers)
	rf := e.intConfig("transaction.state.log.replication.factor")
	minISR := e.intConfig("transaction.state.log.min.isr")

	// The topic exists once a transactional producer has started. A
	// principal without Describe on it cannot see it; then the broker
	// settings below are all there is to check.
	if md, err := e.adm.Metadata(e.ctx, txnStateTopic); err == nil {
		if td, ok := md.Topics[txnStateTopic]; ok && td.Err == nil && len(td.Partitions) > 0 {
			e.checkExistingTxnLog(fs, td, minISR)
			return
		}
	}

	switch {
	case rf < 0 && n >= 3:
		fs.ok(check, "transaction.state.log.replication.factor not reported; Kafka's default 3 fits %d brokers", n)
	case rf < 0:
		fs.warn(check, fmt.Sprintf("brokers do not report transaction.state.log.replication.factor; Kafka's default 3 needs 3 brokers, this cluster has %d, so the first transactional producer would fail", n),
			fmt.Sprintf("set transaction.state.log.replication.factor=%d and transaction.state.log.min.isr=1 in server.properties (ignore for kfake)", n))
	case rf > n:
		fs.fail(check, fmt.Sprintf("transaction.state.log.replication.factor=%d but the cluster has %d broker(s): %s cannot be created, so InitProducerId fails and no transactional producer starts", rf, n, txnStateTopic),
			fmt.Sprintf("set transaction.state.log.replication.factor=%d or lower (1 on a single development broker) and restart, or add brokers", n))
	case rf < 3:
		fs.warn(check, fmt.Sprintf("transaction.state.log.replication.factor=%d: losing a broker can lose transaction state", rf),
			"use 3 in production (fine for development)")
	default:
		fs.ok(check, "transaction.state.log.replication.factor=%d fits %d brokers", rf, n)
	}
	effRF := rf
	if effRF < 0 {
		effRF = 3
	}
	switch {
	case minISR < 0 && effRF < 2:
		fs.warn(check+" min isr", "transaction.state.log.min.isr not reported; Kafka's default 2 exceeds replication factor 1, so every transaction write would fail",
			"set transaction.state.log.min.isr=1")
	case minISR < 0:
		fs.ok(check+" min isr", "transaction.state.log.min.isr not reported (Kafka's default 2)")
	case minISR > effRF:
		fs.fail(check+" min isr", fmt.Sprintf("transaction.state.log.min.isr=%d exceeds the replication factor %d: every transaction write fails with NOT_ENOUGH_REPLICAS", minISR, effRF),
			fmt.Sprintf("set transaction.state.log.min.isr=%d or lower", effRF))
	case minISR < 2 && effRF >= 3:
		fs.warn(check+" min isr", fmt.Sprintf("transaction.state.log.min.isr=%d: a transaction state write acknowledged by one replica can be lost with it", minISR),
			"set transaction.state.log.min.isr=2")
	default:
		fs.ok(check+" min isr", "transaction.state.log.min.isr=%d", minISR)
	}
}

// checkExistingTxnLog checks the created topic itself: its real replica
// count, and partitions whose ISR is below min.insync.replicas (their
// transactions fail).
func (e *doctorEnv) checkExistingTxnLog(fs *findings, td kadm.TopicDetail, minISR int) {
	const check = "transaction log"
	if rcs, err := e.adm.DescribeTopicConfigs(e.ctx, txnStateTopic); err == nil {
		if rc, err := rcs.On(txnStateTopic, nil); err == nil {
			for _, c := range rc.Configs {
				if n, err := strconv.Atoi(c.MaybeValue()); c.Key == "min.insync.replicas" && err == nil {
					minISR = n
				}
			}
		}
	}
	if minISR < 0 {
		minISR = 2
	}
	rf, under := -1, 0
	for _, p := range td.Partitions {
		if rf < 0 || len(p.Replicas) < rf {
			rf = len(p.Replicas)
		}
		if len(p.ISR) < minISR {
			under++
		}
	}
	switch {
	case under > 0:
		fs.fail(check, fmt.Sprintf("%d of %d %s partitions have fewer in-sync replicas than min.insync.replicas=%d: transactions coordinated there fail", under, len(td.Partitions), txnStateTopic, minISR),
			"bring the missing replicas back (check broker health) or lower min.insync.replicas on "+txnStateTopic)
	case rf < 3:
		fs.warn(check, fmt.Sprintf("%s has %d replica(s): losing a broker can lose transaction state", txnStateTopic, rf),
			"reassign it to 3 replicas with kafka-reassign-partitions.sh (fine for development)")
	default:
		fs.ok(check, "%s: %d partitions, %d replicas, all in sync with min.insync.replicas=%d", txnStateTopic, len(td.Partitions), rf, minISR)
	}
}
