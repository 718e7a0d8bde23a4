package topology_test

import (
	"context"
	"fmt"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// Two tables joined by key, users and their plans: a change on either
// side emits the joined row when the other side has a row, and a row
// deleted from either side (a tombstone on its topic) deletes the joined
// row. ToTable writes that delete as a tombstone, so a compacted
// "user-plans" topic drops the row. A tombstone where there was no joined
// row emits nothing.
func ExampleJoinTables() {
	top := topology.New()
	users := topology.TableFrom(top, "users", codec.String(), state.Memory())
	plans := topology.TableFrom(top, "plans", codec.String(), state.Memory())
	joined := topology.JoinTables(users, plans, "join", func(_ context.Context, _ []byte, user, plan string) (string, error) {
		return user + " on " + plan, nil
	})
	topology.ToTable(joined, "user-plans", codec.String())

	d, err := eostest.Open(top)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	out := eostest.Output(d, "user-plans", codec.String())
	for _, r := range []struct{ topic, key, value string }{
		{"users", "ada", "Ada"},
		{"plans", "ada", "pro"}, // joined
		{"plans", "bob", "free"},
		{"users", "ada", ""},       // deleted: the joined row too
		{"plans", "bob", ""},       // deleted, but bob had no user: no joined row
		{"users", "ada", "Ada L."}, // joined again with the plan kept
		{"plans", "ada", ""},       // deleted from the other side
	} {
		var value []byte // nil: a tombstone
		if r.value != "" {
			value = []byte(r.value)
		}
		if err := d.Pipe(r.topic, []byte(r.key), value); err != nil {
			fmt.Println(err)
		}
	}
	for _, r := range out.ReadAll() {
		if r.Tombstone {
			fmt.Printf("%s deleted\n", r.Key)
			continue
		}
		fmt.Printf("%s = %s\n", r.Key, r.Value)
	}
	// Output:
	// ada = Ada on pro
	// ada deleted
	// ada = Ada L. on pro
	// ada deleted
}
