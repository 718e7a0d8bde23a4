package eos

import (
	"context"
	"testing"
)

// A wake that comes between two polls (tasks assigned while the loop ran
// timers) ends the next poll at once, not after its whole idle wait; a
// wake is used once.
func TestAWakeBetweenPollsEndsTheNextPoll(t *testing.T) {
	var w pollWake
	w.wake()
	first, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.set(cancel)
	if first.Err() == nil {
		t.Fatal("a wake between polls left the next poll waiting")
	}
	w.set(nil)
	second, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	w.set(cancel2)
	if second.Err() != nil {
		t.Fatal("one wake ended two polls")
	}
	w.wake()
	if second.Err() == nil {
		t.Fatal("a wake during a poll did not end it")
	}
}
