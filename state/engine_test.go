package state

import (
	"testing"
)

func TestStoreDir(t *testing.T) {
	if got, want := StoreDir("/state", "counts", Task{Topic: "eu-orders", Partition: 12}), "/state/eu-orders-12/counts"; got != want {
		t.Fatalf("StoreDir = %q, want %q", got, want)
	}
	if task, ok := parseTaskDir("eu-orders-12"); !ok || task != (Task{Topic: "eu-orders", Partition: 12}) {
		t.Fatalf("parseTaskDir of StoreDir's task directory = %v, %v", task, ok)
	}
}
