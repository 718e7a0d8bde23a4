package topology_test

import (
	"context"
	"fmt"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// An outer join of users and their plans keeps a row while either side
// has one: a plan with no user yet, a user whose plan was deleted. The row
// is deleted only when neither side has one left.
func ExampleOuterJoinTables() {
	top := topology.New()
	users := topology.TableFrom(top, "users", codec.String(), state.Memory())
	plans := topology.TableFrom(top, "plans", codec.String(), state.Memory())
	joined := topology.OuterJoinTables(users, plans, "join", func(_ context.Context, _ []byte, user, plan string, hasUser, hasPlan bool) (string, error) {
		if !hasUser {
			user = "(no user)"
		}
		if !hasPlan {
			plan = "(no plan)"
		}
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
		{"plans", "ada", "pro"}, // a plan alone
		{"users", "ada", "Ada"}, // joined
		{"plans", "ada", ""},    // deleted: the user is left
		{"users", "ada", ""},    // deleted: nothing is left
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
	// ada = (no user) on pro
	// ada = Ada on pro
	// ada = Ada on (no plan)
	// ada deleted
}
