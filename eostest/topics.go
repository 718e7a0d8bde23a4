package eostest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topic is one topic of the in-memory broker.
type topic struct {
	name       string
	partitions int32
	next       []int64       // per partition, the offset of the next record
	unread     []*kgo.Record // written by the topology, not yet read
	maxBytes   int
}

// layout makes the topics the topology reads and writes, and those the
// options declare, with their partition counts; it sizes repartition
// topics as the runtime creates them, and refuses co-partitioned topics
// whose counts differ, as the runtime does.
func (d *Driver) layout(top *topology.Topology, c *config) error {
	count := func(name string) int32 {
		if n, ok := c.partitions[name]; ok {
			return n
		}
		return c.defaults
	}
	names := slices.Concat(top.InputTopics(), top.OutputTopics(), c.declared, mapKeys(c.partitions))
	for _, name := range names {
		if err := d.addTopic(name, count(name), c); err != nil {
			return err
		}
	}
	for _, name := range top.InputTopics() {
		d.sources[name] = true
	}
	for _, r := range d.eng.Repartitions() {
		n, ok := c.partitions[r.Topic]
		if !ok {
			n = d.repartitionCount(r.Topic, r.Partitions, r.From, c.defaults)
		}
		if err := d.addTopic(r.Topic, n, c); err != nil {
			return err
		}
		d.sources[r.Topic] = true
	}
	return d.checkCoPartitioned()
}

// repartitionCount is the count the runtime creates a repartition topic
// with: the one asked, else that of its co-partitioned group, else the
// largest of the inputs upstream.
func (d *Driver) repartitionCount(name string, asked int32, from []string, defaults int32) int32 {
	if asked > 0 {
		return asked
	}
	for _, g := range d.eng.CoPartitioned() {
		if !slices.Contains(g, name) {
			continue
		}
		for _, other := range g {
			if t := d.topics[other]; other != name && t != nil {
				return t.partitions
			}
		}
	}
	var n int32
	for _, f := range from {
		if t := d.topics[f]; t != nil {
			n = max(n, t.partitions)
		}
	}
	if n == 0 {
		n = defaults
	}
	return n
}

// addTopic makes topic name with n partitions, unless it exists.
func (d *Driver) addTopic(name string, n int32, c *config) error {
	if d.topics[name] != nil {
		return nil
	}
	if n < 1 {
		return fmt.Errorf("topic %q: %d partitions; a topic needs at least one", name, n)
	}
	maxBytes, ok := c.maxBytes[name]
	if !ok {
		maxBytes = defaultMaxMessageBytes
	}
	d.topics[name] = &topic{name: name, partitions: n, next: make([]int64, n), maxBytes: maxBytes}
	return nil
}

// checkCoPartitioned refuses co-partitioned topics with different counts.
func (d *Driver) checkCoPartitioned() error {
	for _, g := range d.eng.CoPartitioned() {
		counts := make([]string, len(g))
		differ := false
		for i, name := range g {
			counts[i] = fmt.Sprintf("%s: %d", name, d.topics[name].partitions)
			differ = differ || d.topics[name].partitions != d.topics[g[0]].partitions
		}
		if differ {
			return fmt.Errorf("topics %v share state, so they must be co-partitioned (as many partitions, keyed alike); they have %s",
				g, strings.Join(counts, ", "))
		}
	}
	return nil
}

// unknownTopic is the error of a sink writing to a topic that does not
// exist, as the runtime reports it.
func unknownTopic(name string) error {
	return fmt.Errorf("%w: %q; declare it with eostest.Topics or eostest.Partitions", processor.ErrUnknownTopic, name)
}

// partitionCount is the engine's Partitions hook.
func (d *Driver) partitionCount(name string) (int32, error) {
	if t := d.topics[name]; t != nil {
		return t.partitions, nil
	}
	return 0, unknownTopic(name)
}

// limits is the engine's OutputLimits hook. Compaction is not modelled.
func (d *Driver) limits(name string) (int, bool, error) {
	if t := d.topics[name]; t != nil {
		return t.maxBytes, false, nil
	}
	return 0, false, unknownTopic(name)
}

// partitionOf is where the producer puts a record with key when nobody
// chose: franz-go's hash of the key (Kafka's murmur2), or partition 0 for
// a record without one, where the producer sticks to a random partition.
func (d *Driver) partitionOf(key []byte, n int32) int32 {
	if key == nil || n == 1 {
		return 0
	}
	d.scratch.Key = key
	p := d.keyHash.Partition(&d.scratch, int(n))
	d.scratch.Key = nil
	return int32(p)
}

// place gives r, written to t, its partition (unless chosen), offset and
// a timestamp as the broker stores it: whole milliseconds, the wall
// clock's when it had none.
func (d *Driver) place(r *kgo.Record, t *topic) {
	if r.Partition < 0 {
		r.Partition = d.partitionOf(r.Key, t.partitions)
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = d.now
	}
	r.Timestamp = time.UnixMilli(r.Timestamp.UnixMilli()).UTC()
	r.Offset = t.next[r.Partition]
	t.next[r.Partition]++
}

// topicOf is topic name, made with one partition if the topology wrote
// to it without the driver knowing it (it cannot: limits refuses).
func (d *Driver) topicOf(name string) *topic {
	t := d.topics[name]
	if t == nil {
		t = &topic{name: name, partitions: 1, next: make([]int64, 1), maxBytes: defaultMaxMessageBytes}
		d.topics[name] = t
	}
	return t
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
