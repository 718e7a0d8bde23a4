package topology

import (
	"context"
	"fmt"
	"slices"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AppIDPlaceholder stands for the application id in the names of internal
// topics before a runtime gives one, as Describe and Node.Topic show them.
const AppIDPlaceholder = "<app_id>"

// RepartitionTopic is the topic through which the GroupBy (or
// GroupByKey after a re-key) called node sends its records, re-keyed, for
// the pipeline whose application id is appID:
// "<appID>-<node>-repartition", the name Kafka Streams uses.
func RepartitionTopic(appID, node string) string {
	return appID + "-" + node + "-repartition"
}

// GroupOption tunes GroupBy, GroupByKey and Through.
type GroupOption interface{ applyGroup(*groupConf) }

type groupConf struct {
	codec      any // a codec.Codec[T] of the grouped stream's T
	partitions int32
}

type groupOpt func(*groupConf)

func (f groupOpt) applyGroup(c *groupConf) { f(c) }

// Repartition sends the grouped records through the node's repartition
// topic (see RepartitionTopic), encoding values with c, so that every
// record of a key reaches the one task that aggregates it. GroupBy needs
// it always; GroupByKey needs it after a node that may change keys (Map,
// FlatMap, Process, ProcessWith), and takes it otherwise to repartition
// anyway, e.g. when producers did not partition the input by key.
func Repartition[T any](c codec.Codec[T]) GroupOption {
	return groupOpt(func(g *groupConf) {
		if c != nil {
			g.codec = c
		}
	})
}

// RepartitionPartitions sets the partition count the runtime creates the
// repartition topic with, overriding the default: as many partitions as
// the largest input topic upstream of the node. An existing topic keeps
// its count.
func RepartitionPartitions(n int32) GroupOption {
	return groupOpt(func(g *groupConf) { g.partitions = n })
}

// GroupBy groups s by a new key, key(ctx, k, v), for an aggregation. Since
// the records of one new key may sit in any input partition, they go
// through the repartition topic "<app_id>-<name>-repartition" (created by
// the runtime if missing, partitioned by Kafka's murmur2 hash of the new
// key as Kafka Streams does), written in the batch's transaction and read
// back by the app as another input: the aggregation runs in a second
// sub-topology whose tasks are that topic's partitions. Values are encoded
// with the codec given by Repartition(c), which GroupBy requires.
//
// A nil key from key is an error of the node (its policy applies). ctx is
// cancelled on shutdown and when the record's partition is revoked.
func GroupBy[T any](s Stream[T], name string, key func(ctx context.Context, k []byte, v T) ([]byte, error), opts ...GroupOption) Grouped[T] {
	conf := groupConfOf(opts)
	c, ok := conf.codec.(codec.Codec[T])
	if !ok {
		if t := s.topology(); t != nil {
			t.problem(name, "%s", codecProblem[T]("GroupBy", conf.codec))
		}
		c = nil
	}
	g := repartition(s, name, "GroupBy", key, c, conf.partitions)
	if g.s.n != nil {
		g.s.n.t.nilFunc(g.s.n.writer, key == nil)
	}
	return g
}

// Through sends s through the repartition topic "<app_id>-<name>-repartition",
// partitioned by each record's key, and returns the stream read back from
// it: every record of a key then reaches the one task that owns the key.
// Put it before Process nodes whose store must see each key in one task
// when keys changed upstream or come from several input topics (Merge
// them, then Through). It needs Repartition(codec); RepartitionPartitions
// applies as for GroupBy, and so do the transaction and the purge.
func Through[T any](s Stream[T], name string, opts ...GroupOption) Stream[T] {
	conf := groupConfOf(opts)
	c, ok := conf.codec.(codec.Codec[T])
	if !ok {
		if t := s.topology(); t != nil {
			t.problem(name, "%s", codecProblem[T]("Through", conf.codec))
		}
		c = nil
	}
	return repartition(s, name, "Through", nil, c, conf.partitions).s
}

// groupConfOf applies opts.
func groupConfOf(opts []GroupOption) groupConf {
	var conf groupConf
	for _, o := range opts {
		if o != nil {
			o.applyGroup(&conf)
		}
	}
	return conf
}

// codecProblem says what is wrong with got, the codec given for a stream
// of T, which is either missing or for another type.
func codecProblem[T any](op string, got any) string {
	var zero T
	if got == nil {
		return fmt.Sprintf("%s sends records through a repartition topic and needs a codec for their values (%T); "+
			"pass topology.Repartition(codec.JSON[%T]()) or another codec", op, zero, zero)
	}
	return fmt.Sprintf("Repartition's codec %T is not a codec.Codec[%T], the stream's value type", got, zero)
}

// rekeyed names the first node upstream of n (n included) that may
// change keys, or "" when keys come unchanged from the sources, which
// includes repartition sources: their keys are the grouping keys.
func rekeyed(n *Node) string {
	seen := map[*Node]bool{}
	stack := []*Node{n}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c == nil || seen[c] {
			continue
		}
		seen[c] = true
		if c.rekeys {
			return fmt.Sprintf("%q (%s)", c.name, c.op)
		}
		stack = append(stack, c.parents...)
	}
	return ""
}

// repartition adds two nodes: name, a sink that re-keys each record with
// key (nil: keeps its key) and writes it to the node's repartition topic,
// and "<name>-repartition-source", the source that reads that topic and
// feeds the grouped stream.
func repartition[T any](s Stream[T], name, op string, key func(context.Context, []byte, T) ([]byte, error), c codec.Codec[T], partitions int32) Grouped[T] {
	suffix := name + "-repartition"
	type keyed struct {
		k []byte
		v T
	}
	var rekey func(context.Context, keyed) ([]byte, error)
	if key != nil {
		rekey = func(ctx context.Context, kv keyed) ([]byte, error) { return key(ctx, kv.k, kv.v) }
	}
	n := attach(s, name, KindSink, op, func(n *Node) func(graph.Exec, Record[T]) error {
		return func(x graph.Exec, r Record[T]) error {
			k := r.Key
			if rekey != nil {
				var err error
				if k, err = call(x, n, rekey, keyed{r.Key, r.Value}); err != nil {
					return err
				}
			}
			x.Enter(n.index)
			if k == nil {
				return &NodeError{Node: n.name, Err: fmt.Errorf("%w: %s groups by key, and a record without one belongs to no group "+
					"(Kafka Streams drops such records; here the node's error policy applies: Skip() drops them); "+
					"return a key for every record, or Filter keyless records out first", ErrNoKey, op)}
			}
			v, err := c.Encode(r.Value)
			if err != nil {
				return &NodeError{Node: n.name, Err: fmt.Errorf("encoding the value for %s: %w", RepartitionTopic(AppIDPlaceholder, name), err)}
			}
			return x.Emit(n.index, graph.Output{Topic: suffix, Internal: true, Partition: graph.AnyPartition, Key: k, Value: v,
				Headers: r.Headers, Timestamp: r.Timestamp})
		}
	})
	if n == nil {
		return Grouped[T]{}
	}
	t := n.t
	if p := topicPartProblem(op+" name", "the repartition topic's name", name, 249-len("a--repartition")); p != "" {
		t.problem(name, "%s", p)
	}
	if partitions < 0 {
		t.problem(name, "RepartitionPartitions(%d): a topic needs at least one partition; pass a positive count, or leave it out "+
			"for as many as the largest input upstream", partitions)
	}
	n.internal = suffix
	n.topic = RepartitionTopic(AppIDPlaceholder, name)
	n.codec = codec.Name(c)
	n.partitionCount = partitions

	srcName := name + "-repartition-source"
	if old := t.byName[srcName]; old != nil {
		t.problem(srcName, "%s %q needs the node name %q for the source of its repartition topic, and a %s has it; rename that node",
			op, name, srcName, old.op)
	}
	src := t.add(srcName, KindSource, "Source")
	src.internal = suffix
	src.topic = n.topic
	src.codec = n.codec
	src.writer = n
	p := &port[T]{}
	if c != nil {
		decode := func(_ context.Context, b []byte) (T, error) { return c.Decode(b) }
		src.fuse = sourceFuse(src, p, c, nil)
		src.source = func(x graph.Exec, r *kgo.Record) error {
			v, err := call(x, src, decode, r.Value)
			if err != nil {
				return err
			}
			return p.push(x, Record[T]{
				Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp,
				Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			})
		}
	}
	return Grouped[T]{Stream[T]{n: src, p: p}}
}

// resolvedTopic is the topic n reads or writes when the app's id is
// appID: internal topics are named after it.
func (n *Node) resolvedTopic(appID string) string {
	if n.internal != "" {
		return appID + "-" + n.internal
	}
	return n.topic
}

// repartitions lists the repartition topics of t for the app appID.
func (t *Topology) repartitions(appID string) []graph.Repartition {
	var out []graph.Repartition
	for _, n := range t.nodes {
		if n.kind != KindSink || n.internal == "" {
			continue
		}
		out = append(out, graph.Repartition{Topic: n.resolvedTopic(appID), Partitions: n.partitionCount,
			From: resolveAll(t, sourceTopics(n.parents), appID)})
	}
	return out
}

// resolveAll replaces the placeholder names of internal topics in topics
// with those of the app appID.
func resolveAll(t *Topology, topics []string, appID string) []string {
	out := slices.Clone(topics)
	for i, topic := range out {
		for _, n := range t.nodes {
			if n.kind == KindSource && n.internal != "" && n.topic == topic {
				out[i] = n.resolvedTopic(appID)
			}
		}
	}
	return out
}
