package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Emit reaches every child, EmitTo only the named one; an unknown child is
// an error that names the children and goes to the node's policy; and a
// failing record's emits are dropped.
func TestProcessContext(t *testing.T) {
	top := topology.New()
	src := topology.Source(top, "in", codec.String())
	routed := topology.Process(src, "route", func(ctx processor.Context[string], r processor.Record[string]) error {
		if ctx.Node() != "route" || ctx.Err() != nil {
			return fmt.Errorf("bad context: node %q err %v", ctx.Node(), ctx.Err())
		}
		ctx.Emit(processor.Record[string]{Key: r.Key, Value: "all:" + r.Value})
		switch r.Value {
		case "audit":
			return ctx.EmitTo("audit", processor.Record[string]{Key: r.Key, Value: "only-audit"})
		case "typo":
			return ctx.EmitTo("adit", r)
		}
		return nil
	})
	topology.To(routed, "main", codec.String())
	topology.To(routed, "audit", codec.String())
	top.OnError("route", topology.DeadLetter("dlq"))
	e, err := engine.New(top)
	if err != nil {
		t.Fatal(err)
	}
	run := func(v string) string {
		var got []string
		_, err := e.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte(v)}, func(r *kgo.Record) {
			got = append(got, r.Topic+"="+string(r.Value))
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " ")
	}
	if got, want := run("x"), "main=all:x audit=all:x"; got != want {
		t.Fatalf("Emit: %q, want %q", got, want)
	}
	if got, want := run("audit"), "main=all:audit audit=all:audit audit=only-audit"; got != want {
		t.Fatalf("EmitTo: %q, want %q", got, want)
	}
	if got, want := run("typo"), "dlq=typo"; got != want {
		t.Fatalf("EmitTo an unknown child: %q, want only the dead letter %q", got, want)
	}
}

// A partitioner that picks a partition the topic lacks fails the sink
// under its policy, naming the partition and the range.
func TestPartitionerOutOfRange(t *testing.T) {
	top := topology.New()
	src := topology.Source(top, "in", codec.String())
	topology.To(src, "out", codec.String(), topology.Partitioner(func(topology.Record[string], int32) int32 { return 9 }))
	top.OnError("out", topology.DeadLetter("dlq"))
	e, err := engine.New(top, engine.Partitions(func(string) (int32, error) { return 3, nil }))
	if err != nil {
		t.Fatal(err)
	}
	var out []*kgo.Record
	got, err := e.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte("v")}, func(r *kgo.Record) { out = append(out, r) })
	if got != engine.DeadLettered || err != nil || len(out) != 1 || out[0].Topic != "dlq" {
		t.Fatalf("outcome %v err %v outputs %v; want one dead letter", got, err, out)
	}
	if msg := header(out[0], processor.HeaderError); !strings.Contains(msg, "chose 9") || !strings.Contains(msg, "0 to 2") {
		t.Fatalf("error header %q should name the partition and the range", msg)
	}
	top2 := topology.New()
	src = topology.Source(top2, "in", codec.String())
	topology.To(src, "out", codec.String(), topology.Partitioner(func(topology.Record[string], int32) int32 { return -1 }))
	e, _ = engine.New(top2, engine.Partitions(func(string) (int32, error) { return 3, nil }))
	if _, err := e.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte("v")}, func(*kgo.Record) {}); !errors.Is(err, processor.ErrPartitionOutOfRange) {
		t.Fatalf("negative partition under Fail: %v", err)
	}
}

// What Process emits carries the input record's coordinates (and its
// timestamp when the emit has none), as every other operator's output
// does, so a downstream sink sees where the record came from.
func TestProcessEmitsKeepSourceCoordinates(t *testing.T) {
	top := topology.New()
	src := topology.Source(top, "in", codec.String())
	made := topology.Process(src, "make", func(ctx processor.Context[string], r processor.Record[string]) error {
		ctx.Emit(processor.Record[string]{Value: r.Value}) // built from scratch
		return nil
	})
	topology.ToTopicFunc(made, "out", func(_ context.Context, r topology.Record[string]) (string, error) {
		return fmt.Sprintf("%s-%d-%d-%d", r.Topic, r.Partition, r.Offset, r.Timestamp.UnixMilli()), nil
	}, codec.String())
	e, err := engine.New(top)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	in := &kgo.Record{Topic: "in", Partition: 3, Offset: 12, Timestamp: time.UnixMilli(5000), Value: []byte("v")}
	if _, err := e.Process(context.Background(), in, func(r *kgo.Record) { got = r.Topic }); err != nil {
		t.Fatal(err)
	}
	if got != "in-3-12-5000" {
		t.Fatalf("emitted record saw %q, want in-3-12-5000", got)
	}
}

// If a custom processor's Init fails, those started before it are closed
// and the error names the failing node.
func TestInitFailureClosesStartedProcessors(t *testing.T) {
	first := &lifecycle{}
	top := topology.New()
	src := topology.Source(top, "in", codec.String())
	a := topology.ProcessWith(src, "first", func() processor.Processor[string, string] { return first })
	b := topology.ProcessWith(a, "second", func() processor.Processor[string, string] { return &lifecycle{initErr: errors.New("no database")} })
	topology.To(b, "out", codec.String())
	e, err := engine.New(top)
	if err != nil {
		t.Fatal(err)
	}
	err = e.Start(context.Background())
	var ne *topology.NodeError
	if !errors.As(err, &ne) || ne.Node != "second" || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("Start: %v, want a NodeError of second naming the cause", err)
	}
	if first.inits != 1 || first.closes != 1 {
		t.Fatalf("first: %d inits, %d closes; want 1 and 1", first.inits, first.closes)
	}
}

type lifecycle struct {
	inits, closes int
	initErr       error
}

func (l *lifecycle) Init(processor.InitContext) error { l.inits++; return l.initErr }

func (l *lifecycle) Process(ctx processor.Context[string], r processor.Record[string]) error {
	ctx.Emit(r)
	return nil
}

func (l *lifecycle) Close() error { l.closes++; return nil }
