package topology_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// Orders joined with their payments within 10 seconds, keeping the orders
// never paid: such an order comes out with found false only once stream
// time has passed it by twice the window plus the grace (here 25 s), when
// no payment that is not late can still join it, and with its own
// timestamp. A paid order never comes out unpaid.
func ExampleLeftJoinStreams() {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	paid := topology.LeftJoinStreams(orders, payments, "pay", topology.Within(10*time.Second).Grace(5*time.Second),
		func(_ context.Context, _ []byte, order, payment string, found bool) (string, error) {
			if !found {
				return order + " unpaid", nil
			}
			return order + " paid by " + payment, nil
		}, state.Memory(), codec.String(), codec.String())
	topology.To(paid, "paid", codec.String())

	d, err := eostest.Open(top)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	out := eostest.Output(d, "paid", codec.String())
	for _, r := range []struct {
		topic, key, value string
		sec               int64
	}{
		{"orders", "o1", "order 1", 0},
		{"payments", "o1", "card", 4}, // joined
		{"orders", "o2", "order 2", 10},
		{"orders", "o3", "order 3", 35}, // order 2 not closed yet: 10 + 25 = 35
		{"orders", "o4", "order 4", 36}, // now it is
	} {
		if err := d.Pipe(r.topic, []byte(r.key), []byte(r.value), eostest.InPartition(0), eostest.Timestamp(time.Unix(r.sec, 0))); err != nil {
			fmt.Println(err)
		}
	}
	for _, r := range out.ReadAll() {
		fmt.Printf("%s at %ds: %s\n", r.Key, r.Timestamp.Unix(), r.Value)
	}
	// Output:
	// o1 at 4s: order 1 paid by card
	// o2 at 10s: order 2 unpaid
}
