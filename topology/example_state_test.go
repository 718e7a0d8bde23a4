package topology_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
)

// Count keeps a count per key in a store named after its node, and emits
// each record's key with its new count. FlatMap gives the words as keys,
// so the words of every line go through a repartition topic to the task
// that counts them. The internal topics take the application id the
// pipeline runs under.
func ExampleCount() {
	top := topology.New()
	lines := topology.Source(top, "lines", codec.String())
	words := topology.FlatMap(lines, "split", func(_ context.Context, _ []byte, line string) ([]topology.KV[string], error) {
		var out []topology.KV[string]
		for _, w := range strings.Fields(line) {
			out = append(out, topology.KV[string]{Key: []byte(w), Value: w})
		}
		return out, nil
	})
	counts := topology.Count(topology.GroupByKey(words, "by-word", topology.Repartition(codec.String())), "counts", state.Memory())
	topology.To(topology.ToStream(counts, "count-updates"), "word-counts", codec.JSON[int64]())
	fmt.Println(top.Validate())
	fmt.Print(top.Describe())
	// Output:
	// <nil>
	// Topology
	//   Sub-topology: 0
	//     Source: lines (topic: lines, codec: string)
	//       --> split
	//     Processor: split (FlatMap)
	//       --> by-word
	//       <-- lines
	//     Sink: by-word (GroupByKey, repartition topic: <app_id>-by-word-repartition, codec: string)
	//       <-- split
	//   Sub-topology: 1
	//     Source: by-word-repartition-source (repartition topic: <app_id>-by-word-repartition, codec: string)
	//       --> counts
	//     Processor: counts (Count, stores: counts)
	//       --> count-updates
	//       <-- by-word-repartition-source
	//     Processor: count-updates (ToStream)
	//       --> word-counts
	//       <-- counts
	//     Sink: word-counts (topic: word-counts, codec: json)
	//       <-- count-updates
	//   Repartition topic: <app_id>-by-word-repartition (partitions: as many as the largest of lines)
	//       written by: by-word, read by: by-word-repartition-source
	//   Store: counts (engine: memory, changelog: <app_id>-counts-changelog)
	//       used by: counts
	//   Default on error: fail
}

// Aggregate folds each key's values into an aggregate of another type,
// here the number and sum of a customer's orders, and ToTable writes every
// update to a topic (a compacted one keeps each customer's latest).
func ExampleAggregate() {
	type totals struct {
		Orders int     `json:"orders"`
		Sum    float64 `json:"sum"`
	}
	top := topology.New()
	orders := topology.Source(top, "orders-by-customer", codec.JSON[float64]())
	byCustomer := topology.GroupByKey(orders, "by-customer")
	sums := topology.Aggregate(byCustomer, "customer-totals",
		func() totals { return totals{} },
		func(_ context.Context, _ []byte, amount float64, acc totals) (totals, error) {
			return totals{Orders: acc.Orders + 1, Sum: acc.Sum + amount}, nil
		},
		pebble.New(), codec.JSON[totals]())
	topology.ToTable(sums, "customer-totals", codec.JSON[totals]())
	top.OnError("customer-totals", topology.Skip()) // e.g. orders without a customer key
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: orders-by-customer (topic: orders-by-customer, codec: json)
	//       --> by-customer
	//     Processor: by-customer (GroupByKey)
	//       --> customer-totals
	//       <-- orders-by-customer
	//     Processor: customer-totals (Aggregate, stores: customer-totals)
	//       --> customer-totals
	//       <-- by-customer
	//       on error: skip
	//     Sink: customer-totals (topic: customer-totals, codec: json)
	//       <-- customer-totals
	//   Store: customer-totals (engine: pebble, changelog: <app_id>-customer-totals-changelog)
	//       used by: customer-totals
	//   Default on error: fail
}

// A Process function uses the stores connected to its node, here through
// processor.KV for typed keys and values: it passes on a record only the
// first time its key is seen.
func ExampleProcess_store() {
	top := topology.New()
	events := topology.Source(top, "events", codec.Bytes())
	top.AddStore("seen", state.Memory())
	firsts := topology.Process(events, "first-only", func(ctx processor.Context[[]byte], r processor.Record[[]byte]) error {
		seen, err := processor.KV(ctx, "seen", state.StringKey(), codec.JSON[bool]())
		if err != nil {
			return err
		}
		_, dup, err := seen.Get(string(r.Key))
		if err != nil || dup {
			return err
		}
		ctx.Emit(r)
		return seen.Put(string(r.Key), true)
	}, topology.UseStores("seen"))
	topology.To(firsts, "events-deduped", codec.Bytes())
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: events (topic: events, codec: bytes)
	//       --> first-only
	//     Processor: first-only (Process, stores: seen)
	//       --> events-deduped
	//       <-- events
	//     Sink: events-deduped (topic: events-deduped, codec: bytes)
	//       <-- first-only
	//   Store: seen (engine: memory, changelog: <app_id>-seen-changelog)
	//       used by: first-only
	//   Default on error: fail
}

// GroupBy counts orders per customer though they are keyed by order id:
// each order goes, under its customer, through the repartition topic of
// the GroupBy node, and the count runs in a second sub-topology that reads
// it.
func ExampleGroupBy() {
	type order struct {
		Customer string
		Total    int
	}
	top := topology.New()
	orders := topology.Source(top, "orders", codec.JSON[order]())
	byCustomer := topology.GroupBy(orders, "by-customer", func(_ context.Context, _ []byte, o order) ([]byte, error) {
		return []byte(o.Customer), nil
	}, topology.Repartition(codec.JSON[order]()))
	topology.ToTable(topology.Count(byCustomer, "per-customer", pebble.New()), "orders-per-customer", codec.JSON[int64]())
	fmt.Println(top.Validate())
	fmt.Print(top.Describe())
	// Output:
	// <nil>
	// Topology
	//   Sub-topology: 0
	//     Source: orders (topic: orders, codec: json)
	//       --> by-customer
	//     Sink: by-customer (GroupBy, repartition topic: <app_id>-by-customer-repartition, codec: json)
	//       <-- orders
	//   Sub-topology: 1
	//     Source: by-customer-repartition-source (repartition topic: <app_id>-by-customer-repartition, codec: json)
	//       --> per-customer
	//     Processor: per-customer (Count, stores: per-customer)
	//       --> orders-per-customer
	//       <-- by-customer-repartition-source
	//     Sink: orders-per-customer (topic: orders-per-customer, codec: json)
	//       <-- per-customer
	//   Repartition topic: <app_id>-by-customer-repartition (partitions: as many as the largest of orders)
	//       written by: by-customer, read by: by-customer-repartition-source
	//   Store: per-customer (engine: pebble, changelog: <app_id>-per-customer-changelog)
	//       used by: per-customer
	//   Default on error: fail
}
