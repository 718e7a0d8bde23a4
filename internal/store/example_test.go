package store_test

import (
	"fmt"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
)

// A batch counts words in the overlay; the runtime produces Changes to
// the changelog in the batch's transaction and, once it committed,
// commits the store at the changelog offset of the last change.
func Example() {
	s, err := store.Open(state.Memory(), "", "word-counts", state.Task{Topic: "words", Partition: 0})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	counts, err := state.NewKV(s, state.StringKey(), codec.JSON[int]())
	if err != nil {
		panic(err)
	}
	for _, w := range []string{"to", "be", "or", "not", "to", "be"} {
		n, _, err := counts.Get(w)
		if err != nil {
			panic(err)
		}
		if err := counts.Put(w, n+1); err != nil {
			panic(err)
		}
	}
	changes := s.Changes()
	fmt.Println("changelog records:", len(changes))
	if err := s.Commit(int64(len(changes) - 1)); err != nil {
		panic(err)
	}
	for e, err := range counts.All() {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Key, e.Value)
	}
	fmt.Println("applied offset:", s.Offset())
	// Output:
	// changelog records: 4
	// be 2
	// not 1
	// or 1
	// to 2
	// applied offset: 3
}
