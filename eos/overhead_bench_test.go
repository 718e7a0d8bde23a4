package eos_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/bench"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The overhead workload: the same for the framework and the raw loop.
const (
	overheadRecords    = 100_000
	overheadRecordSize = 100
	overheadPartitions = 6
	overheadKeys       = 1000
)

const (
	sideFramework = "framework"
	sideRaw       = "raw-franz-go"
	sideMetrics   = "framework-with-metrics" // eos.Metrics on, scraped every second
	sideTraced    = "framework-traced"       // eos.Tracing, every span exported to a discarding exporter
	sideSampled   = "framework-traced-1pc"   // the same, 1 % of traces sampled
)

// BenchmarkOverhead moves the same records through the same broker twice
// (kfake, or the cluster in EOS_KAFKA_BROKERS): with eos.Runner under exactly-once (an upper-casing MapValues,
// codec.Bytes) and with a hand-written GroupTransactSession loop doing the
// same transform with the same batching (bench.RunRaw). records/s counts the
// records between the first and the last transaction end of a run, so
// client start-up and the group join are left out; allocs/record includes
// the in-process broker's allocations, the same on both sides.
//
//	go test -run '^$' -bench Overhead -benchtime 3x ./eos/
func BenchmarkOverhead(b *testing.B) {
	for _, side := range []string{sideFramework, sideRaw} {
		b.Run(side, func(b *testing.B) {
			o := newOverhead(b)
			b.ReportAllocs()
			var rates, cpus []float64
			var allocs, bytes uint64
			for i := 0; i < b.N; i++ {
				m := o.run(b, side)
				rates = append(rates, m.rate)
				cpus = append(cpus, m.cpu)
				allocs += m.allocs
				bytes += m.bytes
			}
			b.ReportMetric(median(rates), "records/s")
			b.ReportMetric(median(cpus), "cpu-ns/record")
			b.ReportMetric(float64(allocs)/float64(b.N*overheadRecords), "allocs/record")
			b.ReportMetric(float64(bytes)/float64(b.N*overheadRecords), "B/record")
		})
	}
}

// BenchmarkOverheadRatio measures both sides in one run, alternating which
// goes first, and reports the ratio of their median throughputs: on a noisy
// machine this is steadier than comparing two separate benchmark lines.
// cpu-ratio compares the process CPU each record costs (raw over framework,
// so above 1 the framework is cheaper); it is the ratio to trust when other
// processes compete for the cores, and it is diluted by the in-process
// broker's share, which both sides pay alike.
//
//	go test -run '^$' -bench OverheadRatio -benchtime 1x -v ./eos/
func BenchmarkOverheadRatio(b *testing.B) {
	fw, raw, fwCPU, rawCPU := alternate(b, sideFramework, sideRaw)
	b.ReportMetric(median(fw), "framework-records/s")
	b.ReportMetric(median(raw), "raw-records/s")
	b.ReportMetric(median(fw)/median(raw), "ratio")
	b.ReportMetric(median(fwCPU), "framework-cpu-ns/record")
	b.ReportMetric(median(rawCPU), "raw-cpu-ns/record")
	b.ReportMetric(median(rawCPU)/median(fwCPU), "cpu-ratio")
}

// BenchmarkMetricsOverhead is BenchmarkOverheadRatio for the cost of
// metrics: the framework with eos.Metrics, its registry gathered every
// second as Prometheus would (lag included), against the framework
// without. ratio is with over without (1 = free); cpu-ratio is without's
// CPU per record over with's (below 1 = metrics cost CPU).
//
//	go test -run '^$' -bench MetricsOverhead -benchtime 1x -v ./eos/
func BenchmarkMetricsOverhead(b *testing.B) { onOff(b, sideMetrics) }

// BenchmarkTracingOverhead is BenchmarkMetricsOverhead for tracing: every
// record sampled (three spans per record: receive, process, publish, and
// one per batch), exported by a batching exporter that discards them.
//
//	go test -run '^$' -bench TracingOverhead -benchtime 1x -v ./eos/
func BenchmarkTracingOverhead(b *testing.B) { onOff(b, sideTraced) }

// BenchmarkSampledTracingOverhead is BenchmarkTracingOverhead with 1 % of
// traces sampled (ParentBased(TraceIDRatioBased(0.01))), as production
// tracing at this rate usually is.
//
//	go test -run '^$' -bench SampledTracingOverhead -benchtime 1x -v ./eos/
func BenchmarkSampledTracingOverhead(b *testing.B) { onOff(b, sideSampled) }

// onOff alternates side, the framework with something on, with the plain
// framework, and reports on over off.
func onOff(b *testing.B, side string) {
	on, off, onCPU, offCPU := alternate(b, side, sideFramework)
	b.ReportMetric(median(on), "on-records/s")
	b.ReportMetric(median(off), "off-records/s")
	b.ReportMetric(median(on)/median(off), "ratio")
	b.ReportMetric(median(offCPU)/median(onCPU), "cpu-ratio")
}

// alternate runs sides first and second on one broker, five rounds per
// b.N, swapping which goes first each round so that neither always runs
// on a warmer machine, and returns each side's rates and CPU per record.
func alternate(b *testing.B, first, second string) (firstRate, secondRate, firstCPU, secondCPU []float64) {
	const rounds = 5
	o := newOverhead(b)
	for n := 0; n < b.N; n++ {
		for i := range rounds {
			order := []string{first, second}
			if i%2 == 1 {
				order = []string{second, first}
			}
			got := map[string]measurement{}
			for _, side := range order {
				got[side] = o.run(b, side)
			}
			x, y := got[first], got[second]
			firstRate, secondRate = append(firstRate, x.rate), append(secondRate, y.rate)
			firstCPU, secondCPU = append(firstCPU, x.cpu), append(secondCPU, y.cpu)
			b.Logf("round %d: %s %.0f records/s %.0f cpu-ns/record, %s %.0f records/s %.0f cpu-ns/record",
				i, first, x.rate, x.cpu, second, y.rate, y.cpu)
		}
	}
	return firstRate, secondRate, firstCPU, secondCPU
}

// overhead is one broker shared by the runs of a benchmark; every run gets
// fresh topics and a fresh group.
type overhead struct {
	env  *kafkatest.Env
	cl   *kgo.Client
	runs int
}

// newOverhead uses the cluster in EOS_KAFKA_BROKERS when set (then the
// process CPU is the clients' alone), else an in-process kfake.
func newOverhead(b *testing.B) *overhead {
	var e *kafkatest.Env
	if kafkatest.RealBrokers() != nil {
		e = kafkatest.Real(b)
	} else {
		e = kafkatest.Fake(b)
	}
	return &overhead{env: e, cl: e.Client(b, kgo.ProducerLinger(5*time.Millisecond))}
}

type measurement struct {
	rate          float64 // records/s in the window
	cpu           float64 // process CPU ns per record in the window (kfake's included)
	allocs, bytes uint64
}

// processCPU is the user plus system CPU time of this process so far. On a
// shared machine it is steadier than wall time: other processes' load
// lowers records/s but not the CPU each record costs.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run seeds a fresh input, runs one side until every record committed and
// returns its throughput. The benchmark timer runs only while the pipeline
// does.
func (o *overhead) run(b *testing.B, side string) measurement {
	b.StopTimer()
	o.runs++
	id := o.env.Name(fmt.Sprintf("overhead-%s-%d", side, o.runs))
	in, out := id+"-in", id+"-out"
	o.env.CreateTopics(b, overheadPartitions, in, out)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(o.cl).DeleteTopics(ctx, in, out)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := verdict.Seed(ctx, o.cl, in, overheadRecords, overheadKeys, overheadRecordSize); err != nil {
		b.Fatal(err)
	}
	cfg := o.env.Config(id, "bench", config.ExactlyOnce)

	// Both sides report each batch just before End; the window runs from
	// the first such call to the one that completes the input.
	var (
		mu         sync.Mutex
		total      int
		first      time.Time
		firstRecs  int
		last       time.Time
		cpu0, cpu1 time.Duration
		done       = make(chan struct{})
	)
	beforeEnd := func(records int) {
		now, cpu := time.Now(), processCPU()
		mu.Lock()
		defer mu.Unlock()
		if total == 0 {
			first, firstRecs, cpu0 = now, records, cpu
		}
		total += records
		if total >= overheadRecords && last.IsZero() {
			last, cpu1 = now, cpu
			close(done)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	b.StartTimer()
	switch side {
	case sideFramework, sideMetrics, sideTraced, sideSampled:
		opts := []eos.Option{eos.BeforeCommit(func(_ context.Context, bi eos.BatchInfo) error {
			beforeEnd(bi.Records)
			return nil
		})}
		if side == sideTraced || side == sideSampled {
			sampler := sdktrace.AlwaysSample()
			if side == sideSampled {
				sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			opts = append(opts, eos.Tracing(tp, nil))
		}
		if side == sideMetrics {
			reg := prometheus.NewRegistry()
			opts = append(opts, eos.Metrics(reg))
			scraped := make(chan struct{})
			defer func() { stop(); <-scraped }() // a failing run ends here before stop
			go func() {
				defer close(scraped)
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for {
					select {
					case <-runCtx.Done():
						return
					case <-tick.C:
						if _, err := reg.Gather(); err != nil {
							b.Error(err)
						}
					}
				}
			}()
		}
		r, err := bench.NewRunner(cfg, in, out, opts...)
		if err != nil {
			b.Fatal(err)
		}
		go func() { errc <- r.Run(runCtx) }()
	case sideRaw:
		go func() { errc <- bench.RunRaw(runCtx, cfg, in, out, beforeEnd) }()
	}
	select {
	case <-done:
	case err := <-errc:
		b.Fatalf("%s stopped early: %v", side, err)
	case <-ctx.Done():
		b.Fatalf("%s: timed out with %d of %d records", side, total, overheadRecords)
	}
	stop()
	if err := <-errc; err != nil {
		b.Fatalf("%s: %v", side, err)
	}
	b.StopTimer()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	mu.Lock()
	defer mu.Unlock()
	if total != overheadRecords {
		b.Fatalf("%s: %d records in committed batches, want %d (an aborted batch?)", side, total, overheadRecords)
	}
	window := last.Sub(first)
	if window <= 0 {
		b.Fatalf("%s: everything fit in one batch; raise overheadRecords", side)
	}
	return measurement{
		rate:   float64(overheadRecords-firstRecs) / window.Seconds(),
		cpu:    float64((cpu1 - cpu0).Nanoseconds()) / float64(overheadRecords-firstRecs),
		allocs: after.Mallocs - before.Mallocs,
		bytes:  after.TotalAlloc - before.TotalAlloc,
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
