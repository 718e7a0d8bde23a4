package processor_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/eosflow/eosflow/processor"
)

// User code gets a store through Context.Store, and can only read and
// write it: what keeps the guarantee (savepoints, commits, aborts,
// restores, wipes) must not be callable from a Process function, where
// one call could apply a batch that never committed.
func TestContextStoreOffersOnlyTheUserOperations(t *testing.T) {
	m, ok := reflect.TypeFor[processor.Context[string]]().MethodByName("Store")
	if !ok {
		t.Fatal("processor.Context has no Store method")
	}
	store := m.Type.Out(0)
	if store.Kind() != reflect.Interface {
		t.Fatalf("Context.Store returns %s, a concrete type whose every exported method user code can call; want an interface", store)
	}
	var got []string
	for i := range store.NumMethod() {
		got = append(got, store.Method(i).Name)
	}
	want := []string{"Delete", "Get", "Name", "Prefix", "Put", "Range", "Task"}
	if !slices.Equal(got, want) {
		t.Fatalf("the store user code gets has methods %v, want only %v", got, want)
	}
}
