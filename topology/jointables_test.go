package topology_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// errJoinFailed is what the joiner of tablesJoined returns for the plan
// "fail".
var errJoinFailed = errors.New("join failed")

// tablesJoined joins the table of users with the table of plans (both
// keyed by user) and writes the joined table to "user-plans".
func tablesJoined() *topology.Topology {
	top := topology.New()
	users := topology.TableFrom(top, "users", codec.String(), state.Memory())
	plans := topology.TableFrom(top, "plans", codec.String(), state.Memory())
	joined := topology.JoinTables(users, plans, "user-plans", func(_ context.Context, _ []byte, u, p string) (string, error) {
		if p == "fail" {
			return "", errJoinFailed
		}
		return u + " on " + p, nil
	})
	topology.ToTable(joined, "user-plans", codec.String(), topology.Named("out"))
	return top
}

// tableRig pipes table rows and tombstones into a topology on the test
// driver and reads what its output topic gets.
type tableRig struct {
	t   *testing.T
	d   *eostest.Driver
	out *eostest.OutputTopic[string]
}

// eachFusion runs fn on the topology build makes, fused and unfused
// (deletes run on whichever path applies).
func eachFusion(t *testing.T, build func() *topology.Topology, output string, fn func(r *tableRig)) {
	for _, c := range []struct {
		name string
		top  func() *topology.Topology
	}{
		{"fused", build},
		{"unfused", func() *topology.Topology { return topology.Unfused(build()) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := eostest.New(t, c.top())
			fn(&tableRig{t: t, d: d, out: eostest.Output(d, output, codec.String())})
		})
	}
}

// set pipes a row; del a tombstone. Both return what the output topic
// got, as "key=value" or "key=<deleted>".
func (r *tableRig) set(topic, key, value string) []string {
	r.t.Helper()
	if err := r.d.Pipe(topic, []byte(key), []byte(value)); err != nil {
		r.t.Fatalf("%s %s=%s: %v", topic, key, value, err)
	}
	return r.read()
}

func (r *tableRig) del(topic, key string) []string {
	r.t.Helper()
	if err := r.d.Pipe(topic, []byte(key), nil); err != nil {
		r.t.Fatalf("%s %s deleted: %v", topic, key, err)
	}
	return r.read()
}

func (r *tableRig) read() []string {
	var got []string
	for _, rec := range r.out.ReadAll() {
		if rec.Tombstone {
			got = append(got, string(rec.Key)+"=<deleted>")
			continue
		}
		got = append(got, fmt.Sprintf("%s=%s", rec.Key, rec.Value))
	}
	return got
}

// expect fails the test unless got is want.
func (r *tableRig) expect(what string, got []string, want ...string) {
	r.t.Helper()
	if !slices.Equal(got, want) {
		r.t.Fatalf("%s: output %q, want %q", what, got, want)
	}
}

// A row deleted from the left table deletes the joined row: the output
// topic gets the key with a nil value, which compaction turns into no row.
func TestJoinTablesLeftDelete(t *testing.T) {
	eachFusion(t, tablesJoined, "user-plans", func(r *tableRig) {
		r.expect("user set", r.set("users", "u1", "ada"))
		r.expect("plan set", r.set("plans", "u1", "pro"), "u1=ada on pro")
		r.expect("user deleted", r.del("users", "u1"), "u1=<deleted>")
		r.expect("plan changed without a user", r.set("plans", "u1", "team"))
		r.expect("user back", r.set("users", "u1", "Ada L."), "u1=Ada L. on team")
	})
}

// A row deleted from the right table deletes the joined row too.
func TestJoinTablesRightDelete(t *testing.T) {
	eachFusion(t, tablesJoined, "user-plans", func(r *tableRig) {
		r.set("users", "u1", "ada")
		r.expect("plan set", r.set("plans", "u1", "pro"), "u1=ada on pro")
		r.expect("plan deleted", r.del("plans", "u1"), "u1=<deleted>")
		r.expect("user renamed without a plan", r.set("users", "u1", "Ada L."))
		r.expect("plan back", r.set("plans", "u1", "team"), "u1=Ada L. on team")
	})
}

// A tombstone emits nothing where there was no joined row: for a key the
// deleted side does not hold, for one the other side does not hold, and
// for a row already deleted. The row is deleted all the same.
func TestJoinTablesDeleteWithoutJoinedRow(t *testing.T) {
	eachFusion(t, tablesJoined, "user-plans", func(r *tableRig) {
		r.set("plans", "u1", "pro")
		r.expect("a user never set deleted", r.del("users", "u1"))
		r.set("users", "u2", "bob")
		r.expect("a user without a plan deleted", r.del("users", "u2"))
		r.expect("the deleted user's plan set", r.set("plans", "u2", "pro"))
		r.expect("a plan never set deleted", r.del("plans", "u3"))
		// Control: the same key once joined deletes once.
		r.set("users", "u1", "ada")
		r.expect("joined row deleted", r.del("plans", "u1"), "u1=<deleted>")
		r.expect("deleted again", r.del("plans", "u1"))
		r.expect("the other side deleted after", r.del("users", "u1"))
	})
}

// A tombstone of an aborted batch reaches no one, and deletes nothing:
// the row is still there for the batch that redoes it.
func TestJoinTablesAbortedDelete(t *testing.T) {
	eachFusion(t, tablesJoined, "user-plans", func(r *tableRig) {
		r.set("users", "u1", "ada")
		r.set("plans", "u1", "pro")
		r.set("users", "u2", "bob")
		err := r.d.Batch(func() error {
			if err := r.d.Pipe("users", []byte("u1"), nil); err != nil {
				return err
			}
			return r.d.Pipe("plans", []byte("u2"), []byte("fail"))
		})
		if !errors.Is(err, errJoinFailed) {
			r.t.Fatalf("the batch should abort on the failing join, got %v", err)
		}
		r.expect("aborted batch", r.read())
		r.expect("the delete redone", r.del("users", "u1"), "u1=<deleted>")
	})
}

// ToTable of a table read with TableFrom writes its deletes too; ToStream
// carries only the updates, and an aggregation's table deletes nothing.
func TestTableDeletesDownstream(t *testing.T) {
	build := func() *topology.Topology {
		top := topology.New()
		users := topology.TableFrom(top, "users", codec.String(), state.Memory())
		topology.ToTable(users, "users-copy", codec.String())
		topology.To(topology.ToStream(users, "changes"), "user-changes", codec.String())
		return top
	}
	eachFusion(t, build, "users-copy", func(r *tableRig) {
		changes := eostest.Output(r.d, "user-changes", codec.String())
		r.expect("row set", r.set("users", "u1", "ada"), "u1=ada")
		r.expect("row deleted", r.del("users", "u1"), "u1=<deleted>")
		r.expect("deleted again", r.del("users", "u1"))
		if got := changes.ReadAll(); len(got) != 1 || got[0].Tombstone || got[0].Value != "ada" {
			r.t.Fatalf("the stream of changes got %+v, want the update only", got)
		}
	})
}
