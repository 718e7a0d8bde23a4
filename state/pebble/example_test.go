package pebble_test

import (
	"fmt"
	"os"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
)

// A pebble store keeps its data and applied changelog offset on disk:
// reopened, it restores only what its changelog gained since, and Inspect
// finds it without opening the pipeline.
func Example() {
	dir, err := os.MkdirTemp("", "state")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	engine := pebble.New(pebble.CacheSize(1<<20), pebble.MemTableSize(1<<20))
	task := state.Task{Topic: "words", Partition: 0}

	s, err := store.Open(engine, dir, "word-counts", task)
	if err != nil {
		panic(err)
	}
	if err := s.Put([]byte("be"), []byte("2")); err != nil {
		panic(err)
	}
	if err := s.Commit(41); err != nil { // the changelog offset of the batch's last change
		panic(err)
	}
	if err := s.Close(); err != nil {
		panic(err)
	}

	stores, err := pebble.Inspect(dir)
	if err != nil {
		panic(err)
	}
	for _, st := range stores {
		fmt.Println(st.Name, st.Task, "applied offset", st.Offset)
	}

	s, err = store.Open(engine, dir, "word-counts", task)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	v, _, err := s.Get([]byte("be"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("reopened at offset %d: be=%s\n", s.Offset(), v)
	// Output:
	// word-counts words/0 applied offset 41
	// reopened at offset 41: be=2
}
