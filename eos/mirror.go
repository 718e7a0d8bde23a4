package eos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// offsetsMirror is where an exactly-once Runner mirrors the input offsets
// each transaction commits (topology.OffsetsTopic): to partition p, one
// record per input topic with a partition p in the commit, keyed by the
// topic. The records commit or abort with the group's offsets, in the same
// transaction, but live in a log the group coordinator cannot forget. The
// floor (see offsetFloor) only knows what this process committed; the
// mirror tells a member that takes a partition over, or a process that
// starts, where the last commit reached (see mirror_read.go).
type offsetsMirror struct {
	topic      string
	partitions int32 // the topic's partition count at start
	// ids are the input topics' ids, carried by the records: a topic
	// deleted and created again is not held to the old one's offsets.
	ids    map[string]kadm.TopicID
	warned atomic.Bool // an input partition past the mirror's was logged
}

// mirrorFormat is the first byte of a mirror record's value, followed by
// the input topic's id, the next offset and its leader epoch.
const (
	mirrorFormat   = 1
	mirrorValueLen = 1 + 16 + 8 + 4
)

func encodeMirror(id kadm.TopicID, o kgo.EpochOffset) []byte {
	v := make([]byte, 0, mirrorValueLen)
	v = append(v, mirrorFormat)
	v = append(v, id[:]...)
	v = binary.BigEndian.AppendUint64(v, uint64(o.Offset))
	return binary.BigEndian.AppendUint32(v, uint32(o.Epoch))
}

func decodeMirror(v []byte) (id kadm.TopicID, o kgo.EpochOffset, ok bool) {
	if len(v) != mirrorValueLen || v[0] != mirrorFormat {
		return id, o, false
	}
	copy(id[:], v[1:17])
	o.Offset = int64(binary.BigEndian.Uint64(v[17:25]))
	o.Epoch = int32(binary.BigEndian.Uint32(v[25:29]))
	return id, o, true
}

// records returns the mirror records of a commit of offsets. A partition
// added to an input while the app runs has no mirror partition until the
// next start adds one: it goes unmirrored, logged once.
func (m *offsetsMirror) records(offsets map[string]map[int32]kgo.EpochOffset, log *zap.Logger) []*kgo.Record {
	var recs []*kgo.Record
	for topic, ps := range offsets {
		for p, o := range ps {
			if p >= m.partitions {
				if !m.warned.Swap(true) {
					log.Warn("an input partition has no offsets mirror partition yet (partitions were added to the input); restart to add it",
						zap.String("input", topic), zap.Int32("partition", p), zap.String("mirror", m.topic), zap.Int32("mirror_partitions", m.partitions))
				}
				continue
			}
			recs = append(recs, &kgo.Record{Topic: m.topic, Partition: p, Key: []byte(topic), Value: encodeMirror(m.ids[topic], o)})
		}
	}
	return recs
}

// sameTopic reports whether a mirror record's topic id is the topic's
// now; an id of zeros (a broker without topic ids) matches any.
func (m *offsetsMirror) sameTopic(topic string, id kadm.TopicID) bool {
	now := m.ids[topic]
	return id == kadm.TopicID{} || now == kadm.TopicID{} || id == now
}

// provenTopic reports whether the topic has an id to tell it from one of
// the same name deleted before: only then may a partition resume from the
// mirror (see resumeFromMirror); without, the mirror only raises the floor.
func (m *offsetsMirror) provenTopic(topic string) bool {
	return m.ids[topic] != kadm.TopicID{}
}

// mirrorPartitioner sends mirror records to the partition they name and
// leaves every other topic to base.
type mirrorPartitioner struct {
	base  kgo.Partitioner
	topic string
}

func (p mirrorPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.topic {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return p.base.ForTopic(topic)
}

// mirrorConfigs keep the mirror short: compacted to one record per input
// partition, in segments rolled hourly so that the cleaner can reach them,
// and transaction markers dropped an hour after their data was cleaned.
func mirrorConfigs() map[string]*string {
	compact, hour := "compact", fmt.Sprint(time.Hour.Milliseconds())
	return map[string]*string{"cleanup.policy": &compact, "segment.ms": &hour, "delete.retention.ms": &hour}
}

// openMirror makes the offsets mirror of an exactly-once app exist, with
// a partition for every partition of its inputs, checks the app may read
// and write it, and reads the inputs' topic ids.
func openMirror(ctx context.Context, adm *kadm.Client, appID string, inputs []string, az *authz, log *zap.Logger) (*offsetsMirror, error) {
	topic := topology.OffsetsTopic(appID)
	details, err := adm.ListTopics(ctx, append([]string{topic}, inputs...)...)
	if err != nil {
		return nil, az.errOp(unreachable(fmt.Errorf("eos: listing the input topics and the offsets mirror %s: %w", topic, err)), "Describe", topic)
	}
	m := &offsetsMirror{topic: topic, ids: map[string]kadm.TopicID{}}
	want := 0
	for _, t := range inputs {
		if d, ok := details[t]; ok && d.Err == nil {
			m.ids[t] = d.ID
			want = max(want, len(d.Partitions))
		}
	}
	d, ok := details[topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		err := kafkautil.RequestTopics(ctx, adm, int32(want), -1, mirrorConfigs(), topic)
		if isFatal(err) {
			return nil, az.errOp(fmt.Errorf("creating the offsets mirror %s: %w", topic, err), "Create", topic)
		}
		if err != nil {
			return nil, unreachable(fmt.Errorf("eos: creating the offsets mirror %s: %w; create it with `eosctl topic create %s --partitions %d --topic-config cleanup.policy=compact`", topic, err, topic, want))
		}
		log.Info("created the offsets mirror topic", zap.String("topic", topic), zap.Int("partitions", want))
	case isFatal(d.Err):
		return nil, az.errOp(fmt.Errorf("the offsets mirror %s: %w", topic, d.Err), "Describe", topic)
	case d.Err != nil:
		return nil, fmt.Errorf("eos: the offsets mirror %s: %w", topic, d.Err)
	case len(d.Partitions) < want:
		if err := growMirror(ctx, adm, log, topic, len(d.Partitions), want); err != nil {
			return nil, err
		}
		if d, err := adm.ListTopics(ctx, topic); err == nil && d[topic].Err == nil {
			want = len(d[topic].Partitions) // as many as there are, added or not
		}
	}
	m.partitions = int32(want)
	return m, mirrorGrants(ctx, adm, topic, az)
}

// growMirror adds partitions to the mirror up to want; another instance
// or worker doing it at the same time is no failure.
func growMirror(ctx context.Context, adm *kadm.Client, log *zap.Logger, topic string, have, want int) error {
	resp, err := adm.UpdatePartitions(ctx, want, topic)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.InvalidPartitions) {
		if d, lerr := adm.ListTopics(ctx, topic); lerr == nil && len(d[topic].Partitions) >= want {
			err = nil
		}
	}
	if isFatal(err) {
		// Not fatal to the app: the inputs' new partitions go unmirrored
		// (see records) until someone who may adds them.
		log.Warn("the offsets mirror has fewer partitions than the inputs, and this app may not add them; the new input partitions go unmirrored until they are added",
			zap.String("topic", topic), zap.Int("partitions", have), zap.Int("inputs", want), zap.Error(err),
			zap.String("fix", fmt.Sprintf("kafka-topics.sh --alter --topic %s --partitions %d, or grant Alter on it", topic, want)))
		return nil
	}
	if err != nil {
		return fmt.Errorf("eos: the offsets mirror %s has %d partitions, fewer than the inputs' %d, and adding partitions failed: %w; add them with `kafka-topics.sh --alter --topic %s --partitions %d`",
			topic, have, want, err, topic, want)
	}
	log.Info("added partitions to the offsets mirror topic", zap.String("topic", topic), zap.Int("partitions", want))
	return nil
}

// mirrorGrants fails at start-up when the app may not read or write the
// mirror: a refused read would otherwise show only at the first rebalance
// that finds records there. It waits for a topic just created to show in
// the metadata. Brokers that do not report authorized operations are not
// checked.
func mirrorGrants(ctx context.Context, adm *kadm.Client, topic string, az *authz) error {
	for {
		// WithAuthorizedOps asks the brokers, not the client's cache.
		details, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), topic)
		if err != nil {
			return az.errOp(unreachable(fmt.Errorf("eos: listing the offsets mirror %s: %w", topic, err)), "Describe", topic)
		}
		d := details[topic]
		if errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			select {
			case <-ctx.Done():
				return unreachable(fmt.Errorf("eos: the offsets mirror %s, just created, is not in the brokers' metadata: %w", topic, ctx.Err()))
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if len(d.AuthorizedOperations) == 0 {
			return nil
		}
		for _, need := range []struct {
			op   kadm.ACLOperation
			name string
		}{{kadm.OpRead, "Read"}, {kadm.OpWrite, "Write"}} {
			if !slices.Contains(d.AuthorizedOperations, need.op) {
				return az.errOp(fmt.Errorf("the offsets mirror %s: %w", topic, kerr.TopicAuthorizationFailed), need.name, topic)
			}
		}
		return nil
	}
}
