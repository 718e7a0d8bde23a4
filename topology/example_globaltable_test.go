package topology_test

import (
	"context"
	"fmt"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// Orders keyed by order id joined with a global table of products keyed
// by product id: the join's key comes from the order's value, so orders
// need not be partitioned by product. Every instance holds the whole
// product table. An order whose product has no row is dropped by
// JoinGlobal; LeftJoinGlobal would keep it with found false. A tombstone
// on the products topic deletes the row.
func ExampleJoinGlobal() {
	type order struct {
		Product string
		Qty     int
	}
	top := topology.New()
	products := topology.GlobalTableFrom(top, "products", codec.String(), state.Memory())
	orders := topology.Source(top, "orders", codec.JSON[order]())
	priced := topology.JoinGlobal(orders, products, "price",
		func(_ []byte, o order) []byte { return []byte(o.Product) },
		func(_ context.Context, _ []byte, o order, name string) (string, error) {
			return fmt.Sprintf("%d x %s", o.Qty, name), nil
		})
	topology.To(priced, "priced", codec.String())

	d, err := eostest.Open(top)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	out := eostest.Output(d, "priced", codec.String())
	pipe := func(topic, key, value string) {
		var v []byte // nil: a tombstone
		if value != "" {
			v = []byte(value)
		}
		if err := d.Pipe(topic, []byte(key), v); err != nil {
			fmt.Println(err)
		}
	}
	pipe("products", "p1", "teapot")
	pipe("orders", "o1", `{"Product":"p1","Qty":2}`)
	pipe("orders", "o2", `{"Product":"p2","Qty":1}`) // no such product: dropped
	pipe("products", "p1", "blue teapot")
	pipe("orders", "o3", `{"Product":"p1","Qty":1}`)
	pipe("products", "p1", "") // deleted
	pipe("orders", "o4", `{"Product":"p1","Qty":5}`)
	for _, r := range out.ReadAll() {
		fmt.Printf("%s: %s\n", r.Key, r.Value)
	}
	// Output:
	// o1: 2 x teapot
	// o3: 1 x blue teapot
}
