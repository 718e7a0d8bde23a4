package topology_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
)

// A source reads a topic and a sink writes one; values are decoded and
// encoded by codecs, keys stay bytes.
func ExampleSource() {
	top := topology.New()
	in := topology.Source(top, "events", codec.Bytes())
	topology.To(in, "events-copy", codec.Bytes())
	fmt.Println(top.Validate())
	fmt.Print(top.Describe())
	// Output:
	// <nil>
	// Topology
	//   Sub-topology: 0
	//     Source: events (topic: events, codec: bytes)
	//       --> events-copy
	//     Sink: events-copy (topic: events-copy, codec: bytes)
	//       <-- events
	//   Default on error: fail
}

// MapValues changes each value, keeping the key. Its function gets a
// context to pass to calls that can block.
func ExampleMapValues() {
	top := topology.New()
	in := topology.Source(top, "words", codec.String())
	upper := topology.MapValues(in, "upper", func(_ context.Context, v string) (string, error) {
		return strings.ToUpper(v), nil
	})
	topology.To(upper, "shouts", codec.String())
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: words (topic: words, codec: string)
	//       --> upper
	//     Processor: upper (MapValues)
	//       --> shouts
	//       <-- words
	//     Sink: shouts (topic: shouts, codec: string)
	//       <-- upper
	//   Default on error: fail
}

// Map changes key and value: here "user:page" values become records keyed
// by user, so each user's records share a partition.
func ExampleMap() {
	top := topology.New()
	in := topology.Source(top, "visits", codec.String())
	byUser := topology.Map(in, "by-user", func(_ context.Context, _ []byte, v string) ([]byte, string, error) {
		user, page, ok := strings.Cut(v, ":")
		if !ok {
			return nil, "", fmt.Errorf("visit %q is not user:page", v)
		}
		return []byte(user), page, nil
	})
	topology.To(byUser, "visits-by-user", codec.String())
	fmt.Println(top.Node("by-user").Op(), "feeds", top.Node("visits-by-user").Topic())
	// Output:
	// Map feeds visits-by-user
}

// Filter keeps the records its predicate accepts. Predicates are pure
// functions of key and value, so they get no context and return no error.
func ExampleFilter() {
	top := topology.New()
	in := topology.Source(top, "logs", codec.String())
	errs := topology.Filter(in, "errors", func(_ []byte, line string) bool {
		return strings.Contains(line, "level=error")
	})
	topology.To(errs, "error-logs", codec.String())
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: logs (topic: logs, codec: string)
	//       --> errors
	//     Processor: errors (Filter)
	//       --> error-logs
	//       <-- logs
	//     Sink: error-logs (topic: error-logs, codec: string)
	//       <-- errors
	//   Default on error: fail
}

// FlatMap makes zero or more records of each: here one per word, keyed by
// the word.
func ExampleFlatMap() {
	top := topology.New()
	in := topology.Source(top, "lines", codec.String())
	words := topology.FlatMap(in, "split", func(_ context.Context, _ []byte, line string) ([]topology.KV[string], error) {
		var out []topology.KV[string]
		for _, w := range strings.Fields(line) {
			out = append(out, topology.KV[string]{Key: []byte(w), Value: w})
		}
		return out, nil
	})
	topology.To(words, "words", codec.String())
	fmt.Println(top.Node("split").Op(), top.Validate())
	// Output:
	// FlatMap <nil>
}

// Peek sees each record and passes it on unchanged. A batch that aborts
// is redone, so what Peek does can happen twice: use it for logs and
// metrics, not for effects that must happen once.
func ExamplePeek() {
	top := topology.New()
	in := topology.Source(top, "payments", codec.String())
	seen := topology.Peek(in, "log", func(ctx context.Context, key []byte, v string) {
		fmt.Printf("payment %s: %s\n", key, v)
	})
	topology.To(seen, "payments-seen", codec.String())
	fmt.Println(top.Node("log").Op(), "between", top.Node("log").Parents()[0].Name(), "and", top.Node("log").Children()[0].Name())
	// Output:
	// Peek between payments and payments-seen
}

// Branch splits a stream by predicates: each record goes to the first
// branch whose predicate accepts it, or nowhere. Branch i is the node
// "name-i".
func ExampleBranch() {
	top := topology.New()
	in := topology.Source(top, "tickets", codec.String())
	branches := topology.Branch(in, "route",
		func(_ []byte, t string) bool { return strings.HasPrefix(t, "urgent:") },
		func(_ []byte, t string) bool { return strings.HasPrefix(t, "bug:") },
	)
	topology.To(branches[0], "tickets-urgent", codec.String())
	topology.To(branches[1], "tickets-bugs", codec.String())
	for _, b := range branches {
		fmt.Println(b.Node().Name(), "-->", b.Node().Children()[0].Name())
	}
	// Output:
	// route-0 --> tickets-urgent
	// route-1 --> tickets-bugs
}

// Merge joins streams of one type, here two sources, into one.
func ExampleMerge() {
	top := topology.New()
	web := topology.Source(top, "orders-web", codec.Bytes())
	shop := topology.Source(top, "orders-shop", codec.Bytes())
	all := topology.Merge("merge", web, shop)
	topology.To(all, "orders", codec.Bytes())
	fmt.Println(top.InputTopics())
	fmt.Print(top.Describe())
	// Output:
	// [orders-shop orders-web]
	// Topology
	//   Sub-topology: 0
	//     Source: orders-web (topic: orders-web, codec: bytes)
	//       --> merge
	//     Source: orders-shop (topic: orders-shop, codec: bytes)
	//       --> merge
	//     Processor: merge (Merge)
	//       --> orders
	//       <-- orders-web, orders-shop
	//     Sink: orders (topic: orders, codec: bytes)
	//       <-- merge
	//   Default on error: fail
}

// Process sees the whole record (headers, timestamp, where it was read) and
// emits any number of records: Emit to every node it feeds, EmitTo to one
// of them by name. If it returns an error, its emits for that record are
// dropped and the node's error policy applies.
func ExampleProcess() {
	top := topology.New()
	in := topology.Source(top, "transfers", codec.String())
	checked := topology.Process(in, "check", func(ctx processor.Context[string], r processor.Record[string]) error {
		if r.Value == "" {
			return errors.New("empty transfer")
		}
		ctx.Emit(r) // to both sinks
		if strings.Contains(r.Value, "amount=1000000") {
			note := fmt.Sprintf("large transfer at %s/%d@%d", r.Topic, r.Partition, r.Offset)
			return ctx.EmitTo("review", processor.Record[string]{Key: r.Key, Value: note, Timestamp: r.Timestamp})
		}
		return nil
	})
	topology.To(checked, "transfers-checked", codec.String())
	topology.To(checked, "transfers-review", codec.String())
	top.OnError("check", topology.DeadLetter("transfers-dlq"))
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: transfers (topic: transfers, codec: string)
	//       --> check
	//     Processor: check (Process)
	//       --> transfers-checked, transfers-review
	//       <-- transfers
	//       on error: dead-letter(transfers-dlq)
	//     Sink: transfers-checked (topic: transfers-checked, codec: string)
	//       <-- check
	//     Sink: transfers-review (topic: transfers-review, codec: string)
	//       <-- check
	//   Default on error: fail
}

// ToTopicFunc chooses each record's topic. Such topics are not known
// before running, so OutputTopics (and eos.CreateTopics) leave them out.
func ExampleToTopicFunc() {
	top := topology.New()
	in := topology.Source(top, "orders", codec.Bytes())
	topology.ToTopicFunc(in, "out", func(_ context.Context, r topology.Record[[]byte]) (string, error) {
		region, _, _ := strings.Cut(string(r.Key), "/")
		if region == "" {
			return "", errors.New("key has no region") // an error of the sink, under its policy
		}
		return "orders-" + region, nil
	}, codec.Bytes())
	top.OnError("out", topology.DeadLetter("orders-unrouted"))
	fmt.Println(top.OutputTopics())
	fmt.Print(top.Describe())
	// Output:
	// [orders-unrouted]
	// Topology
	//   Sub-topology: 0
	//     Source: orders (topic: orders, codec: bytes)
	//       --> out
	//     Sink: out (topic: <chosen per record>, codec: bytes)
	//       <-- orders
	//       on error: dead-letter(orders-unrouted)
	//   Default on error: fail
}

// Partitioner makes a sink choose partitions itself, here by the tenant in
// the value rather than by the key. A partition out of range is an error
// of the sink.
func ExamplePartitioner() {
	top := topology.New()
	in := topology.Source(top, "requests", codec.String())
	byTenant := topology.Partitioner(func(r topology.Record[string], partitions int32) int32 {
		tenant, _, _ := strings.Cut(r.Value, " ")
		h := fnv.New32a()
		h.Write([]byte(tenant))
		return int32(h.Sum32() % uint32(partitions))
	})
	topology.To(in, "requests-by-tenant", codec.String(), byTenant)
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: requests (topic: requests, codec: string)
	//       --> requests-by-tenant
	//     Sink: requests-by-tenant (topic: requests-by-tenant, codec: string, partitioner: custom)
	//       <-- requests
	//   Default on error: fail
}

// Retry calls a failing node again inside the open transaction, then hands
// the record to another policy; MaxBackoff caps each wait.
func ExampleRetry() {
	p := topology.Retry(5, 100*time.Millisecond, topology.DeadLetter("enrich-dlq"), topology.MaxBackoff(time.Second))
	fmt.Println(p)

	top := topology.New()
	in := topology.Source(top, "clicks", codec.String())
	enriched := topology.MapValues(in, "enrich", func(ctx context.Context, v string) (string, error) {
		return v, nil // e.g. a lookup that can time out
	})
	topology.To(enriched, "clicks-enriched", codec.String())
	top.OnError("enrich", p)
	fmt.Println(top.CheckRetryTime(10 * time.Second)) // 0.1+0.2+0.4+0.8 s fits in a 10 s transaction
	fmt.Println(top.OutputTopics())
	// Output:
	// retry(5, 100ms, max 1s) then dead-letter(enrich-dlq)
	// <nil>
	// [clicks-enriched enrich-dlq]
}

// MaxBackoff caps one wait of Retry; without it a wait can grow to 30
// times the first.
func ExampleMaxBackoff() {
	for _, p := range []topology.ErrorPolicy{
		topology.Retry(8, time.Second, topology.Skip()),
		topology.Retry(8, time.Second, topology.Skip(), topology.MaxBackoff(2*time.Second)),
	} {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		topology.To(in, "out", codec.String())
		top.OnError("in", p)
		var rt *topology.RetryTimeError // CheckRetryTime's report gives the worst case
		if errors.As(top.CheckRetryTime(time.Second), &rt) {
			fmt.Println(p, "can wait", rt.Total)
		}
	}
	// Output:
	// retry(8, 1s) then skip can wait 1m31s
	// retry(8, 1s, max 2s) then skip can wait 13s
}

// DeadLetter writes a record its node failed on, unchanged, to a topic,
// with headers saying why and where from (the Header constants of package
// processor). As the default policy it covers every node, including
// decoding at the sources.
func ExampleDeadLetter() {
	top := topology.New(topology.DefaultErrorPolicy(topology.DeadLetter("ingest-dlq")))
	in := topology.Source(top, "raw", codec.JSON[map[string]any]())
	topology.To(in, "parsed", codec.JSON[map[string]any]())
	fmt.Println(top.Node("raw").Policy(), top.Node("parsed").Policy())
	fmt.Println(top.OutputTopics())
	fmt.Println(processor.HeaderError, processor.HeaderSourceTopic, processor.HeaderSourceOffset)
	// Output:
	// dead-letter(ingest-dlq) dead-letter(ingest-dlq)
	// [ingest-dlq parsed]
	// eosflow.error.message eosflow.source.topic eosflow.source.offset
}

// OnError sets one node's policy, overriding the topology's default. A
// name that is no node is reported by Validate.
func ExampleTopology_OnError() {
	top := topology.New()
	in := topology.Source(top, "orders", codec.String())
	priced := topology.MapValues(in, "price", func(_ context.Context, v string) (string, error) { return v, nil })
	topology.To(priced, "invoices", codec.String())
	top.OnError("price", topology.Skip())
	top.OnError("prcie", topology.Fail())
	fmt.Println(top.Node("price").Policy(), top.Node("invoices").Policy())
	fmt.Println(top.Validate())
	// Output:
	// skip fail
	// topology: node "prcie": OnError names an unknown node; known nodes: [orders price invoices]
}

// Validate reports every mistake at once, each naming its node.
func ExampleTopology_Validate() {
	top := topology.New()
	in := topology.Source[[]byte](top, "orders", nil)
	topology.Filter(in, "big", func(_ []byte, v []byte) bool { return len(v) > 100 })
	err := top.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, topology.ErrInvalid))
	// Output:
	// topology: node "orders": source has no codec; pass codec.Bytes(), codec.String(), codec.JSON[T]() or your own
	// topology: node "big": Filter output goes nowhere; end the path with To or ToTopicFunc
	// topology: the topology has no sink; add one with topology.To
	// true
}

// Named names a source or sink that its topic would not name apart: here
// two branches write one topic, so one sink takes a name of its own.
func ExampleNamed() {
	top := topology.New()
	in := topology.Source(top, "events", codec.String())
	parts := topology.Branch(in, "split",
		func(_ []byte, v string) bool { return strings.HasPrefix(v, "error") },
		func(_ []byte, v string) bool { return true })
	topology.To(parts[0], "alerts", codec.String())
	topology.To(parts[1], "alerts", codec.String(), topology.Named("alerts-rest"))
	fmt.Println(top.Validate(), top.Node("alerts-rest").Topic())
	// Output:
	// <nil> alerts
}
