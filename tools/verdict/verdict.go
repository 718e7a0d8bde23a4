// Package verdict seeds numbered records, drains a topic read_committed and
// judges the result: what is missing, duplicated or out of order. The demo,
// the verifier and the tests share it so they all judge the same way.
package verdict

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Key returns the key of record id when seeding over keys distinct keys.
func Key(id, keys int) []byte { return []byte("k" + strconv.Itoa(id%keys)) }

// Value is the payload of record id: its number first, so any transform
// that keeps the leading "id=N" field lets the output be judged.
func Value(id int, pad int) []byte {
	b := make([]byte, 0, 16+pad)
	b = append(b, "id="...)
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, ';')
	for len(b) < pad {
		b = append(b, 'x')
	}
	return b
}

// ID parses the number from a value made by Value (case-insensitively, so
// upper-casing transforms keep it readable).
func ID(v []byte) (int, bool) {
	if len(v) < 4 || !strings.EqualFold(string(v[:3]), "id=") {
		return 0, false
	}
	end := 3
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	id, err := strconv.Atoi(string(v[3:end]))
	return id, err == nil
}

// Seed produces records 0..n-1 to topic, keyed over keys keys, each value
// padded to pad bytes, and waits until all are acknowledged.
func Seed(ctx context.Context, cl *kgo.Client, topic string, n, keys, pad int) error {
	err := kafkautil.ProduceAll(ctx, cl, n, func(i int) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: Key(i, keys), Value: Value(i, pad)}
	})
	if err != nil {
		return fmt.Errorf("seeding %s: %w", topic, err)
	}
	return nil
}

// SeedByValue produces records 0..n-1 to topic for a count by value:
// each under a key of its own, "r<i>" (so the records spread over the
// partitions whatever they are counted by), with Key(i, keys) as its value,
// the key a pipeline that groups by value counts it under. Want and
// JudgeCounts then apply unchanged. It waits until all are acknowledged.
func SeedByValue(ctx context.Context, cl *kgo.Client, topic string, n, keys int) error {
	err := kafkautil.ProduceAll(ctx, cl, n, func(i int) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte("r" + strconv.Itoa(i)), Value: Key(i, keys)}
	})
	if err != nil {
		return fmt.Errorf("seeding %s: %w", topic, err)
	}
	return nil
}

// Drain reads topic from the start with read_committed until it holds at
// least want records and nothing new came for idle, or ctx ends: records
// behind a transaction that a killed producer left open show only once it
// times out, so a quiet spell alone does not mean they are lost. It returns
// what it read; the caller judges it. Extra options (TLS, SASL) come first.
func Drain(ctx context.Context, base []kgo.Opt, topic string, want int, idle time.Duration) ([]*kgo.Record, error) {
	out, _, err := drain(ctx, base, topic, want, idle, kgo.ReadCommitted())
	return out, err
}

// DrainAll is Drain with read_uncommitted: the committed records and
// those of aborted (or still open) transactions, to trace a violation to
// the transaction that wrote it.
func DrainAll(ctx context.Context, base []kgo.Opt, topic string, want int, idle time.Duration) ([]*kgo.Record, error) {
	out, _, err := drain(ctx, base, topic, want, idle, kgo.ReadUncommitted())
	return out, err
}

// DrainWithin is Drain for a reader that must finish: past bound it stops
// and returns what it read with an *UnfinishedError that says what it
// waited for, so a log that cannot deliver its records (lost, or behind a
// transaction that never ends) fails the caller instead of holding it.
func DrainWithin(ctx context.Context, base []kgo.Opt, topic string, want int, idle, bound time.Duration) ([]*kgo.Record, error) {
	bctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	out, short, err := drain(bctx, base, topic, want, idle, kgo.ReadCommitted())
	if err != nil || short == nil {
		return out, err
	}
	short.Bound, short.Err = bound, bctx.Err()
	return out, short
}

// drain reads topic at isolation level iso until done, or ctx ends; when
// ctx ended it first, it also says how far it got against what it waited
// for.
func drain(ctx context.Context, base []kgo.Opt, topic string, want int, idle time.Duration, iso kgo.IsolationLevel) ([]*kgo.Record, *UnfinishedError, error) {
	opts := append(append([]kgo.Opt(nil), base...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(), // positions past trailing markers, for ends
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	// What is readable already must be read, however slow a fetch: a quiet
	// spell on a loaded machine is not the end of a partition.
	ends := readableEnds(ctx, cl, topic, iso)
	next := map[int32]int64{}
	reached := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	var out []*kgo.Record
	last := time.Now()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, idle/4+10*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		n := len(out)
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
		if len(out) > n {
			last = time.Now()
		}
		if len(out) >= want && time.Since(last) >= idle && reached() {
			return out, nil, nil
		}
	}
	return out, newUnfinished(topic, iso, want, len(out), ends, next), nil
}

// readableEnds returns, per partition of topic, the offset a reader at
// isolation level iso reaches now: the last stable offset for
// read_committed, the end offset otherwise. None when they cannot be
// listed (the reader then relies on the quiet spell alone).
func readableEnds(ctx context.Context, cl *kgo.Client, topic string, iso kgo.IsolationLevel) map[int32]int64 {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if iso == kgo.ReadCommitted() {
		list = adm.ListCommittedOffsets
	}
	listed, err := list(lctx, topic)
	if err != nil {
		return nil
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			ends[o.Partition] = o.Offset
		}
	})
	return ends
}

// Verdict is the judgement of an output against the seeded input.
type Verdict struct {
	RecordsIn  int `json:"records_in"`
	RecordsOut int `json:"records_out"`
	Missing    int `json:"missing"`
	Duplicates int `json:"duplicates"`
	OutOfOrder int `json:"out_of_order"` // per key, within one output partition
	Unknown    int `json:"unknown"`      // output records with no readable id
}

// OK reports whether the output is exactly the input, once each, with
// every key's records in their input order.
func (v Verdict) OK() bool {
	return v.Missing == 0 && v.Duplicates == 0 && v.Unknown == 0 && v.OutOfOrder == 0 && v.RecordsOut == v.RecordsIn
}

// String is the verdict on one line, for logs.
func (v Verdict) String() string {
	return fmt.Sprintf("in=%d out=%d missing=%d duplicates=%d out_of_order=%d unknown=%d",
		v.RecordsIn, v.RecordsOut, v.Missing, v.Duplicates, v.OutOfOrder, v.Unknown)
}

// Judge compares output records against ids 0..n-1. Records of one key must
// appear in increasing id order within their output partition, as they were
// seeded within their input partition.
func Judge(n int, out []*kgo.Record) Verdict {
	v := Verdict{RecordsIn: n, RecordsOut: len(out)}
	seen := make([]uint8, n)
	lastByKey := map[string]int{}
	for _, r := range out {
		id, ok := ID(r.Value)
		if !ok || id < 0 || id >= n {
			v.Unknown++
			continue
		}
		if seen[id] > 0 {
			v.Duplicates++
		} else {
			k := r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + string(r.Key)
			if last, ok := lastByKey[k]; ok && id < last {
				v.OutOfOrder++
			}
			lastByKey[k] = id
		}
		if seen[id] < 255 {
			seen[id]++
		}
	}
	for _, c := range seen {
		if c == 0 {
			v.Missing++
		}
	}
	return v
}

// CaughtUp reports whether group has committed the end of every partition
// of topic: all input is consumed, whatever became of it. An empty
// partition needs no commit: a group commits only what it consumed.
func CaughtUp(ctx context.Context, adm *kadm.Client, group, topic string) bool {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	ok := true
	ends.Each(func(e kadm.ListedOffset) {
		if o, found := offs.Lookup(topic, e.Partition); e.Err != nil || e.Offset > 0 && (!found || o.At < e.Offset) {
			ok = false
		}
	})
	return ok
}
