package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Where `consume --from` starts.
const (
	fromBeginning = iota
	fromEnd
	fromOffset    // an absolute offset
	fromBeforeEnd // n records before the end, as kcat's -o -N
	fromTime      // the first record at or after n (epoch ms)
)

// fromSpec is a parsed --from.
type fromSpec struct {
	kind int
	n    int64
}

// parseFrom reads --from: beginning, end, an offset, -N (N before the end
// of each partition) or an RFC 3339 time.
func parseFrom(s string) (fromSpec, error) {
	switch s {
	case "beginning":
		return fromSpec{kind: fromBeginning}, nil
	case "end":
		return fromSpec{kind: fromEnd}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if strings.HasPrefix(s, "-") {
			return fromSpec{kind: fromBeforeEnd, n: -n}, nil
		}
		return fromSpec{kind: fromOffset, n: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return fromSpec{kind: fromTime, n: t.UnixMilli()}, nil
	}
	return fromSpec{}, usageErrorf("--from %q: want beginning, end, an offset, -N (N records before the end) or an RFC 3339 time", s)
}

// partRange is where consume reads one partition from, and the offset it
// stops before without --follow.
type partRange struct {
	start, end int64
}

// planRanges resolves --from for each partition and reads where each ends
// now: the last stable offset under read_committed (records past it are
// not readable yet), else the high watermark. Starts are kept within the
// log, so a stale offset or time reads what is there.
func planRanges(ctx context.Context, adm *kadm.Client, topic string, parts []int32, from fromSpec, committed bool) (map[int32]partRange, error) {
	starts, err := offsetsOf(topic, "log start offsets", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) })
	if err != nil {
		return nil, err
	}
	hwms, err := offsetsOf(topic, "end offsets", func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topic) })
	if err != nil {
		return nil, err
	}
	ends := hwms
	if committed {
		if ends, err = offsetsOf(topic, "last stable offsets", func() (kadm.ListedOffsets, error) { return adm.ListCommittedOffsets(ctx, topic) }); err != nil {
			return nil, err
		}
	}
	var times map[int32]int64
	if from.kind == fromTime {
		if times, err = offsetsOf(topic, "offsets by time", func() (kadm.ListedOffsets, error) { return adm.ListOffsetsAfterMilli(ctx, from.n, topic) }); err != nil {
			return nil, err
		}
	}
	out := make(map[int32]partRange, len(parts))
	for _, p := range parts {
		lo, hwm, end := starts[p], hwms[p], ends[p]
		s := lo
		switch from.kind {
		case fromEnd:
			s = end
		case fromOffset:
			s = from.n
		case fromBeforeEnd:
			s = end - from.n
		case fromTime:
			s = times[p]
		}
		out[p] = partRange{start: min(max(s, lo), hwm), end: end}
	}
	return out, nil
}

// offsetsOf runs one offset listing of topic and returns its offsets by
// partition, or the error naming what was listed.
func offsetsOf(topic, what string, list func() (kadm.ListedOffsets, error)) (map[int32]int64, error) {
	l, err := list()
	if err == nil {
		err = l.Error()
	}
	if err != nil {
		return nil, kafkaErr(fmt.Sprintf("list %s of topic %q", what, topic), err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}
