package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Join settings of PipelineJoin.
const (
	// JoinWithin is how far apart in event time an order and a payment of
	// one key may be to join.
	JoinWithin = 5 * time.Second
	// JoinGrace keeps every record of a run in the join's stores: no
	// record expires or is late, whatever order the two topics are read
	// in, so the pairs follow from the seed alone. A run's event times
	// must span less (Options.Validate checks).
	JoinGrace = 24 * time.Hour
	// JoinNode is the JoinStreams node of JoinPipeline; its stores are
	// JoinNode+"-left" and JoinNode+"-right".
	JoinNode = "match"
	// joinPartners is about how many records of the other side, of its
	// key and within JoinWithin, each record finds.
	joinPartners = 1.5
)

// JoinPipeline is the joining sample topology: it joins each order of
// orders with each payment of payments of the same key at most JoinWithin
// apart in event time (the records' timestamps), in stores of engine e,
// and writes "<order>+<payment>" under the key to out. before runs ahead
// of each record of either topic; nil skips it.
func JoinPipeline(orders, payments, out string, e state.Engine, before func()) *topology.Topology {
	top := topology.New()
	pace := func(context.Context, []byte, string) {
		if before != nil {
			before()
		}
	}
	ords := topology.Peek(topology.Source(top, orders, codec.String(), topology.Named("orders")), "pace-orders", pace)
	pays := topology.Peek(topology.Source(top, payments, codec.String(), topology.Named("payments")), "pace-payments", pace)
	matched := topology.JoinStreams(ords, pays, JoinNode, topology.Within(JoinWithin).Grace(JoinGrace),
		func(_ context.Context, _ []byte, o, p string) (string, error) { return o + "+" + p, nil },
		e, codec.String(), codec.String())
	topology.To(matched, out, codec.String(), topology.Named("output"))
	return top
}

// joinStep is the event time between two seeded records, so that each
// finds about joinPartners partners; whole milliseconds.
func joinStep(keys int) time.Duration {
	return max(time.Millisecond, time.Duration(float64(JoinWithin)/(joinPartners*float64(max(keys, 1)))).Truncate(time.Millisecond))
}

// joinSpan is how much event time n records over keys keys span, from
// the earliest to the latest.
func joinSpan(n, keys int) time.Duration {
	return time.Duration(n)*joinStep(keys) + 2*JoinWithin
}

// joinSeed makes n records: each an order (to orders) or a payment (to
// payments) at random, of one of keys keys (key k in partition
// k % partitions of both topics), with event times that rise by joinStep
// and jump back or ahead by up to JoinWithin. Values are "o<i>" and
// "p<i>", i the record's number. The event times end more than an hour
// before now, since brokers refuse timestamps too far in the future.
func joinSeed(orders, payments string, n, keys int, partitions int32, seed uint64, now time.Time) []eventRecord {
	rng := rand.New(rand.NewPCG(seed, seed^0x6a6f696e))
	step := joinStep(keys)
	base := now.Add(-joinSpan(n, keys) - time.Hour).Truncate(time.Second)
	jitter := int(JoinWithin / time.Millisecond)
	recs := make([]eventRecord, 0, n)
	for i := range n {
		k := rng.IntN(keys)
		ts := base.Add(time.Duration(i)*step + time.Duration(rng.IntN(2*jitter+1)-jitter)*time.Millisecond)
		r := eventRecord{topic: orders, partition: int32(k % int(partitions)), key: "c" + strconv.Itoa(k), value: "o" + strconv.Itoa(i), ts: ts}
		if rng.IntN(2) == 1 {
			r.topic, r.value = payments, "p"+strconv.Itoa(i)
		}
		recs = append(recs, r)
	}
	return recs
}

// pairID names one joined pair by its key and output value.
func pairID(key, value string) string { return key + "/" + value }

// expectedPairs computes, in plain Go, every pair of an order and a
// payment of the same key whose event times are at most JoinWithin apart,
// as pairID of the output JoinPipeline writes for it.
func expectedPairs(recs []eventRecord, orders string) map[string]bool {
	type side struct{ ords, pays []eventRecord }
	byKey := map[string]*side{}
	for _, r := range recs {
		s := byKey[r.key]
		if s == nil {
			s = &side{}
			byKey[r.key] = s
		}
		if r.topic == orders {
			s.ords = append(s.ords, r)
		} else {
			s.pays = append(s.pays, r)
		}
	}
	want := map[string]bool{}
	for key, s := range byKey {
		slices.SortFunc(s.pays, func(a, b eventRecord) int { return a.ts.Compare(b.ts) })
		for _, o := range s.ords {
			from, _ := slices.BinarySearchFunc(s.pays, o.ts.Add(-JoinWithin), func(p eventRecord, t time.Time) int { return p.ts.Compare(t) })
			for _, p := range s.pays[from:] {
				if p.ts.Sub(o.ts) > JoinWithin {
					break
				}
				want[pairID(key, o.value+"+"+p.value)] = true
			}
		}
	}
	return want
}

// JoinVerdict is the pair-by-pair judgement of PipelineJoin: every pair
// computed from the seed must come out exactly once, and nothing else.
type JoinVerdict struct {
	// PairsExpected is how many pairs the seed makes.
	PairsExpected int `json:"pairs_expected"`
	// PairMissing is how many of them never came out: lost joins.
	PairMissing int `json:"pair_missing"`
	// PairDuplicates is how many output records repeat a pair that came
	// out before.
	PairDuplicates int `json:"pair_duplicates"`
	// PairUnexpected is how many output records are no pair of the seed
	// (records too far apart, of different keys, or unreadable).
	PairUnexpected int `json:"pair_unexpected"`
	// PairExamples names the first few differences, for the logs.
	PairExamples []string `json:"pair_examples,omitempty"`
}

// OK reports whether every pair came out exactly once and nothing else.
func (v JoinVerdict) OK() bool {
	return v.PairMissing == 0 && v.PairDuplicates == 0 && v.PairUnexpected == 0
}

// String is the join verdict on one line, for logs.
func (v JoinVerdict) String() string {
	return fmt.Sprintf("pairs=%d pair_missing=%d pair_duplicates=%d pair_unexpected=%d",
		v.PairsExpected, v.PairMissing, v.PairDuplicates, v.PairUnexpected)
}

// judgePairs compares the output of PipelineJoin with want.
func judgePairs(want map[string]bool, out []*kgo.Record) JoinVerdict {
	v := JoinVerdict{PairsExpected: len(want)}
	seen := map[string]int{}
	for _, r := range out {
		id := pairID(string(r.Key), string(r.Value))
		seen[id]++
		switch {
		case !want[id]:
			v.PairUnexpected++
			addExample(&v.PairExamples, "pair %s is not in the seed", id)
		case seen[id] > 1:
			v.PairDuplicates++
			addExample(&v.PairExamples, "pair %s joined %d times", id, seen[id])
		}
	}
	v.PairMissing = addUnseen(&v.PairExamples, want, seen, "pair %s never joined")
	return v
}

// joinRun seeds and judges one run of PipelineJoin.
type joinRun struct {
	recs []eventRecord
	want map[string]bool
	ords int
}

func newJoinRun(o Options, orders, payments string) *joinRun {
	recs := joinSeed(orders, payments, o.Records, o.Keys, o.Partitions, o.Seed, time.Now())
	ords := 0
	for _, r := range recs {
		if r.topic == orders {
			ords++
		}
	}
	return &joinRun{recs: recs, want: expectedPairs(recs, orders), ords: ords}
}

func (j *joinRun) records() []eventRecord { return j.recs }

func (j *joinRun) describe() string {
	return fmt.Sprintf("stream-stream join within %s (grace %s, so nothing expires): %d orders and %d payments make %d pairs",
		JoinWithin, JoinGrace, j.ords, len(j.recs)-j.ords, len(j.want))
}

func (j *joinRun) identify(r *kgo.Record) (string, bool) {
	id := pairID(string(r.Key), string(r.Value))
	return id, j.want[id]
}

func (j *joinRun) expected() int { return len(j.want) }

func (j *joinRun) judge(out []*kgo.Record, res *Result) {
	v := judgePairs(j.want, out)
	res.JoinVerdict = &v
}

// JoinCheck is a seeded input for JoinPipeline with the judge of its
// output, for harnesses that run the pipeline themselves.
type JoinCheck struct{ run *joinRun }

// NewJoinCheck seeds n records over keys keys for the partitions of
// orders and payments, as verify does for PipelineJoin; their event
// times must span less than the join's grace, as verify's must.
func NewJoinCheck(orders, payments string, n, keys int, partitions int32, seed uint64) (JoinCheck, error) {
	o := Options{Pipeline: PipelineJoin, Records: n, Keys: keys, Partitions: partitions, Seed: seed}
	if err := o.validateEvents(); err != nil {
		return JoinCheck{}, err
	}
	return JoinCheck{newJoinRun(o, orders, payments)}, nil
}

// Records are the input, each to its own partition, in the order to
// produce them.
func (c JoinCheck) Records() []*kgo.Record {
	out := make([]*kgo.Record, len(c.run.recs))
	for i, r := range c.run.recs {
		out[i] = r.record()
	}
	return out
}

// Judge compares the pipeline's committed output with the pairs the seed
// makes, computed in plain Go.
func (c JoinCheck) Judge(out []*kgo.Record) JoinVerdict { return judgePairs(c.run.want, out) }
