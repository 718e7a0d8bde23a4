package eos_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Tracing on the embedded broker: the record sent from an upstream trace
// comes out in the same trace, and the pipeline's spans (batch, commit,
// process; franz-go's receive and publish) join it or link to it. In
// production the TracerProvider exports to a collector (e.g.
// go.opentelemetry.io/otel/exporters/otlp/otlptrace); here a recorder
// keeps the spans.
func ExampleTracing() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, -1, nil, "words", "shouts"); err != nil {
		log.Fatal(err)
	}

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(ctx) }()
	prop := propagation.TraceContext{}

	// Upstream: a service sends a record from within its trace.
	sctx, send := tp.Tracer("upstream").Start(ctx, "send")
	rec := &kgo.Record{Topic: "words", Value: []byte("hello")}
	prop.Inject(sctx, kotel.NewRecordCarrier(rec))
	send.End()
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		log.Fatal(err)
	}

	top := topology.New()
	in := topology.Source(top, "words", codec.String())
	upper := topology.MapValues(in, "upper", func(ctx context.Context, v string) (string, error) {
		// ctx holds the record's process span: calls made with it
		// join the trace.
		fmt.Println("in a span:", trace.SpanFromContext(ctx).SpanContext().IsValid())
		return strings.ToUpper(v), nil
	})
	topology.To(upper, "shouts", codec.String())
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = cluster.ListenAddrs(), "shout", "a"
	r, err := eos.New(cfg, top, eos.Tracing(tp, prop))
	if err != nil {
		log.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	for r.Stats().Committed < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	out, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("shouts"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	shout := out.PollFetches(ctx).Records()[0]
	got := trace.SpanContextFromContext(prop.Extract(ctx, kotel.NewRecordCarrier(shout)))
	fmt.Printf("%s, in the sender's trace: %v\n", shout.Value, got.TraceID() == send.SpanContext().TraceID())
	for _, s := range spans.Ended() {
		if s.Name() == "eosflow.batch" {
			for _, a := range s.Attributes() {
				if a.Key == "eosflow.committed" {
					fmt.Println("batch committed:", a.Value.AsBool())
				}
			}
		}
	}
	// Output:
	// in a span: true
	// HELLO, in the sender's trace: true
	// batch committed: true
}
