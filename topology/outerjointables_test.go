package topology_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// side names a row's side for the joiner's output: "-" for a missing one.
func side(v string, found bool) string {
	if !found {
		return "-"
	}
	return v
}

// tablesLeftJoined is tablesJoined with LeftJoinTables.
func tablesLeftJoined() *topology.Topology {
	top := topology.New()
	users := topology.TableFrom(top, "users", codec.String(), state.Memory())
	plans := topology.TableFrom(top, "plans", codec.String(), state.Memory())
	joined := topology.LeftJoinTables(users, plans, "user-plans", func(_ context.Context, _ []byte, u, p string, found bool) (string, error) {
		return u + " on " + side(p, found), nil
	})
	topology.ToTable(joined, "user-plans", codec.String(), topology.Named("out"))
	return top
}

// tablesOuterJoined is tablesJoined with OuterJoinTables.
func tablesOuterJoined() *topology.Topology {
	top := topology.New()
	users := topology.TableFrom(top, "users", codec.String(), state.Memory())
	plans := topology.TableFrom(top, "plans", codec.String(), state.Memory())
	joined := topology.OuterJoinTables(users, plans, "user-plans", func(_ context.Context, _ []byte, u, p string, uok, pok bool) (string, error) {
		return side(u, uok) + " on " + side(p, pok), nil
	})
	topology.ToTable(joined, "user-plans", codec.String(), topology.Named("out"))
	return top
}

// A left join keeps a user's row without a plan; a plan deleted under a
// user updates the row, and the user deleted deletes it.
func TestLeftJoinTables(t *testing.T) {
	eachFusion(t, tablesLeftJoined, "user-plans", func(r *tableRig) {
		r.expect("plan without a user", r.set("plans", "a", "gold"))
		r.expect("user with a plan", r.set("users", "a", "ann"), "a=ann on gold")
		r.expect("user without a plan", r.set("users", "b", "bob"), "b=bob on -")
		r.expect("plan deleted under a user", r.del("plans", "a"), "a=ann on -")
		r.expect("plan for a user", r.set("plans", "b", "free"), "b=bob on free")
		r.expect("user deleted", r.del("users", "b"), "b=<deleted>")
		r.expect("plan deleted without a user", r.del("plans", "b"))
		r.expect("user never held", r.del("users", "c"))
	})
}

// An outer join keeps a row while either side has one.
func TestOuterJoinTables(t *testing.T) {
	eachFusion(t, tablesOuterJoined, "user-plans", func(r *tableRig) {
		r.expect("plan without a user", r.set("plans", "a", "gold"), "a=- on gold")
		r.expect("user with a plan", r.set("users", "a", "ann"), "a=ann on gold")
		r.expect("user deleted, plan left", r.del("users", "a"), "a=- on gold")
		r.expect("plan deleted, nothing left", r.del("plans", "a"), "a=<deleted>")
		r.expect("user without a plan", r.set("users", "b", "bob"), "b=bob on -")
		r.expect("user deleted, nothing left", r.del("users", "b"), "b=<deleted>")
		r.expect("row never held", r.del("plans", "b"))
	})
}

// Random sets and deletes on both sides leave the joined table, as its
// updates and tombstones build it, equal to the join of the two tables,
// computed in plain Go, after every step.
func TestTableJoinsMatchTheirModel(t *testing.T) {
	for _, c := range []struct {
		name         string
		build        func() *topology.Topology
		keepL, keepR bool
	}{
		{"inner", tablesJoined, false, false},
		{"left", tablesLeftJoined, true, false},
		{"outer", tablesOuterJoined, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachFusion(t, c.build, "user-plans", func(r *tableRig) {
				rng := rand.New(rand.NewPCG(7, 11))
				users, plans, got := map[string]string{}, map[string]string{}, map[string]string{}
				for step := range 400 {
					key, topic := fmt.Sprint("k", rng.IntN(5)), "users"
					rows := users
					if rng.IntN(2) == 0 {
						topic, rows = "plans", plans
					}
					var out []string
					if rng.IntN(3) == 0 {
						delete(rows, key)
						out = r.del(topic, key)
					} else {
						v := fmt.Sprint("v", step)
						rows[key] = v
						out = r.set(topic, key, v)
					}
					applyOutput(t, got, out)
					want := joinModel(users, plans, c.keepL, c.keepR)
					if !maps.Equal(got, want) {
						t.Fatalf("step %d (%s %s): joined table %v, want %v", step, topic, key, got, want)
					}
				}
			})
		})
	}
}

// applyOutput applies "key=value" and "key=<deleted>" lines to table.
func applyOutput(t *testing.T, table map[string]string, out []string) {
	t.Helper()
	for _, line := range out {
		var k, v string
		for i := range line {
			if line[i] == '=' {
				k, v = line[:i], line[i+1:]
				break
			}
		}
		if v == "<deleted>" {
			if _, ok := table[k]; !ok {
				t.Fatalf("tombstone for %s, which the joined table does not hold", k)
			}
			delete(table, k)
			continue
		}
		table[k] = v
	}
}

// joinModel is the join of users and plans: inner, left (keepL) or outer
// (both), in the joiners' format.
func joinModel(users, plans map[string]string, keepL, keepR bool) map[string]string {
	out := map[string]string{}
	for k, u := range users {
		p, ok := plans[k]
		if ok || keepL {
			out[k] = u + " on " + side(p, ok)
		}
	}
	for k, p := range plans {
		if _, ok := users[k]; !ok && keepR {
			out[k] = "- on " + p
		}
	}
	return out
}
