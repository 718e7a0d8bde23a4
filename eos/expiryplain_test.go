package eos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
)

// In a plain session an expired entry that fails under Fail stops Run as
// a failing record does: the records before the one that expired it are
// committed, since their outputs are already written, and not redone.
func TestExpiryFailureCommitsTheRecordsBeforeItInPlainSessions(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "payments", "echo", "matched")
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	topology.To(orders, "echo", codec.String(), topology.Named("echo-out"))
	matched := topology.OuterJoinStreams(orders, payments, "match", topology.Within(10*time.Second).Grace(5*time.Second),
		func(_ context.Context, _ []byte, o, p string, _, hasP bool) (string, error) {
			if o == "bad" && !hasP {
				return "", errors.New("no payment for a bad order")
			}
			return o + "+" + p, nil
		}, state.Memory(), codec.String(), codec.String())
	topology.To(matched, "matched", codec.String(), topology.Named("out"))
	cl := env.Client(t)
	produceAt(t, cl, "orders", 10, "o1", "bad")
	produceAt(t, cl, "orders", 40, "t1", "tick")
	x := conformance.Start(t, env.Config("app", "a", config.AtLeastOnce), top)

	err := x.Wait(t, 60*time.Second)
	var ee *processor.ExpiryError
	if !errors.As(err, &ee) || ee.Node != "match" || string(ee.Key) != "o1" {
		t.Fatalf("Run: %v, want an ExpiryError naming the join and o1", err)
	}
	if s := x.R.Stats(); s.Committed != 1 || s.Redone != 0 || s.RecordsIn != 1 {
		t.Fatalf("Stats %+v: want the batch of o1 committed, nothing redone", s)
	}
	if got := conformance.Drain(t, env, "echo", 1); len(got) != 1 || string(got[0].Key) != "o1" {
		t.Fatalf("echo %v: want o1 once", got)
	}
}
