package topology_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/topology"
)

// Dedup charges each order once, however often it is delivered; the receipt
// is written for every record, so a batch that aborts writes its receipts
// again without charging again. Marking before the charge risks losing one
// if the process dies between mark and charge; marking after (the default)
// risks charging twice instead.
func ExampleDedup() {
	store, err := dedup.NewMemory() // dedup.NewRedis(url) or dedup.NewPostgres(ctx, url) across instances
	if err != nil {
		panic(err)
	}
	charge := func(ctx context.Context, r topology.Record[string]) error {
		return nil // call the payment service with r.Value
	}
	top := topology.New("payments")
	orders := topology.Source(top, "orders", "orders", codec.String())
	charged := topology.Dedup(orders, "charge", func(r topology.Record[string]) string { return string(r.Key) }, store, charge,
		topology.MarkBefore(), topology.DedupRetention(8*time.Hour), topology.FailClosed())
	topology.To(charged, "receipts", "receipts", codec.String())
	top.OnError("charge", topology.Retry(3, 100*time.Millisecond, topology.Fail()))
	fmt.Print(top.Describe())
	// Output:
	// Topology: payments
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
