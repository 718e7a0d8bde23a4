package eostest_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// benchPipe pipes b.N keyed records to topic and reports records/s,
// reading the output every few thousand records as a test would.
func benchPipe(b *testing.B, top *topology.Topology, topic, output string, opts ...eostest.Option) {
	d := eostest.New(b, top, opts...)
	in := eostest.Input(d, topic, codec.String())
	out := eostest.Output(d, output, codec.Bytes())
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := in.Pipe(keys[i%len(keys)], "value"); err != nil {
			b.Fatal(err)
		}
		if i%4096 == 4095 {
			out.ReadAll()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkPipeStateless pipes records through a filter and a map.
func BenchmarkPipeStateless(b *testing.B) {
	benchPipe(b, shout(), "words", "shouts", eostest.Partitions("words", 3))
}

// BenchmarkPipeCount pipes records through a count, its store per task.
func BenchmarkPipeCount(b *testing.B) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	counts := topology.Count(topology.GroupByKey(in, "by-key"), "counts", state.Memory())
	topology.ToTable(counts, "out", codec.JSON[int64]())
	benchPipe(b, top, "in", "out", eostest.Partitions("in", 3))
}

// BenchmarkPipeRepartitioned pipes records re-keyed through a
// repartition topic and counted: two batches per record.
func BenchmarkPipeRepartitioned(b *testing.B) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	byValue := topology.GroupBy(in, "by-value", func(_ context.Context, k []byte, _ string) ([]byte, error) { return k, nil },
		topology.Repartition(codec.String()))
	topology.ToTable(topology.Count(byValue, "counts", state.Memory()), "out", codec.JSON[int64]())
	benchPipe(b, top, "in", "out", eostest.Partitions("in", 3))
}
