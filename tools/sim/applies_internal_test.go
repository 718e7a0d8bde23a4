package sim

import (
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
)

// The read-back check can fail: a store reopened with batches applied on
// End's word is reported when it applies one of its own before those
// read back, and not once they did (Checked) or the store was wiped.
func TestABatchOnEndsWordBeforeTheReadBackIsReported(t *testing.T) {
	fs := vfs.NewMem()
	task := state.Task{Topic: input, Partition: 0}
	var reported [][]int64
	open := func() state.Backend {
		e := applyEngine{pebble.New(pebble.FS(fs)), func() error { return nil }, func(_ string, _ state.Task, inherited []int64, _ int64) {
			reported = append(reported, inherited)
		}}
		b, err := e.Open("/s", "st", task)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	w := []state.Write{{Key: []byte("k"), Value: []byte("v")}}
	b := open()
	must(t, b.Apply(w, state.Position{Offset: 4, Checked: state.NoOffset, Unchecked: []int64{4}}))
	must(t, b.Close())

	b = open() // the next incarnation, offset 4 not read back
	must(t, b.Apply(w, state.Position{Offset: 9, Checked: state.NoOffset, Unchecked: []int64{4, 9}}))
	if len(reported) != 1 || !slices.Equal(reported[0], []int64{4}) {
		t.Fatalf("a batch applied before the read-back: reported %v, want [[4]]", reported)
	}
	must(t, b.Close())

	b = open() // this one reads them back first
	must(t, b.Apply(nil, state.Position{Offset: 9, Checked: 9}))
	must(t, b.Apply(w, state.Position{Offset: 12, Checked: 9, Unchecked: []int64{12}}))
	must(t, b.Close())
	b = open() // and this one wipes its store
	must(t, b.(state.Wiper).Wipe())
	must(t, b.Apply(w, state.Position{Offset: 20, Checked: state.NoOffset, Unchecked: []int64{20}}))
	must(t, b.Close())
	if len(reported) != 1 {
		t.Fatalf("after a read-back and a wipe: reported %v, want only the first", reported)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
