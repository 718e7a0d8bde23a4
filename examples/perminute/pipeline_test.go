package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/topology"
)

// Each shop's minute is counted by the orders' own times and written
// once, when its task's stream time passes the minute's end plus the
// grace: stream time is per partition, so a closing order closes the
// minutes of the shops in its partition only. An order for a closed
// minute is late and skipped.
func TestOrdersPerMinute(t *testing.T) {
	// As run makes it: three partitions. Kafka's hash puts north and
	// south in partition 2, east in partition 0.
	d := eostest.New(t, pipeline(), eostest.DefaultPartitions(3))
	in := eostest.Input(d, "shop-orders", codec.JSON[Order]())
	out := eostest.Output(d, "orders-per-minute", codec.JSON[topology.Windowed[int64]]())
	minute := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	order := func(shop string, at time.Duration) {
		t.Helper()
		if err := in.Pipe(shop, Order{ID: fmt.Sprint(shop, at), Shop: shop, Cents: 100, At: minute.Add(at)}); err != nil {
			t.Fatal(err)
		}
	}
	closed := func() []string {
		var got []string
		for _, r := range out.ReadAll() {
			got = append(got, fmt.Sprintf("%s %s=%d", r.Key, r.Value.Window.Start.Format("15:04"), r.Value.Value))
		}
		return got
	}

	order("north", 10*time.Second)
	order("north", 50*time.Second)
	order("south", 20*time.Second)
	order("east", 30*time.Second)
	order("north", time.Minute+5*time.Second) // 15:04 still open: grace
	order("north", 59*time.Second)
	if got := closed(); len(got) != 0 {
		t.Fatalf("closed within the grace: %v", got)
	}
	order("north", time.Minute+grace) // closes 15:04 in partition 2
	if got, want := fmt.Sprint(closed()), "[north 15:04=3 south 15:04=1]"; got != want {
		t.Errorf("closed %s, want %s", got, want)
	}
	order("east", time.Minute+grace) // closes 15:04 in partition 0
	if got, want := fmt.Sprint(closed()), "[east 15:04=1]"; got != want {
		t.Errorf("closed %s, want %s", got, want)
	}
	order("south", 40*time.Second) // late
	if s := d.Stats(); s.Skipped != 1 {
		t.Errorf("Stats: %+v, want the late order skipped", s)
	}
}
