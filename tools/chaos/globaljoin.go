package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PipelineGlobalJoin left-joins orders with a global table of customers
// that the verifier updates, committed and aborted, while the workers run
// (GlobalJoinPipeline): judged order by order.
const PipelineGlobalJoin PipelineKind = "global-join"

// Settings of PipelineGlobalJoin.
const (
	// GlobalJoinNode is the LeftJoinGlobal node of GlobalJoinPipeline.
	GlobalJoinNode = "enrich"
	// globalTableName names the global table, and its store.
	globalTableName = "customers"
	// globalInitial is every seeded row's value, before any update.
	globalInitial = "v0"
	// globalNone stands in the output for a customer without a row.
	globalNone = "none"
)

// GlobalJoinPipeline is the global-table sample topology. Orders of in
// are keyed by order id, their value the customer ("c<k>"); the global
// table of topic table maps customers to their version ("v0", "v3", …),
// in a store of engine e. LeftJoinGlobal looks each order's customer up,
// a key taken from the value, so nothing is co-partitioned, and writes
// "<customer>=<version>" under the order's key to out, "<customer>=none"
// when the customer has no row. before runs ahead of each record; nil
// skips it.
func GlobalJoinPipeline(in, table, out string, e state.Engine, before func()) *topology.Topology {
	top := topology.New()
	customers := topology.GlobalTableFrom(top, table, codec.String(), e, topology.Named(globalTableName))
	src := topology.Peek(topology.Source(top, in, codec.String(), topology.Named("input")), "pace", func(context.Context, []byte, string) {
		if before != nil {
			before()
		}
	})
	joined := topology.LeftJoinGlobal(src, customers, GlobalJoinNode,
		func(_ []byte, customer string) []byte { return []byte(customer) },
		func(_ context.Context, _ []byte, customer, version string, found bool) (string, error) {
			if !found {
				version = globalNone
			}
			return customer + "=" + version, nil
		})
	topology.To(joined, out, codec.String(), topology.Named("output"))
	return top
}

// customerKind is what the run does with a customer's row.
type customerKind int

const (
	customerStable   customerKind = iota // seeded as v0, never updated
	customerChanging                     // seeded as v0, updated while the workers run
	customerAbsent                       // no row ever committed; aborted updates only
)

// kindOf sorts customer k: a tenth have no row, three tenths change, the
// rest keep their seeded row.
func kindOf(k int) customerKind {
	switch k % 10 {
	case 9:
		return customerAbsent
	case 0, 1, 2:
		return customerChanging
	}
	return customerStable
}

// globalPartitions is how many partitions the table topic has: one more
// than the orders', so the two are not co-partitioned.
func globalPartitions(orders int32) int32 { return orders + 1 }

// globalSeed makes n orders ("o<i>", each of one of keys customers at
// random, in partition i % partitions of orders) and the table's rows:
// "v0" for every customer that has one, in partition k % the table's.
func globalSeed(orders, table string, n, keys int, partitions int32, seed uint64, now time.Time) []eventRecord {
	rng := rand.New(rand.NewPCG(seed, seed^0x676c6f62))
	recs := make([]eventRecord, 0, n+keys)
	for k := range keys {
		if kindOf(k) != customerAbsent {
			recs = append(recs, eventRecord{topic: table, partition: int32(k) % globalPartitions(partitions),
				key: customerKey(k), value: globalInitial, ts: now})
		}
	}
	for i := range n {
		recs = append(recs, eventRecord{topic: orders, partition: int32(i) % partitions,
			key: "o" + strconv.Itoa(i), value: customerKey(rng.IntN(keys)), ts: now})
	}
	return recs
}

// customerKey is customer k's key in the table and value in the orders.
func customerKey(k int) string { return "c" + strconv.Itoa(k) }

// globalRun seeds, updates and judges one run of PipelineGlobalJoin.
type globalRun struct {
	recs   []eventRecord
	orders map[string]string // order key → its customer
	kind   map[string]customerKind
	w      *tableWriter
	counts [3]int // orders per customerKind
	// base and event are the run's client options and its reporter, from
	// startUpdates: judge reads the table with them.
	base  []kgo.Opt
	event func(string, ...any)
	// partitions are the orders' partitions; the table has one more.
	partitions int32
}

func newGlobalRun(o Options, orders, table string) *globalRun {
	recs := globalSeed(orders, table, o.Records, o.Keys, o.Partitions, o.Seed, time.Now())
	g := &globalRun{recs: recs, orders: map[string]string{}, kind: map[string]customerKind{}, partitions: o.Partitions}
	var changing []string
	for k := range o.Keys {
		g.kind[customerKey(k)] = kindOf(k)
		if kindOf(k) != customerStable {
			changing = append(changing, customerKey(k))
		}
	}
	for _, r := range recs {
		if r.topic == orders {
			g.orders[r.key] = r.value
			g.counts[g.kind[r.value]]++
		}
	}
	g.w = newTableWriter(table, globalPartitions(o.Partitions), changing, o.Seed)
	return g
}

func (g *globalRun) records() []eventRecord { return g.recs }

func (g *globalRun) describe() string {
	return fmt.Sprintf("%d orders left-joined with a global table of %d customers (%d partitions against %d, keyed by a field of the order): %d orders of customers whose row never changes, %d of customers updated while the workers run (committed and aborted), %d of customers without a row",
		len(g.orders), len(g.kind), globalPartitions(g.partitions), g.partitions, g.counts[customerStable], g.counts[customerChanging], g.counts[customerAbsent])
}

// identify names an output record by its order: a repeat is a duplicate
// whatever version it joined.
func (g *globalRun) identify(r *kgo.Record) (string, bool) {
	c, _, ok := strings.Cut(string(r.Value), "=")
	return string(r.Key), ok && g.orders[string(r.Key)] == c
}

func (g *globalRun) expected() int { return len(g.orders) }

// startUpdates has the table updated while the workers run, through a
// transactional producer of id txnID made from base.
func (g *globalRun) startUpdates(base []kgo.Opt, txnID string, event func(string, ...any)) {
	g.base, g.event = base, event
	g.w.start(base, txnID, event)
}

// stopUpdates ends the updates and waits for the writer; idempotent.
func (g *globalRun) stopUpdates() { g.w.stop() }

// judge reads the table: it settles the uncertain transactions and counts
// the aborted updates that reached the log; then it judges out by the
// seed and the settled updates.
func (g *globalRun) judge(out []*kgo.Record, res *Result) {
	g.w.stop()
	t := g.w.outcome()
	var read tableRead
	if g.base != nil {
		var err error
		if read, err = readTable(context.Background(), g.base, g.w.table); err != nil {
			g.event("reading the table %s after the run: %v", g.w.table, err)
		}
	}
	t.settle(read.visible)
	v := judgeGlobal(g, t, out)
	v.TableAbortedPresent = abortedPresent(read.all, t.aborted)
	res.GlobalVerdict = &v
}
