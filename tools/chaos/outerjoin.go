package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PipelineOuterJoin outer-joins orders with payments within a window of
// event time, with a short grace, so that records that joined nothing
// expire and come out alone while the workers run (OuterJoinPipeline):
// judged pair by pair and lonely record by lonely record.
const PipelineOuterJoin PipelineKind = "outer-join"

// Join settings of PipelineOuterJoin. The seed's event times rise and
// jump back or ahead by at most JoinWithin, so within a partition stream
// time runs at most 2×JoinWithin ahead of any record: less than the window
// plus OuterGrace, so no record is late, and no partner can come after a
// record expired (that needs 2×window plus the grace). The pairs and the
// lonely records thus follow from the seed alone, while records expire all
// through the run.
const (
	// OuterGrace is the grace of PipelineOuterJoin's window.
	OuterGrace = 10 * time.Second
	// OuterNode is the OuterJoinStreams node of OuterJoinPipeline.
	OuterNode = "outer"
	// outerNone stands in the output for the side without a record.
	outerNone = "none"
	// outerCloseAfter is how far past the last record of the body each
	// partition's closing record lies: beyond 2×window+grace, so it
	// expires every record before it.
	outerCloseAfter = 2*JoinWithin + OuterGrace + time.Minute
)

// OuterJoinPipeline is the outer-joining sample topology. Orders ("o…")
// and payments ("p…") share the topic in, so that each partition's order,
// and with it stream time, is the seed's whatever the fetches deliver
// (records of two topics are merged only as far as they were fetched, so
// the join could see one topic run ahead and drop the other's records as
// late). Branch splits them; OuterJoinStreams joins each order with each
// payment of its key at most JoinWithin apart (grace OuterGrace), in
// stores of engine e, writing "<order>+<payment>" to out, "none" for the
// side that found no partner once it expired. before runs ahead of each
// record; nil skips it.
func OuterJoinPipeline(in, out string, e state.Engine, before func()) *topology.Topology {
	top := topology.New()
	src := topology.Peek(topology.Source(top, in, codec.String(), topology.Named("input")), "pace", func(context.Context, []byte, string) {
		if before != nil {
			before()
		}
	})
	sides := topology.Branch(src, "sides",
		func(_ []byte, v string) bool { return strings.HasPrefix(v, "o") },
		func(_ []byte, v string) bool { return strings.HasPrefix(v, "p") })
	joined := topology.OuterJoinStreams(sides[0], sides[1], OuterNode, topology.Within(JoinWithin).Grace(OuterGrace),
		func(_ context.Context, _ []byte, o, p string, hasO, hasP bool) (string, error) {
			if !hasO {
				o = outerNone
			}
			if !hasP {
				p = outerNone
			}
			return o + "+" + p, nil
		}, e, codec.String(), codec.String())
	topology.To(joined, out, codec.String(), topology.Named("output"))
	return top
}

// outerSeed makes n records for topic: n - partitions of them as joinSeed
// makes them, orders and payments alike in topic, then one order per
// partition, under a key of its own, outerCloseAfter past the latest, that
// expires every record before it and never expires itself.
func outerSeed(topic string, n, keys int, partitions int32, seed uint64, now time.Time) []eventRecord {
	body := n - int(partitions)
	recs := joinSeed(topic, topic, body, keys, partitions, seed, now.Add(-outerCloseAfter))
	var last time.Time
	for _, r := range recs {
		if r.ts.After(last) {
			last = r.ts
		}
	}
	for p := range partitions {
		recs = append(recs, eventRecord{topic: topic, partition: p, key: closeKey + strconv.Itoa(int(p)),
			value: "o-close", ts: last.Add(outerCloseAfter)})
	}
	return recs
}

// outerModel is what OuterJoinPipeline must write for a seed, computed in
// plain Go: every pair within JoinWithin, every order and payment that
// joined nothing, and every record that joined (which must never come out
// alone), each as pairID of its output.
type outerModel struct {
	pairs  map[string]bool
	lonely map[string]bool
	// joined names, by "<key>/<value>", every record that found a partner.
	joined map[string]bool
	// leftAlone and rightAlone count the lonely orders and payments;
	// early those expired by the body's own stream time, before the
	// closing records.
	leftAlone, rightAlone, early int
}

// expectOuter computes the outerModel of recs, whose closing records are
// the last partitions ones.
func expectOuter(recs []eventRecord, partitions int32) outerModel {
	body := recs[:len(recs)-int(partitions)]
	sided := make([]eventRecord, len(body))
	stream := map[int32]time.Time{}
	for i, r := range body {
		sided[i] = r
		sided[i].topic = r.value[:1] // "o" or "p": expectedPairs tells the sides by topic
		stream[r.partition] = later(stream[r.partition], r.ts)
	}
	m := outerModel{pairs: expectedPairs(sided, "o"), lonely: map[string]bool{}, joined: map[string]bool{}}
	for id := range m.pairs {
		key, v, _ := strings.Cut(id, "/")
		o, p, _ := strings.Cut(v, "+")
		m.joined[key+"/"+o], m.joined[key+"/"+p] = true, true
	}
	for _, r := range body {
		if m.joined[r.key+"/"+r.value] {
			continue
		}
		if r.value[0] == 'o' {
			m.lonely[pairID(r.key, r.value+"+"+outerNone)] = true
			m.leftAlone++
		} else {
			m.lonely[pairID(r.key, outerNone+"+"+r.value)] = true
			m.rightAlone++
		}
		if r.ts.Before(stream[r.partition].Add(-2*JoinWithin - OuterGrace)) {
			m.early++
		}
	}
	return m
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// outerRun seeds and judges one run of PipelineOuterJoin.
type outerRun struct {
	recs []eventRecord
	m    outerModel
}

func newOuterRun(o Options, topic string) *outerRun {
	recs := outerSeed(topic, o.Records, o.Keys, o.Partitions, o.Seed, time.Now())
	return &outerRun{recs: recs, m: expectOuter(recs, o.Partitions)}
}

func (j *outerRun) records() []eventRecord { return j.recs }

func (j *outerRun) describe() string {
	return fmt.Sprintf("stream-stream outer join within %s, grace %s, orders and payments in one topic: %d pairs, %d lonely orders and %d lonely payments (%d of them expire before the closing records)",
		JoinWithin, OuterGrace, len(j.m.pairs), j.m.leftAlone, j.m.rightAlone, j.m.early)
}

func (j *outerRun) identify(r *kgo.Record) (string, bool) {
	id := pairID(string(r.Key), string(r.Value))
	return id, j.m.pairs[id] || j.m.lonely[id]
}

func (j *outerRun) expected() int { return len(j.m.pairs) + len(j.m.lonely) }

func (j *outerRun) judge(out []*kgo.Record, res *Result) {
	pv, lv := judgeOuter(j.m, out)
	res.JoinVerdict, res.LonelyVerdict = &pv, &lv
}
