package topology_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// clicksWithProfiles joins clicks (keyed by user) with the table of
// profiles (keyed by user): an inner join, or a left join.
func clicksWithProfiles(left bool) *topology.Topology {
	top := topology.New()
	clicks := topology.Source(top, "clicks", codec.String())
	profiles := topology.TableFrom(top, "profiles", codec.String(), state.Memory())
	var out topology.Stream[string]
	if left {
		out = topology.LeftJoin(clicks, profiles, "enrich", func(_ context.Context, _ []byte, page, profile string, found bool) (string, error) {
			if !found {
				profile = "unknown"
			}
			return page + " by " + profile, nil
		})
	} else {
		out = topology.Join(clicks, profiles, "enrich", func(_ context.Context, _ []byte, page, profile string) (string, error) {
			return page + " by " + profile, nil
		})
	}
	topology.To(out, "enriched", codec.String(), topology.Named("out"))
	return top
}

// A stream joins the table's row under its key as the row stands: rows
// set, replaced and deleted (a tombstone) by the table's topic; the
// stream's partition p and the table's partition p are one task.
func TestStreamTableJoin(t *testing.T) {
	r := newRig(t, clicksWithProfiles(false))
	if got := r.must("clicks", 1, "ann", "/home"); len(got) != 0 {
		t.Fatalf("no row yet, inner join: %v", got)
	}
	r.must("profiles", 1, "ann", "Ann (admin)")
	if got := r.must("clicks", 1, "ann", "/home"); !slices.Equal(got, []string{"enriched:ann=/home by Ann (admin)"}) {
		t.Fatalf("joined: %v", got)
	}
	r.must("profiles", 1, "ann", "Ann (user)")
	if got := r.must("clicks", 1, "ann", "/cart"); !slices.Equal(got, []string{"enriched:ann=/cart by Ann (user)"}) {
		t.Fatalf("after the row changed: %v", got)
	}
	if _, _, err := r.sendTombstone("profiles", 1, "ann"); err != nil {
		t.Fatal(err)
	}
	if got := r.must("clicks", 1, "ann", "/bye"); len(got) != 0 {
		t.Fatalf("after the row was deleted: %v", got)
	}
	// Partition 0 is another task: its own rows.
	r.must("profiles", 1, "bob", "Bob")
	if got := r.must("clicks", 0, "bob", "/home"); len(got) != 0 {
		t.Fatalf("a row of partition 1 joined a record of partition 0: %v", got)
	}
	if got, want := r.e.CoPartitioned(), [][]string{{"clicks", "profiles"}}; len(got) != 1 || !slices.Equal(got[0], want[0]) {
		t.Fatalf("CoPartitioned() = %v, want %v", got, want)
	}
	if spec := r.e.StoreSpecs(); len(spec) != 1 || spec[0].Source != "clicks" {
		t.Fatalf("the table's tasks must be named by the group's first topic: %+v", spec)
	}
}

// LeftJoin keeps records without a row.
func TestStreamTableLeftJoin(t *testing.T) {
	r := newRig(t, clicksWithProfiles(true))
	if got := r.must("clicks", 0, "cy", "/home"); !slices.Equal(got, []string{"enriched:cy=/home by unknown"}) {
		t.Fatalf("left join without a row: %v", got)
	}
}

// A stream can join an aggregation's table: here each order learns how
// many orders its customer has placed so far.
func TestJoinAggregationTable(t *testing.T) {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	counts := topology.Count(topology.GroupByKey(orders, "by-customer"), "orders-so-far", state.Memory())
	topology.ToTable(counts, "order-counts", codec.JSON[int64](), topology.Named("counts-out"))
	payments := topology.Source(top, "payments", codec.String())
	joined := topology.Join(payments, counts, "with-count", func(_ context.Context, _ []byte, p string, n int64) (string, error) {
		return p + " after " + strings.Repeat("*", int(n)), nil
	})
	topology.To(joined, "out", codec.String())
	r := newRig(t, top)
	r.must("orders", 2, "ann", "o1")
	r.must("orders", 2, "ann", "o2")
	if got := r.must("payments", 2, "ann", "p1"); !slices.Equal(got, []string{"out:ann=p1 after **"}) {
		t.Fatalf("joined with the count: %v", got)
	}
}

// Joins that cannot work are reported by Validate.
func TestJoinMistakes(t *testing.T) {
	swap := func(_ context.Context, k []byte, v string) ([]byte, string, error) { return []byte(v), string(k), nil }
	join := func(_ context.Context, _ []byte, a, b string) (string, error) { return a + b, nil }
	t.Run("re-keyed stream", func(t *testing.T) {
		top := topology.New()
		clicks := topology.Map(topology.Source(top, "clicks", codec.String()), "swap", swap)
		profiles := topology.TableFrom(top, "profiles", codec.String(), state.Memory())
		topology.To(topology.Join(clicks, profiles, "j", join), "out", codec.String())
		err := top.Validate()
		if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), `node "j": Join follows "swap" (Map)`) || !strings.Contains(err.Error(), "Through") {
			t.Fatalf("Validate() = %v", err)
		}
		// Through a repartition topic, it is fine.
		top = topology.New()
		clicks = topology.Map(topology.Source(top, "clicks", codec.String()), "swap", swap)
		clicks = topology.Through(clicks, "by-user", topology.Repartition(codec.String()))
		profiles = topology.TableFrom(top, "profiles", codec.String(), state.Memory())
		topology.To(topology.Join(clicks, profiles, "j", join), "out", codec.String())
		if err := top.Validate(); err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(top, engine.AppID("app"))
		if err != nil {
			t.Fatal(err)
		}
		if got := e.CoPartitioned(); len(got) != 1 || !slices.Equal(got[0], []string{"app-by-user-repartition", "profiles"}) {
			t.Fatalf("CoPartitioned() = %v", got)
		}
	})
	t.Run("windowed table", func(t *testing.T) {
		top := topology.New()
		clicks := topology.Source(top, "clicks", codec.String())
		w := topology.CountWindows(topology.GroupByKey(clicks, "g"), "w", topology.Tumbling(60e9), state.Memory())
		topology.To(topology.Join(clicks, w, "j", func(_ context.Context, _ []byte, a string, b topology.Windowed[int64]) (string, error) { return a, nil }),
			"out", codec.String())
		if err := top.Validate(); err == nil || !strings.Contains(err.Error(), `Join's table "w" keeps no store to look rows up in`) {
			t.Fatalf("Validate() = %v", err)
		}
	})
}

// Two tables joined: a change of either side's row emits the joined row
// when the other side has one.
func TestJoinTables(t *testing.T) {
	top := topology.New()
	users := topology.TableFrom(top, "users", codec.String(), state.Memory())
	plans := topology.TableFrom(top, "plans", codec.String(), state.Memory())
	joined := topology.JoinTables(users, plans, "user-plans", func(_ context.Context, _ []byte, u, p string) (string, error) {
		return u + " on " + p, nil
	})
	topology.ToTable(joined, "user-plans", codec.String(), topology.Named("out"))
	r := newRig(t, top)
	if got := r.must("users", 0, "u1", "ada"); len(got) != 0 {
		t.Fatalf("no plan yet: %v", got)
	}
	if got := r.must("plans", 0, "u1", "pro"); !slices.Equal(got, []string{"user-plans:u1=ada on pro"}) {
		t.Fatalf("plan set: %v", got)
	}
	if got := r.must("users", 0, "u1", "Ada L."); !slices.Equal(got, []string{"user-plans:u1=Ada L. on pro"}) {
		t.Fatalf("user renamed: %v", got)
	}
	if got := r.e.CoPartitioned(); len(got) != 1 || !slices.Equal(got[0], []string{"plans", "users"}) {
		t.Fatalf("CoPartitioned() = %v", got)
	}
}
