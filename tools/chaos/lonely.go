package chaos

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The checks of PipelineOuterJoin's lonely records, named as in
// Result.Failed; its pairs fail the pair checks.
const (
	// ProblemLonelyMissing: a record that joined nothing never came out
	// alone: a lost expiry.
	ProblemLonelyMissing Problem = "lonely_missing"
	// ProblemLonelyDuplicates: a lonely record came out again.
	ProblemLonelyDuplicates Problem = "lonely_duplicates"
	// ProblemLonelyJoined: a record that joined came out alone as well.
	ProblemLonelyJoined Problem = "lonely_joined"
	// ProblemLonelyUnexpected: a record came out alone that the seed does
	// not hold.
	ProblemLonelyUnexpected Problem = "lonely_unexpected"
	// ProblemLonelyNone: the seed made no lonely order, no lonely payment,
	// or none that expires before the closing records: the run cannot
	// show what it is for.
	ProblemLonelyNone Problem = "lonely_none"
)

// LonelyVerdict is the record-by-record judgement of the records that
// PipelineOuterJoin must emit alone: each exactly once, when it expires,
// and never one that joined.
type LonelyVerdict struct {
	// LonelyOrders and LonelyPayments are how many records of each side
	// join nothing in the seed.
	LonelyOrders   int `json:"lonely_orders"`
	LonelyPayments int `json:"lonely_payments"`
	// LonelyEarly is how many of them the body's own stream time expires,
	// while the workers run, before the closing records do.
	LonelyEarly int `json:"lonely_early"`
	// LonelySeen is how many distinct lonely records came out.
	LonelySeen int `json:"lonely_seen"`
	// LonelyMissing is how many never came out: lost expiries.
	LonelyMissing int `json:"lonely_missing"`
	// LonelyDuplicates is how many output records repeat a lonely record.
	LonelyDuplicates int `json:"lonely_duplicates"`
	// LonelyJoined is how many output records emit alone a record that
	// joined a partner.
	LonelyJoined int `json:"lonely_joined"`
	// LonelyUnexpected is how many output records emit alone a record the
	// seed does not hold.
	LonelyUnexpected int `json:"lonely_unexpected"`
	// LonelyExamples names the first few differences, for the logs.
	LonelyExamples []string `json:"lonely_examples,omitempty"`
}

// OK reports whether every lonely record came out once and nothing else
// came out alone.
func (v LonelyVerdict) OK() bool {
	return v.LonelyMissing == 0 && v.LonelyDuplicates == 0 && v.LonelyJoined == 0 && v.LonelyUnexpected == 0
}

// String is the lonely verdict on one line, for logs.
func (v LonelyVerdict) String() string {
	return fmt.Sprintf("lonely_orders=%d lonely_payments=%d lonely_early=%d lonely_seen=%d lonely_missing=%d lonely_duplicates=%d lonely_joined=%d lonely_unexpected=%d",
		v.LonelyOrders, v.LonelyPayments, v.LonelyEarly, v.LonelySeen, v.LonelyMissing, v.LonelyDuplicates, v.LonelyJoined, v.LonelyUnexpected)
}

// alone reports whether r is an outer join's record emitted alone, and
// names that record by "<key>/<value>".
func alone(r *kgo.Record) (string, bool) {
	o, p, ok := strings.Cut(string(r.Value), "+")
	switch {
	case ok && p == outerNone && o != outerNone:
		return string(r.Key) + "/" + o, true
	case ok && o == outerNone && p != outerNone:
		return string(r.Key) + "/" + p, true
	}
	return "", false
}

// judgeOuter compares the output of PipelineOuterJoin with m: the pairs
// as judgePairs does, and the records emitted alone one by one.
func judgeOuter(m outerModel, out []*kgo.Record) (JoinVerdict, LonelyVerdict) {
	v := LonelyVerdict{LonelyOrders: m.leftAlone, LonelyPayments: m.rightAlone, LonelyEarly: m.early}
	example := func(format string, a ...any) { addExample(&v.LonelyExamples, format, a...) }
	var pairs []*kgo.Record
	seen := map[string]int{}
	for _, r := range out {
		rec, ok := alone(r)
		if !ok {
			pairs = append(pairs, r)
			continue
		}
		id := pairID(string(r.Key), string(r.Value))
		seen[id]++
		switch {
		case m.joined[rec]:
			v.LonelyJoined++
			example("%s came out alone, but it joined", id)
		case !m.lonely[id]:
			v.LonelyUnexpected++
			example("%s came out alone, but the seed holds no such record", id)
		case seen[id] > 1:
			v.LonelyDuplicates++
			example("%s came out alone %d times", id, seen[id])
		}
	}
	v.LonelyMissing = addUnseen(&v.LonelyExamples, m.lonely, seen, "%s never came out alone")
	v.LonelySeen = len(m.lonely) - v.LonelyMissing
	return judgePairs(m.pairs, pairs), v
}

// lonelyProblems names the lonely checks r fails, through add.
func lonelyProblems(r Result, add func(cond bool, name Problem, format string, a ...any)) {
	v := r.LonelyVerdict
	if v == nil {
		return
	}
	add(v.LonelyOrders == 0 || v.LonelyPayments == 0 || v.LonelyEarly == 0, ProblemLonelyNone,
		"the seed has %d lonely orders and %d lonely payments, %d expiring before the closing records: the run shows no expiry under faults; raise --records or lower --keys",
		v.LonelyOrders, v.LonelyPayments, v.LonelyEarly)
	add(v.LonelyMissing > 0, ProblemLonelyMissing, "%d of %d records that joined nothing never came out alone: lost expiries",
		v.LonelyMissing, v.LonelyOrders+v.LonelyPayments)
	add(v.LonelyDuplicates > 0, ProblemLonelyDuplicates, "%d lonely records came out again", v.LonelyDuplicates)
	add(v.LonelyJoined > 0, ProblemLonelyJoined, "%d output records emit alone a record that joined", v.LonelyJoined)
	add(v.LonelyUnexpected > 0, ProblemLonelyUnexpected, "%d output records emit alone a record the seed does not hold", v.LonelyUnexpected)
}
