package main

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// checkInternalTopics checks the app's changelogs, repartition topics and
// offsets mirror as they exist on the cluster: a changelog must be
// compacted (else the state expires with its records), a repartition topic
// must not be (else records of one key overwrite each other before they
// are read), the mirror should be (else the offsets it keeps expire), and
// the partitions of all must take the transaction's acks=all writes.
// The doctor does not know the topology, so it compares a changelog's
// partition count with the inputs it does know: --input-topic, --topic and
// the topics the app's group committed.
func (e *doctorEnv) checkInternalTopics(fs *findings) {
	app := e.cfg.AppID
	if app == "" {
		return
	}
	all, err := e.adm.ListTopics(e.ctx)
	if err != nil {
		fs.warn("internal topics", fmt.Sprintf("cannot list topics (%v), so the changelogs and repartition topics of app %q were not checked", err, app),
			"run doctor as a principal with Describe on the app's topics")
		return
	}
	groups, _ := e.adm.ListGroups(e.ctx)
	var topics []internalTopicJSON
	var names []string
	for _, n := range all.Names() {
		kind, name, ok := internalTopicOf(app, n, groups.Groups())
		if !ok {
			continue
		}
		names = append(names, n)
		topics = append(topics, internalTopicJSON{Topic: n, Kind: kind, Name: name, Partitions: len(all[n].Partitions), ReplicationFactor: replicationFactor(all[n])})
	}
	if len(topics) == 0 {
		fs.ok("internal topics", "app %q has no changelog, repartition or offsets mirror topics yet; the runtime creates changelogs and the mirror compacted at start", app)
		return
	}
	settings, err := topicSettings(e.ctx, e.adm, names, "cleanup.policy", "min.insync.replicas")
	if err != nil {
		fs.warn("internal topics", fmt.Sprintf("cannot read the configs of %s (%v), so their cleanup.policy was not checked", quoteAll(names), err),
			"run doctor as a principal with DescribeConfigs on the app's topics")
		settings = map[string]map[string]string{}
	}
	inputs := e.knownInputs(all)
	for _, t := range topics {
		t.CleanupPolicy = settings[t.Topic]["cleanup.policy"]
		t.MinInsyncReplicas = settings[t.Topic]["min.insync.replicas"]
		e.checkCleanupPolicy(fs, t)
		e.checkInternalPartitions(fs, t, all[t.Topic])
		if t.Kind == kindChangelog {
			checkChangelogPartitions(fs, t, inputs)
		}
	}
}

// internalCheck names the finding of an internal topic by its kind.
func internalCheck(t internalTopicJSON) string {
	switch t.Kind {
	case kindChangelog:
		return "changelog"
	case kindOffsets:
		return "offsets mirror"
	}
	return "repartition topic"
}

// checkCleanupPolicy fails a changelog that is not compacted and a
// repartition topic that is, and warns of an offsets mirror that is not.
func (e *doctorEnv) checkCleanupPolicy(fs *findings, t internalTopicJSON) {
	check := internalCheck(t)
	compact := strings.Contains(t.CleanupPolicy, "compact")
	alter := func(policy string) string {
		return fmt.Sprintf("kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config cleanup.policy=%s (check with 'eosctl topic describe %s')",
			e.cfg.Brokers[0], t.Topic, policy, t.Topic)
	}
	switch {
	case t.CleanupPolicy == "":
		fs.warn(check, fmt.Sprintf("%s: cleanup.policy not reported, so whether it is compacted is unknown", t.Topic),
			"run doctor as a principal with DescribeConfigs on the topic")
	case t.Kind == kindChangelog && !compact:
		fs.fail(check, fmt.Sprintf("%s (store %q) has cleanup.policy=%s: its records expire after retention.ms and the state they hold with them; the runtime refuses to start with it", t.Topic, t.Name, t.CleanupPolicy),
			alter("compact"))
	case t.Kind == kindRepartition && compact:
		fs.fail(check, fmt.Sprintf("%s (node %q) has cleanup.policy=%s: compaction keeps only the last record of a key, so records the app has not read yet can vanish", t.Topic, t.Name, t.CleanupPolicy),
			alter("delete"))
	case t.Kind == kindOffsets && !compact:
		fs.warn(check, fmt.Sprintf("%s has cleanup.policy=%s: where a partition's last commit reached expires after retention.ms, and with it the guard against a group coordinator that forgot the offsets", t.Topic, t.CleanupPolicy),
			alter("compact"))
	default:
		fs.ok(check, "%s: cleanup.policy=%s", t.Topic, t.CleanupPolicy)
	}
}

// checkInternalPartitions checks that every partition has a leader and
// enough in-sync replicas for acks=all writes, and that the replication
// factor and min.insync.replicas make sense together and with the brokers'
// default.replication.factor, which the runtime creates changelogs with.
func (e *doctorEnv) checkInternalPartitions(fs *findings, t internalTopicJSON, d kadm.TopicDetail) {
	check := internalCheck(t)
	minISR, err := strconv.Atoi(t.MinInsyncReplicas)
	if err != nil {
		minISR = 1 // Kafka's default
	}
	var leaderless, under []string
	for _, p := range d.Partitions.Sorted() {
		if p.Leader < 0 {
			leaderless = append(leaderless, strconv.Itoa(int(p.Partition)))
		}
		if len(p.ISR) < minISR {
			under = append(under, strconv.Itoa(int(p.Partition)))
		}
	}
	rf, brokers := t.ReplicationFactor, len(e.brokers)
	defRF := e.intConfig("default.replication.factor")
	switch {
	case len(leaderless) > 0:
		fs.fail(check, fmt.Sprintf("%s: partition(s) %s have no leader: transactions that write to them fail, and the app stops", t.Topic, strings.Join(leaderless, ", ")),
			"bring the brokers holding their replicas back (check broker health; 'eosctl topic describe "+t.Topic+"' shows the replicas)")
	case minISR > rf:
		fs.fail(check, fmt.Sprintf("%s: min.insync.replicas=%d exceeds its %d replica(s): every acks=all write, so every transaction, fails with NOT_ENOUGH_REPLICAS", t.Topic, minISR, rf),
			fmt.Sprintf("kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=%d", e.cfg.Brokers[0], t.Topic, max(rf-1, 1)))
	case len(under) > 0:
		fs.fail(check, fmt.Sprintf("%s: partition(s) %s have fewer in-sync replicas than min.insync.replicas=%d: transactions that write to them fail", t.Topic, strings.Join(under, ", "), minISR),
			"bring the missing replicas back (check broker health)")
	case defRF > rf && defRF <= brokers: // a default the cluster cannot host is not what the runtime got
		fs.warn(check, fmt.Sprintf("%s has %d replica(s), fewer than the brokers' default.replication.factor=%d", t.Topic, rf, defRF),
			fmt.Sprintf("reassign it to %d replicas with kafka-reassign-partitions.sh", defRF))
	case rf < 3 && brokers >= 3:
		fs.warn(check, fmt.Sprintf("%s has %d replica(s) on a cluster of %d brokers: losing a broker can lose what it holds", t.Topic, rf, brokers),
			"reassign it to 3 replicas with kafka-reassign-partitions.sh, and set default.replication.factor=3 so that new changelogs get 3")
	case rf >= 3 && minISR < 2:
		fs.warn(check, fmt.Sprintf("%s: min.insync.replicas=%d: a write acknowledged by one replica can be lost with it", t.Topic, minISR),
			fmt.Sprintf("kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=2", e.cfg.Brokers[0], t.Topic))
	default:
		fs.ok(check, "%s: %d partitions, each with a leader; %d replica(s), min.insync.replicas=%d", t.Topic, t.Partitions, rf, minISR)
	}
}

// knownInputs are the partition counts of the inputs the doctor knows of:
// the topics given as flags and those the app's group committed offsets
// for, except the app's own repartition topics (also inputs, but made by
// it).
func (e *doctorEnv) knownInputs(all kadm.TopicDetails) map[string]int {
	names := append(append([]string{}, e.opts.inputTopics...), e.opts.topics...)
	committed, err := e.adm.FetchOffsets(e.ctx, e.cfg.AppID)
	if err == nil || errors.Is(err, kerr.GroupIDNotFound) {
		names = append(names, committed.Partitions().Topics()...)
	}
	out := map[string]int{}
	for _, n := range names {
		if d, ok := all[n]; ok && d.Err == nil && !strings.HasSuffix(n, "-"+kindRepartition) {
			out[n] = len(d.Partitions)
		}
	}
	return out
}

// checkChangelogPartitions warns when a changelog's partition count matches
// no known input: a store's tasks are its input's partitions, and the
// runtime refuses a changelog whose count differs from its input's.
func checkChangelogPartitions(fs *findings, t internalTopicJSON, inputs map[string]int) {
	if len(inputs) == 0 {
		return // nothing to compare with; the runtime checks at start
	}
	var known []string
	for n, c := range inputs {
		if c == t.Partitions {
			return
		}
		known = append(known, fmt.Sprintf("%s has %d", n, c))
	}
	sort.Strings(known)
	known = slices.Compact(known)
	fs.warn("changelog", fmt.Sprintf("%s has %d partitions, which no known input of the app has (%s): a store's changelog has one partition per partition of its input, and the runtime refuses any other count",
		t.Topic, t.Partitions, strings.Join(known, ", ")),
		"if the store's input is one of these, recreate the changelog with its partition count; if not, name the input with --input-topic so it is compared")
}
