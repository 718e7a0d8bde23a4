package chaos

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// repartitionLeft tells whether group has consumed every committed record
// of topic, a repartition topic written in transactions. Its lag to the
// end offset cannot say so: a caught-up exactly-once group commits the
// offset after its last record, and the commit markers behind it stay as
// lag for good. So it reads, read_committed and with the markers kept,
// from each partition's committed offset to its end, and counts the data
// records there: left is how many; why says what it waits for instead
// when it cannot tell (an open transaction, an unreadable offset), and is
// "" once it can. The group has consumed the topic when both are zero.
func repartitionLeft(ctx context.Context, adm *kadm.Client, base []kgo.Opt, group, topic string) (left int, why string) {
	from, end, why := repartitionUnread(ctx, adm, group, topic)
	if why != "" || len(from) == 0 {
		return 0, why
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // a partition may end in markers only: they show how far the read got
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)...)
	if err != nil {
		return 0, fmt.Sprintf("a reader of %s (%v)", topic, err)
	}
	defer cl.Close()
	for len(end) > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, p int32, err error) {
			if ctx.Err() == nil {
				why = fmt.Sprintf("reading %s/%d (%v)", topic, p, err)
			}
		})
		if why != "" {
			return left, why
		}
		fs.EachRecord(func(r *kgo.Record) {
			e, ok := end[r.Partition]
			if !ok {
				return
			}
			if !r.Attrs.IsControl() {
				left++
			}
			if r.Offset+1 >= e {
				delete(end, r.Partition)
			}
		})
	}
	if len(end) > 0 && left == 0 {
		return 0, fmt.Sprintf("reading %d partitions of %s to their end (%v)", len(end), topic, ctx.Err())
	}
	return left, ""
}

// repartitionUnread is where group's reading of topic stands: from, per
// partition with committed records left, the offset to read from, and
// end, its end; why says what it waits for when it cannot tell.
func repartitionUnread(ctx context.Context, adm *kadm.Client, group, topic string) (from map[int32]kgo.Offset, end map[int32]int64, why string) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Sprintf("the end offsets of %s (%v)", topic, err)
	}
	if len(ends[topic]) == 0 {
		return nil, nil, fmt.Sprintf("the workers to create %s", topic)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, nil, fmt.Sprintf("the last stable offsets of %s (%v)", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Sprintf("the start offsets of %s (%v)", topic, err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = nil, nil // no commit yet: everything is left
	}
	if err != nil {
		return nil, nil, fmt.Sprintf("the committed offsets of group %s (%v)", group, err)
	}
	from, end = map[int32]kgo.Offset{}, map[int32]int64{}
	ends.Each(func(e kadm.ListedOffset) {
		if why != "" {
			return
		}
		if s, ok := stable.Lookup(topic, e.Partition); !ok || s.Offset != e.Offset {
			why = fmt.Sprintf("an open transaction on %s/%d (last stable offset %d, end %d)", topic, e.Partition, s.Offset, e.Offset)
			return
		}
		at := int64(0)
		if s, ok := starts.Lookup(topic, e.Partition); ok {
			at = s.Offset
		}
		if c, ok := committed.Lookup(topic, e.Partition); ok && c.Err == nil && c.At > at {
			at = c.At
		}
		if at < e.Offset {
			from[e.Partition], end[e.Partition] = kgo.NewOffset().At(at), e.Offset
		}
	})
	return from, end, why
}
