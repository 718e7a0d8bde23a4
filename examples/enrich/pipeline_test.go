package main

import (
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
)

// Each click gets its user's profile as it stands when the click is
// processed; a click of a user without a profile is dropped, and a
// tombstone in profiles deletes the row.
func TestClicksEnrichedWithProfiles(t *testing.T) {
	// As run makes them: clicks and profiles co-partitioned, three each.
	d := eostest.New(t, pipeline(), eostest.DefaultPartitions(3))
	clicks := eostest.Input(d, "clicks", codec.JSON[Click]())
	profiles := eostest.Input(d, "profiles", codec.JSON[Profile]())
	out := eostest.Output(d, "enriched-clicks", codec.JSON[View]())
	click := func(user, page string) {
		t.Helper()
		if err := clicks.Pipe(user, Click{Page: page}); err != nil {
			t.Fatal(err)
		}
	}

	// A row seeded in the store is there as if read from profiles.
	eostest.Store(d, "profiles", codec.String(), codec.JSON[Profile]()).Put("u2", Profile{Name: "grace", Plan: "free"})
	if err := profiles.Pipe("u1", Profile{Name: "ada", Plan: "free"}); err != nil {
		t.Fatal(err)
	}
	click("u1", "/home")
	click("u2", "/docs")
	click("u5", "/home") // no profile
	if err := profiles.Pipe("u1", Profile{Name: "ada", Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	click("u1", "/pricing")
	if err := d.Pipe("profiles", []byte("u1"), nil); err != nil { // a tombstone
		t.Fatal(err)
	}
	click("u1", "/cart")

	var got []View
	for _, r := range out.ReadAll() {
		got = append(got, r.Value)
	}
	want := []View{{"/home", "ada", "free"}, {"/docs", "grace", "free"}, {"/pricing", "ada", "pro"}}
	if len(got) != len(want) {
		t.Fatalf("enriched %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("click %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
