package eostest_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// A word count: lines are split into words, re-keyed by word through a
// repartition topic, and counted. In a test, use eostest.New(t, top),
// which fails the test where Open returns an error or panics.
func Example() {
	top := topology.New()
	lines := topology.Source(top, "lines", codec.String())
	words := topology.FlatMap(lines, "split", func(_ context.Context, _ []byte, line string) ([]topology.KV[string], error) {
		var out []topology.KV[string]
		for _, w := range strings.Fields(line) {
			out = append(out, topology.KV[string]{Key: []byte(w), Value: w})
		}
		return out, nil
	})
	counts := topology.Count(topology.GroupByKey(words, "by-word", topology.Repartition(codec.String())), "counts", state.Memory())
	topology.ToTable(counts, "word-counts", codec.JSON[int64]())

	d, err := eostest.Open(top, eostest.DefaultPartitions(2))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := eostest.Input(d, "lines", codec.String())
	out := eostest.Output(d, "word-counts", codec.JSON[int64]())
	for _, line := range []string{"to be or", "not to be"} {
		if err := in.PipeValue(line); err != nil {
			fmt.Println(err)
		}
	}
	var got []string
	for _, r := range out.ReadAll() {
		got = append(got, fmt.Sprintf("%s=%d", r.Key, r.Value))
	}
	fmt.Println(strings.Join(got, " "))
	n, _ := eostest.Store(d, "counts", codec.String(), codec.Int64()).Get("be")
	fmt.Println("be:", n)
	// Output:
	// to=1 be=1 or=1 not=1 to=2 be=2
	// be: 2
}
