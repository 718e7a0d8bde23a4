package chaos

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/verdict"
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

// GlobalSnapshotPipeline is GlobalJoinPipeline with its table replaced
// by rows, a copy (customer → version) read once at the worker's start
// and never kept current: orders come out as "<customer>=<version>", or
// "<customer>=none" for a customer rows lacks. It is the negative
// control of the verifier's probe phase (ProblemGlobalStale); every row
// it joins was committed, so it passes every other check.
func GlobalSnapshotPipeline(in, out string, rows map[string]string, before func()) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.String(), topology.Named("input"))
	joined := topology.MapValues(src, GlobalJoinNode, func(_ context.Context, customer string) (string, error) {
		if before != nil {
			before()
		}
		version, ok := rows[customer]
		if !ok {
			version = globalNone
		}
		return customer + "=" + version, nil
	})
	topology.To(joined, out, codec.String(), topology.Named("output"))
	return top
}

// snapshotTopology is GlobalSnapshotPipeline over the table o.Table as
// read now, read_committed up to its last stable offsets.
func (o WorkerOptions) snapshotTopology(before func()) (*topology.Topology, func(), error) {
	opts, err := kafkautil.ConnOptions(o.Config)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(o.Config.ConnectTimeout, config.DefaultConnectTimeout))
	defer cancel()
	recs, err := verdict.Drain(ctx, opts, o.Table, 0, 200*time.Millisecond)
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("chaos: reading the table %s: %w", o.Table, ctx.Err())
	}
	if err != nil {
		return nil, nil, err
	}
	rows := map[string]string{}
	for _, r := range recs {
		rows[string(r.Key)] = string(r.Value)
	}
	return GlobalSnapshotPipeline(o.In, o.Out, rows, before), func() {}, nil
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

	// read is the table as read once the writer stopped, at readAt; its
	// visible is nil until a read succeeded, readErr the last failure.
	read    tableRead
	readAt  time.Time
	readErr error
	// lagBound is Options.TableLag. waves are the probe waves produced
	// and probes their orders (key → customer); probeNote says why no
	// wave was produced.
	lagBound  time.Duration
	waves     []probeWave
	probes    map[string]string
	probeNote string
}

func newGlobalRun(o Options, orders, table string) *globalRun {
	recs := globalSeed(orders, table, o.Records, o.Keys, o.Partitions, o.Seed, time.Now())
	g := &globalRun{recs: recs, orders: map[string]string{}, kind: map[string]customerKind{}, partitions: o.Partitions,
		lagBound: o.TableLag, probes: map[string]string{}, probeNote: "the probe phase did not run"}
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
	return fmt.Sprintf("%d orders left-joined with a global table of %d customers (%d partitions against %d, keyed by a field of the order): %d orders of customers whose row never changes, %d of customers updated while the workers run (committed and aborted), %d of customers without a row; after the last fault, late orders must join their customers' last rows within %s",
		len(g.orders), len(g.kind), globalPartitions(g.partitions), g.partitions, g.counts[customerStable], g.counts[customerChanging], g.counts[customerAbsent], g.lagBound)
}

// identify names an output record by its order, of the seed or a probe:
// a repeat is a duplicate whatever version it joined. It reads only what
// newGlobalRun wrote, so the live reader may call it while probes are
// produced.
func (g *globalRun) identify(r *kgo.Record) (string, bool) {
	c, _, ok := strings.Cut(string(r.Value), "=")
	if !ok {
		return string(r.Key), false
	}
	if pc, probe := probeCustomer(string(r.Key)); probe {
		return string(r.Key), pc == c
	}
	return string(r.Key), g.orders[string(r.Key)] == c
}

func (g *globalRun) expected() int { return len(g.orders) + len(g.probes) }

// customerOf is the customer of order, of the seed or a probe produced,
// and whether there is one.
func (g *globalRun) customerOf(order string) (string, bool) {
	if c, ok := g.orders[order]; ok {
		return c, true
	}
	c, ok := g.probes[order]
	return c, ok
}

// startUpdates has the table updated while the workers run, through a
// transactional producer of id txnID made from base.
func (g *globalRun) startUpdates(base []kgo.Opt, txnID string, event func(string, ...any)) {
	g.base, g.event = base, event
	g.w.start(base, txnID, event)
}

// stopUpdates ends the updates and waits for the writer; idempotent.
func (g *globalRun) stopUpdates() { g.w.stop() }

// judge reads the table, unless the probe phase did: it settles the
// uncertain transactions and counts the aborted updates that reached the
// log; then it judges out by the seed, the settled updates and the
// table's last rows.
func (g *globalRun) judge(out []*kgo.Record, res *Result) {
	g.w.stop()
	t := g.w.outcome()
	g.readTableOnce(context.Background())
	t.settle(g.read.visible)
	v := judgeGlobal(g, t, out)
	v.TableAbortedPresent = abortedPresent(g.read.all, t.aborted)
	res.GlobalVerdict = &v
}

// readTableOnce reads the table into g.read, once the writer stopped,
// unless a read succeeded already; a failed read leaves g.read empty.
func (g *globalRun) readTableOnce(ctx context.Context) {
	if g.read.visible != nil || g.base == nil {
		return
	}
	g.read, g.readErr = readTable(ctx, g.base, g.w.table)
	g.readAt = time.Now()
	if g.readErr != nil {
		g.event("reading the table %s after the run: %v", g.w.table, g.readErr)
	}
}
