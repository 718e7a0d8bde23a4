package main

import (
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
)

func TestWordCount(t *testing.T) {
	d := eostest.New(t, pipeline())
	lines := eostest.Input(d, "lines", codec.String())
	for _, l := range []string{"the cat sat", "the dog", "The Cat"} {
		if err := lines.PipeValue(l); err != nil { // no key: Pipe(key, value) sets one
			t.Fatal(err)
		}
	}
	last := map[string]int64{} // a count is written at every update; keep the last
	for _, r := range eostest.Output(d, "word-counts", codec.JSON[int64]()).ReadAll() {
		last[string(r.Key)] = r.Value
	}
	if last["the"] != 3 || last["cat"] != 2 || last["sat"] != 1 || last["dog"] != 1 || len(last) != 4 {
		t.Fatalf("counts %v", last)
	}
}
