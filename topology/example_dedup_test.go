package topology_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/topology"
)

// Dedup charges each order once, however often it is delivered; the receipt
// is written for every record, so a batch that aborts writes its receipts
// again without charging again. Marking before the charge risks losing one
// if the process dies between mark and charge; marking after (the default)
// risks charging twice instead.
func ExampleDedup() {
	store, err := dedup.NewMemory() // redisdedup.New(url) or pgdedup.New(ctx, url) across instances
	if err != nil {
		panic(err)
	}
	charge := func(ctx context.Context, r topology.Record[string]) error {
		return nil // call the payment service with r.Value
	}
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	charged := topology.Dedup(orders, "charge", func(r topology.Record[string]) string { return string(r.Key) }, store, charge,
		topology.MarkBefore(), topology.DedupRetention(8*time.Hour), topology.FailClosed())
	topology.To(charged, "receipts", codec.String())
	top.OnError("charge", topology.Retry(3, 100*time.Millisecond, topology.Fail()))
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: orders (topic: orders, codec: string)
	//       --> charge
	//     Processor: charge (Dedup, mark before, retention 8h0m0s, fail closed)
	//       --> receipts
	//       <-- orders
	//       on error: retry(3, 100ms) then fail
	//     Sink: receipts (topic: receipts, codec: string)
	//       <-- charge
	//   Default on error: fail
}

// Counting page views where a lost view now and then is acceptable: a
// Bloom filter in Redis remembers 10 million ids an hour in two 14 MB bitmaps,
// and about 1 in 100 new views is taken for a repeat and not counted.
// Without AcceptFalsePositives, Validate refuses the store.
func ExampleAcceptFalsePositives() {
	store, err := redisdedup.NewBloom("redis://127.0.0.1:6379/0", "views", dedup.BloomOptions{
		Entries: 10_000_000, FalsePositiveRate: 0.01, Retention: time.Hour,
	})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	count := func(ctx context.Context, r topology.Record[string]) error {
		return nil // add one to the page's counter
	}
	top := topology.New()
	views := topology.Source(top, "page-views", codec.String())
	counted := topology.Dedup(views, "count", func(r topology.Record[string]) string { return string(r.Key) }, store, count,
		topology.DedupRetention(time.Hour), topology.AcceptFalsePositives())
	topology.To(counted, "counted-views", codec.String())
	if err := top.Validate(); err != nil {
		panic(err)
	}
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: page-views (topic: page-views, codec: string)
	//       --> count
	//     Processor: count (Dedup, mark after, retention 1h0m0s, fail open, Bloom filter: false positives skip about 1% of new ids)
	//       --> counted-views
	//       <-- page-views
	//     Sink: counted-views (topic: counted-views, codec: string)
	//       <-- count
	//   Default on error: fail
}
