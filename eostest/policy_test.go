package eostest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// Payment is a test record, as JSON.
type Payment struct {
	ID    string `json:"id"`
	Cents int64  `json:"cents"`
}

// A record its source cannot decode fails at the source node, whose
// policy dead-letters it unchanged, with headers saying why and whence.
func TestUndecodableRecordDeadLettered(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "payments", codec.JSON[Payment]())
	topology.To(in, "payments-valid", codec.JSON[Payment](), topology.Named("valid"))
	top.OnError("payments", topology.DeadLetter("payments-dlq"))
	d := eostest.New(t, top)
	if err := d.Pipe("payments", []byte("acct-1"), []byte(`{"id":"p1","cents":5}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.Pipe("payments", []byte("acct-2"), []byte("{not json"), eostest.Header("origin", []byte("web"))); err != nil {
		t.Fatalf("Pipe of an undecodable record under DeadLetter: %v, want nil", err)
	}
	dls := d.DeadLetters("payments-dlq")
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	if dl.Node != "payments" || dl.Topic != "payments" || dl.Offset != 1 || string(dl.Key) != "acct-2" ||
		string(dl.Value) != "{not json" || !strings.Contains(dl.Error, "json") {
		t.Errorf("dead letter: %+v", dl)
	}
	if string(dl.Headers[0].Value) != "web" {
		t.Errorf("the record's own headers were not kept first: %+v", dl.Headers)
	}
	if got := eostest.Output(d, "payments-valid", codec.JSON[Payment]()).ReadAll(); len(got) != 1 || got[0].Value.ID != "p1" {
		t.Errorf("valid payments: %+v", got)
	}
	if s := d.Stats(); s.DeadLettered != 1 || s.Processed != 1 {
		t.Errorf("Stats: %+v", s)
	}
}

// ledger keeps each payment's id in a store, then checks it; check's
// policy settles payments over the limit.
func ledger(policy topology.ErrorPolicy, attempts *int) *topology.Topology {
	top := topology.New()
	top.AddStore("seen", state.Memory())
	in := topology.Source(top, "payments", codec.JSON[Payment](), topology.Named("in"))
	noted := topology.Process(in, "note", func(ctx processor.Context[Payment], r processor.Record[Payment]) error {
		seen, err := processor.KV(ctx, "seen", codec.String(), codec.JSON[int64]())
		if err != nil {
			return err
		}
		ctx.Emit(r)
		return seen.Put(r.Value.ID, r.Value.Cents)
	}, topology.UseStores("seen"))
	checked := topology.MapValues(noted, "check", func(_ context.Context, p Payment) (Payment, error) {
		*attempts++
		if p.Cents > 1000 {
			return p, errors.New("over the limit")
		}
		return p, nil
	})
	topology.To(checked, "payments-ok", codec.JSON[Payment](), topology.Named("out"))
	top.OnError("check", policy)
	return top
}

// A record that fails a node is retried without waiting, then
// dead-lettered; the store writes it made upstream are undone, as the
// runtime undoes a record's writes when it is not processed.
func TestFailingRecordDeadLettered(t *testing.T) {
	attempts := 0
	policy := topology.Retry(3, time.Hour, topology.DeadLetter("payments-dlq"))
	d := eostest.New(t, ledger(policy, &attempts))
	in := eostest.Input(d, "payments", codec.JSON[Payment]())
	seen := eostest.Store(d, "seen", codec.String(), codec.JSON[int64]())
	start := time.Now()
	pipe(t, in, "acct", Payment{ID: "big", Cents: 5000})
	pipe(t, in, "acct", Payment{ID: "small", Cents: 5})
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the retries waited %s", took)
	}
	if attempts != 4 {
		t.Errorf("check called %d times, want 3 for the failing record and 1 for the other", attempts)
	}
	dls := d.DeadLetters("payments-dlq")
	if len(dls) != 1 || dls[0].Node != "check" || dls[0].Error != "over the limit" || dls[0].Offset != 0 {
		t.Fatalf("dead letters: %+v", dls)
	}
	if _, ok := seen.Get("big"); ok {
		t.Error("the dead-lettered record's store write was kept")
	}
	if cents, ok := seen.Get("small"); !ok || cents != 5 {
		t.Errorf("small = %d (%v), want 5", cents, ok)
	}
	if s := d.Stats(); s.Retries != 2 || s.DeadLettered != 1 || s.Processed != 1 {
		t.Errorf("Stats: %+v", s)
	}
}

// Skip drops the failing record and its store writes, with no error.
func TestSkipPolicy(t *testing.T) {
	attempts := 0
	d := eostest.New(t, ledger(topology.Skip(), &attempts))
	in := eostest.Input(d, "payments", codec.JSON[Payment]())
	pipe(t, in, "acct", Payment{ID: "big", Cents: 5000})
	if got := eostest.Store(d, "seen", codec.String(), codec.JSON[int64]()).All(); len(got) != 0 {
		t.Errorf("store after a skipped record: %+v", got)
	}
	if s := d.Stats(); s.Skipped != 1 {
		t.Errorf("Stats: %+v", s)
	}
}

// A sink writing to a topic chosen per record that does not exist, or
// an output over the topic's max.message.bytes, is an error of the sink,
// settled by its policy, as the runtime settles it.
func TestSinkErrorsGoToItsPolicy(t *testing.T) {
	build := func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "events", codec.String(), topology.Named("in"))
		topology.ToTopicFunc(in, "by-type", func(_ context.Context, r topology.Record[string]) (string, error) {
			kind, _, _ := strings.Cut(r.Value, ":")
			return "events-" + kind, nil
		}, codec.String())
		top.OnError("by-type", topology.DeadLetter("events-dlq"))
		return top
	}
	d := eostest.New(t, build(), eostest.Topics("events-click"), eostest.MaxMessageBytes("events-click", 200))
	in := eostest.Input(d, "events", codec.String())
	pipe(t, in, "u1", "click:home")
	pipe(t, in, "u1", "view:home")
	pipe(t, in, "u1", "click:"+strings.Repeat("x", 200))
	if got := eostest.Output(d, "events-click", codec.String()).ReadAll(); len(got) != 1 || got[0].Value != "click:home" {
		t.Errorf("events-click: %+v", got)
	}
	dls := d.DeadLetters("events-dlq")
	if len(dls) != 2 || !strings.Contains(dls[0].Error, processor.ErrUnknownTopic.Error()) ||
		!strings.Contains(dls[1].Error, processor.ErrRecordTooLarge.Error()) {
		t.Errorf("dead letters: %+v", dls)
	}
}
