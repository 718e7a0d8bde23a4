package eostest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// shout keeps words longer than two letters and upper-cases them.
func shout() *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "words", codec.String(), topology.Named("in"))
	long := topology.Filter(in, "long", func(_ []byte, w string) bool { return len(w) > 2 })
	up := topology.MapValues(long, "upper", func(_ context.Context, w string) (string, error) { return strings.ToUpper(w), nil })
	topology.To(up, "shouts", codec.String(), topology.Named("out"))
	return top
}

func pipe[V any](t *testing.T, in *eostest.InputTopic[V], key string, v V, opts ...eostest.PipeOption) {
	t.Helper()
	if err := in.Pipe(key, v, opts...); err != nil {
		t.Fatal(err)
	}
}

// A stateless topology maps and filters; outputs keep the input's key,
// headers and timestamp, and ReadAll reads each record once.
func TestStatelessMapFilter(t *testing.T) {
	d := eostest.New(t, shout())
	in := eostest.Input(d, "words", codec.String())
	out := eostest.Output(d, "shouts", codec.String())
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	pipe(t, in, "k1", "go")
	pipe(t, in, "k2", "eos", eostest.Timestamp(at), eostest.Header("trace", []byte("t-1")))
	pipe(t, in, "k3", "kafka")

	if n := len(out.Records()); n != 2 {
		t.Fatalf("Records: %d records, want 2", n)
	}
	got := out.ReadAll()
	if len(got) != 2 {
		t.Fatalf("ReadAll: %d records, want 2 (Records must not consume)", len(got))
	}
	if r := got[0]; string(r.Key) != "k2" || r.Value != "EOS" || r.Offset != 0 || r.Partition != 0 ||
		!r.Timestamp.Equal(at.Truncate(time.Millisecond)) || len(r.Headers) != 1 || string(r.Headers[0].Value) != "t-1" {
		t.Errorf("first output: %+v", r)
	}
	if r := got[1]; string(r.Key) != "k3" || r.Value != "KAFKA" || r.Offset != 1 || !r.Timestamp.Equal(d.Now()) {
		t.Errorf("second output: %+v, want the wall clock's time %s", r, d.Now())
	}
	if again := out.ReadAll(); len(again) != 0 {
		t.Errorf("ReadAll again: %d records, want none", len(again))
	}
	if s := d.Stats(); s.Processed != 3 {
		t.Errorf("Stats: %+v, want 3 processed", s)
	}
}

// Golden murmur2 hashes from Kafka's UtilsTest.testMurmur2: where
// Kafka's Java producer puts a key, whatever client computes it.
var kafkaHashes = map[string]int32{"21": -973932308, "foobar": -790332482, "abc": 479470107, "a-little-bit-long-string": -985981536}

func kafkaPartition(key string, n int32) int32 {
	return int32(uint32(kafkaHashes[key])&0x7fffffff) % n
}

// whereFrom writes, for each record, the partition it was read from.
func whereFrom() *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	tagged := topology.Process(in, "tag", func(ctx processor.Context[string], r processor.Record[string]) error {
		ctx.Emit(processor.Record[string]{Key: r.Key, Value: fmt.Sprint(r.Partition)})
		return nil
	})
	topology.To(tagged, "out", codec.String())
	return top
}

// A record goes to the partition Kafka's producer would choose for its
// key, in the input topic and in the output topic alike; a keyless one
// to partition 0, and InPartition overrides both.
func TestPartitionByKey(t *testing.T) {
	d := eostest.New(t, whereFrom(), eostest.Partitions("in", 4), eostest.Partitions("out", 7))
	in := eostest.Input(d, "in", codec.String())
	out := eostest.Output(d, "out", codec.String())
	keys := []string{"21", "foobar", "abc", "a-little-bit-long-string"}
	for _, k := range keys {
		pipe(t, in, k, "")
	}
	for i, r := range out.ReadAll() {
		k := keys[i]
		if r.Value != fmt.Sprint(kafkaPartition(k, 4)) || r.Partition != kafkaPartition(k, 7) {
			t.Errorf("key %q: read from partition %s, written to %d; want %d and %d", k, r.Value, r.Partition, kafkaPartition(k, 4), kafkaPartition(k, 7))
		}
	}
	if err := in.PipeValue("no key"); err != nil {
		t.Fatal(err)
	}
	pipe(t, in, "21", "", eostest.InPartition(3))
	got := out.ReadAll()
	if got[0].Value != "0" || got[0].Key != nil || got[1].Value != "3" {
		t.Errorf("keyless and chosen partitions: %+v", got)
	}
}

// A sink's Partitioner chooses the partition, out of the topic's count.
func TestSinkPartitioner(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.JSON[int32]())
	topology.To(in, "out", codec.JSON[int32](),
		topology.Partitioner(func(r topology.Record[int32], n int32) int32 { return r.Value % n }))
	d := eostest.New(t, top, eostest.Partitions("out", 3))
	send := eostest.Input(d, "in", codec.JSON[int32]())
	for _, store := range []int32{4, 5, 9} {
		pipe(t, send, "same-key", store)
	}
	var parts []int32
	for _, r := range eostest.Output(d, "out", codec.JSON[int32]()).ReadAll() {
		parts = append(parts, r.Partition)
	}
	if want := []int32{1, 2, 0}; !slices.Equal(parts, want) {
		t.Errorf("partitions %v, want %v", parts, want)
	}
}

// Mistakes of the test fail it (New) or panic (Open), naming the problem.
func TestMistakesPanicWithOpen(t *testing.T) {
	d, err := eostest.Open(shout())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for name, f := range map[string]func(){
		"unknown input":   func() { _ = d.Pipe("nope", nil, nil) },
		"output as input": func() { eostest.Input(d, "shouts", codec.String()) },
		"bad partition":   func() { _ = d.Pipe("words", nil, nil, eostest.InPartition(1)) },
		"unknown store":   func() { eostest.Store(d, "counts", codec.String(), codec.String()) },
		"undecodable": func() {
			_ = d.Pipe("words", nil, []byte("word"))
			eostest.Output(d, "shouts", codec.JSON[int]()).Records()
		},
	} {
		func() {
			defer func() {
				if v := recover(); v == nil || !strings.HasPrefix(fmt.Sprint(v), "eostest: ") {
					t.Errorf("%s: recovered %v, want an eostest panic", name, v)
				}
			}()
			f()
		}()
	}
}

// A topology that cannot run is New's and Open's error: here two topics
// joined through a table are not co-partitioned.
func TestCoPartitioningChecked(t *testing.T) {
	top := topology.New()
	clicks := topology.Source(top, "clicks", codec.String())
	users := topology.TableFrom(top, "users", codec.String(), state.Memory())
	joined := topology.Join(clicks, users, "with-user", func(_ context.Context, _ []byte, c, u string) (string, error) { return u + ":" + c, nil })
	topology.To(joined, "out", codec.String())
	_, err := eostest.Open(top, eostest.Partitions("clicks", 3))
	if err == nil || !strings.Contains(err.Error(), "co-partitioned") {
		t.Fatalf("Open: %v, want an error about co-partitioning", err)
	}
	d, err := eostest.Open(top, eostest.DefaultPartitions(3))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Pipe("users", []byte("u1"), []byte("ada")); err != nil {
		t.Fatal(err)
	}
	if err := d.Pipe("clicks", []byte("u1"), []byte("home")); err != nil {
		t.Fatal(err)
	}
	got := eostest.Output(d, "out", codec.String()).ReadAll()
	if len(got) != 1 || got[0].Value != "ada:home" {
		t.Errorf("joined: %+v", got)
	}
}
