package eos_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// With Tracing, each output carries in its headers the trace of the input
// record it came from, user code's record context holds the record's
// process span, and each batch has a span saying whether it committed or
// why it aborted (a failed EndTxn here), with a child span for its end.
func TestTracingFollowsRecordsThroughThePipeline(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 400
	prop := propagation.TraceContext{}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	// Upstream: every input record is sent from a trace of its own.
	upstream := map[int]trace.TraceID{}
	cl := env.Client(t)
	for i := range n {
		ctx, span := tp.Tracer("upstream").Start(context.Background(), "send")
		r := &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint(i)), Value: verdict.Value(i, 16)}
		prop.Inject(ctx, kotel.NewRecordCarrier(r))
		span.End()
		upstream[i] = span.SpanContext().TraceID()
		cl.Produce(context.Background(), r, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	var traced, untraced atomic.Int64
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes())
	up := topology.MapValues(src, "upper", func(ctx context.Context, v []byte) ([]byte, error) {
		if trace.SpanFromContext(ctx).SpanContext().IsValid() {
			traced.Add(1)
		} else {
			untraced.Add(1)
		}
		return bytes.ToUpper(v), nil
	})
	topology.To(up, "out", codec.Bytes())

	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 100
	x := conformance.Start(t, cfg, top, eos.Tracing(tp, nil))
	conformance.Until(t, 60*time.Second, "all records", func() bool { return x.R.Stats().RecordsIn >= n })
	if h.Hits() == 0 {
		t.Fatal("EndTxn never failed: the abort the test looks for never happened")
	}
	outs := conformance.Drain(t, env, "out", n)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	for _, o := range outs {
		id, ok := verdict.ID(o.Value)
		if !ok {
			t.Fatalf("output %q is not a seeded record", o.Value)
		}
		got := trace.SpanContextFromContext(prop.Extract(context.Background(), kotel.NewRecordCarrier(o))).TraceID()
		if got != upstream[id] {
			t.Fatalf("output of record %d carries trace %s in its headers %v, want its input's %s", id, got, o.Headers, upstream[id])
		}
	}
	if untraced.Load() != 0 || traced.Load() < n {
		t.Fatalf("user code saw a span in %d record contexts and none in %d; want all %d (and their redos) with one", traced.Load(), untraced.Load(), n)
	}

	batches := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var committed, aborted, processed int
	for _, s := range rec.Ended() {
		if s.Name() == "eosflow.batch" {
			batches[s.SpanContext().SpanID()] = s
		}
	}
	for _, s := range batches {
		a := attrs(s)
		switch {
		case a["eosflow.committed"] == "true" && a["eosflow.records_in"] != "0":
			committed++
		case a["eosflow.abort_reason"] == "commit_error" && s.Status().Code == codes.Error:
			aborted++
		}
		if a["eosflow.app"] != "app" || a["eosflow.guarantee"] != "exactly-once" {
			t.Fatalf("batch span attributes %v: want the app and guarantee", a)
		}
	}
	ends := 0
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "eosflow.commit", "eosflow.abort":
			if _, ok := batches[s.Parent().SpanID()]; !ok {
				t.Fatalf("%s span is not the child of a batch span", s.Name())
			}
			ends++
		case "in process":
			if len(s.Links()) != 1 {
				t.Fatalf("process span has %d links, want 1 to its batch", len(s.Links()))
			}
			if _, ok := batches[s.Links()[0].SpanContext.SpanID()]; !ok {
				t.Fatal("process span links to no batch span")
			}
			if !knownTrace(upstream, s.SpanContext().TraceID()) {
				t.Fatalf("process span in trace %s, no input record's", s.SpanContext().TraceID())
			}
			processed++
		}
	}
	t.Logf("%d batch spans: %d committed with records, %d aborted by the failed EndTxn; %d end spans; %d process spans", len(batches), committed, aborted, ends, processed)
	if committed == 0 || aborted == 0 || ends < len(batches) || processed < n {
		t.Fatal("want committed and aborted batch spans, an end span per batch and a process span per record")
	}
}

// attrs returns a span's attributes as strings.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

func knownTrace(ids map[int]trace.TraceID, id trace.TraceID) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// Outputs share their input's headers; with tracing each still carries a
// traceparent of its own publish span, all in the input's trace (and under
// -race, no two publishes write one header).
func TestTracingFanOutGivesEachOutputItsOwnSpan(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	const n = 50
	prop := propagation.TraceContext{}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	upstream := map[string]trace.TraceID{}
	cl := env.Client(t)
	for i := range n {
		ctx, span := tp.Tracer("upstream").Start(context.Background(), "send")
		r := &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}
		prop.Inject(ctx, kotel.NewRecordCarrier(r))
		span.End()
		upstream[fmt.Sprint(i)] = span.SpanContext().TraceID()
		cl.Produce(context.Background(), r, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes())
	three := topology.FlatMap(src, "three", func(_ context.Context, k, v []byte) ([]topology.KV[[]byte], error) {
		return []topology.KV[[]byte]{{Key: k, Value: v}, {Key: k, Value: v}, {Key: k, Value: v}}, nil
	})
	topology.To(three, "out", codec.Bytes())
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top, eos.Tracing(tp, nil))
	outs := conformance.Drain(t, env, "out", 3*n)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	spans := map[trace.SpanID]bool{}
	for _, o := range outs {
		sc := trace.SpanContextFromContext(prop.Extract(context.Background(), kotel.NewRecordCarrier(o)))
		if sc.TraceID() != upstream[string(o.Key)] {
			t.Fatalf("output of %s in trace %s, want its input's %s", o.Key, sc.TraceID(), upstream[string(o.Key)])
		}
		if spans[sc.SpanID()] {
			t.Fatalf("two outputs carry the parent span %s: they share a header", sc.SpanID())
		}
		spans[sc.SpanID()] = true
	}
	if len(outs) != 3*n {
		t.Fatalf("%d outputs, want %d", len(outs), 3*n)
	}
}
