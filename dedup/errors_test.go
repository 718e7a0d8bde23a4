package dedup_test

import (
	"errors"
	"net"
	"testing"

	"github.com/eosflow/eosflow/dedup"
)

// A StoreError names store, address, operation and id, and asks whether the
// server is reachable, and how to check, only when the error says it was
// not.
func TestStoreErrorMessage(t *testing.T) {
	refused := &dedup.StoreError{Store: "redis", Addr: "127.0.0.1:1", Op: "mark", ID: "m-1", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	if got, want := refused.Error(), `dedup: redis at 127.0.0.1:1: mark "m-1": dial: connection refused: is the server up and reachable (not stopped, not cut off)? check with: redis-cli -h 127.0.0.1 -p 1 ping`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	denied := &dedup.StoreError{Store: "postgres", Addr: "db:5432", Op: "purge", Err: errors.New("permission denied for table eosflow_dedup")}
	if got, want := denied.Error(), `dedup: postgres at db:5432: purge: permission denied for table eosflow_dedup`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(denied, dedup.ErrStore) {
		t.Error("a StoreError does not match ErrStore")
	}
}
