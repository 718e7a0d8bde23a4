package eos

import (
	"context"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation name of the runtime's spans.
const TracerName = "github.com/eosflow/eosflow/eos"

// Tracing turns on OpenTelemetry tracing through tp, overriding the
// default of tracing nothing and adding nothing to records:
//   - a span per batch, "eosflow.batch", with its records in and out and
//     whether it committed or why it aborted (the abort reasons of
//     eosflow_batches_aborted_total), and a child span for its end,
//     "eosflow.commit" or "eosflow.abort";
//   - a span per input record processed, "<topic> process", the child of
//     the span whose context the record's headers carry and linked to its
//     batch, which user code sees in its record context (so its own
//     calls, an HTTP request say, join the trace);
//   - franz-go's publish spans (plugin/kotel), children of the process
//     span; a publish span writes its context into the output's headers,
//     so one trace runs from a record upstream, through the pipeline, to
//     its outputs and on.
//
// prop reads and writes those headers; nil means W3C trace context.
func Tracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) Option {
	return optFunc(func(r *Runner) {
		if prop == nil {
			prop = propagation.TraceContext{}
		}
		kt := kotel.NewTracer(kotel.TracerProvider(tp), kotel.TracerPropagator(prop), kotel.ConsumerGroup(r.cfg.AppID))
		r.tracing = &tracing{
			tracer: tp.Tracer(TracerName),
			prop:   prop,
			hooks:  []kgo.Hook{publishHooks{kt}},
			attrs: []attribute.KeyValue{
				attribute.String("eosflow.app", r.cfg.AppID),
				attribute.String("eosflow.instance", r.cfg.InstanceID),
				attribute.String("eosflow.guarantee", string(r.cfg.Guarantee)),
			},
		}
	})
}

// publishHooks are kotel's produce hooks alone: its fetch hooks would
// start a receive span for every record buffered, refetched records
// again, which costs more than processing them; the process span reads
// the record's headers itself.
type publishHooks struct{ t *kotel.Tracer }

// OnProduceRecordBuffered starts the publish span and writes its context
// into the record's headers. Outputs share their input's header slice,
// and kotel overwrites a traceparent in place: each output gets a copy
// first, or the outputs of one input would overwrite one another's (and
// the input's) while the client encodes them.
func (h publishHooks) OnProduceRecordBuffered(r *kgo.Record) {
	r.Headers = append(make([]kgo.RecordHeader, 0, len(r.Headers)+1), r.Headers...)
	h.t.OnProduceRecordBuffered(r)
}

// OnProduceRecordUnbuffered ends the publish span.
func (h publishHooks) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	h.t.OnProduceRecordUnbuffered(r, err)
}

// tracing is what Tracing set up.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	hooks  []kgo.Hook // kotel's publish spans, on the pipeline's client
	attrs  []attribute.KeyValue
}

// traceBegin starts the batch's span.
func (b *batch) traceBegin() {
	tr := b.l.tracing
	b.spanCtx, b.span = tr.tracer.Start(context.Background(), "eosflow.batch",
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(tr.attrs...))
	b.recCtx = b.spanCtx
}

// traceRecord starts the span of rec's processing, returning the context
// user code gets (uctx with the span) and the span's own context, the
// parent of rec's outputs.
func (b *batch) traceRecord(uctx context.Context, rec *kgo.Record) (context.Context, trace.Span) {
	tr := b.l.tracing
	parent := tr.prop.Extract(context.Background(), kotel.NewRecordCarrier(rec))
	ctx, span := tr.tracer.Start(parent, rec.Topic+" process",
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(trace.LinkFromContext(b.spanCtx)))
	if span.IsRecording() { // an unsampled span costs no attributes
		span.SetAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", rec.Topic),
			attribute.Int("messaging.destination.partition.id", int(rec.Partition)),
			attribute.Int64("messaging.kafka.offset", rec.Offset),
		)
	}
	b.recCtx = ctx
	// Held-back updates and timers of this record, emitted later in the
	// batch, find its span here (see beginUpdate).
	rec.Context = ctx
	return trace.ContextWithSpan(uctx, span), span
}

// outcomeNames name engine outcomes on record spans.
var outcomeNames = [...]string{engine.Processed: "processed", engine.DeadLettered: "dead_lettered", engine.Skipped: "skipped",
	engine.Failed: "failed", engine.Interrupted: "interrupted"}

// traceRecordEnd ends a record's span; err is what its processing
// returned, if anything.
func (b *batch) traceRecordEnd(span trace.Span, outcome engine.Outcome, err error) {
	if int(outcome) < len(outcomeNames) && span.IsRecording() {
		span.SetAttributes(attribute.String("eosflow.outcome", outcomeNames[outcome]))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	b.recCtx = b.spanCtx
}

// traceEndStart starts the span of the batch's end (flush and EndTxn).
func (b *batch) traceEndStart(commit bool) trace.Span {
	name := "eosflow.abort"
	if commit {
		name = "eosflow.commit"
	}
	_, span := b.l.tracing.tracer.Start(b.spanCtx, name)
	return span
}

// traceEnd ends the batch's span with its outcome.
func (b *batch) traceEnd(committed bool, err error) {
	l := b.l
	b.span.SetAttributes(
		attribute.Int("eosflow.records_in", b.in),
		attribute.Int("eosflow.records_out", b.out),
		attribute.Bool("eosflow.committed", committed),
	)
	if l.abortNoted {
		b.span.SetAttributes(attribute.String("eosflow.abort_reason", abortReasonNames[l.abortReason]))
	}
	switch {
	case err != nil:
		b.span.SetStatus(codes.Error, err.Error())
	case !committed:
		b.span.SetStatus(codes.Error, "aborted")
	}
	b.span.End()
}
