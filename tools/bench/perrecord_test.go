package bench

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	eng "github.com/eosflow/eosflow/internal/engine"
	"github.com/twmb/franz-go/pkg/kgo"
)

// perRecordBatch is how many records one simulated fetch holds; outputs
// are kept until the batch is done, as the producer keeps them until they
// are acknowledged.
const perRecordBatch = 1000

// perRecordInputs are fetched records of the upper workload: 100-byte
// values over 1000 keys and 6 partitions, as eosctl bench seeds them.
func perRecordInputs() []*kgo.Record {
	recs := make([]*kgo.Record, perRecordBatch)
	now := time.Now()
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic: "in", Partition: int32(i % 6), Offset: int64(i),
			Key: []byte("k" + strconv.Itoa(i%1000)), Value: value(i, time.Time{}, 100), Timestamp: now,
		}
	}
	return recs
}

// BenchmarkPerRecord is the per-record path of the upper pipeline without
// a broker: the compiled topology (the engine eos.Runner drives) against
// the work the raw loop does per record (RunRaw's produce closure). One op
// is one input record; its output goes to a slice standing in for the
// producer. cpu-ns/op is the process's CPU time (GC workers included) per
// record, steadier than ns/op on a shared machine.
//
//	go test -run '^$' -bench PerRecord -count 5 ./tools/bench/
func BenchmarkPerRecord(b *testing.B) {
	b.Run("framework", func(b *testing.B) {
		e, err := eng.New(Topology("in", "out"))
		if err != nil {
			b.Fatal(err)
		}
		// The runtime gives each record its partition's context, one that
		// a revoke cancels.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		perRecord(b, "out", func(r *kgo.Record, out func(*kgo.Record)) error {
			_, err := e.Process(ctx, r, out)
			return err
		})
	})
	b.Run("raw", func(b *testing.B) {
		transform := func(v []byte) ([]byte, error) { return Upper(v), nil }
		perRecord(b, "out", func(r *kgo.Record, out func(*kgo.Record)) error {
			v, err := transform(r.Value)
			if err != nil {
				return err
			}
			out(&kgo.Record{Topic: "out", Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp})
			return nil
		})
	})
}

// perRecord runs process over batches of the upper workload and checks
// its outputs.
func perRecord(b *testing.B, topic string, process func(*kgo.Record, func(*kgo.Record)) error) {
	in := perRecordInputs()
	produced := make([]*kgo.Record, 0, perRecordBatch)
	out := func(r *kgo.Record) { produced = append(produced, r) }
	b.ReportAllocs()
	cpu0 := processCPU()
	i := 0
	for b.Loop() {
		if i == len(in) {
			i, produced = 0, produced[:0]
		}
		if err := process(in[i], out); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if len(produced) != i {
		b.Fatalf("%d outputs for %d records", len(produced), i)
	}
	for j, o := range produced {
		if o.Topic != topic || string(o.Key) != string(in[j].Key) || string(o.Value) != string(Upper(in[j].Value)) {
			b.Fatalf("output %d: %s %q %q", j, o.Topic, o.Key, o.Value)
		}
	}
}

// processCPU is the user plus system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
