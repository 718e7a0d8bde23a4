package bench

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The project's goals for exactly-once throughput, as ratios of records/s.
const (
	// TargetVsAtLeastOnce: exactly-once keeps at least this share of
	// at-least-once's throughput.
	TargetVsAtLeastOnce = 0.90
	// TargetVsRaw: the framework keeps at least this share of the
	// hand-written franz-go loop's throughput, at an equal p99.
	TargetVsRaw = 0.97
	// TargetCPUVsRaw: the framework spends at most this many times the
	// hand-written loop's CPU per record; the raw goal is met only with
	// both.
	TargetCPUVsRaw = 1.05
	// TargetVsStreams: exactly-once is ahead of Kafka Streams
	// exactly_once_v2, at an equal or lower p99.
	TargetVsStreams = 1.0
	// TargetMetrics: serving and scraping metrics keeps at least this
	// share of exactly-once's throughput.
	TargetMetrics = 0.97
)

func specJSON(s WorkerSpec) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report aggregates the runs of every case.
func (h *harness) report(cases []caseSpec, runs [][]runResult, errs []error, records []int) *Report {
	o := h.o
	w := Workload{
		Pipeline: o.Pipeline, Broker: h.broker, Records: o.Records, RecordSize: o.RecordSize, Partitions: o.Partitions,
		Keys: o.Keys, BatchRecords: o.BatchRecords, Warmup: o.Warmup,
		LatencyRate: o.Rate, LatencyRecs: h.latencyRecords(), MinWindowSeconds: o.MinWindow.Seconds(),
	}
	if o.Pipeline == PipelineWindowed {
		w.WindowMS, w.GraceMS = o.Window.Milliseconds(), o.Grace.Milliseconds()
	}
	if o.Pipeline == PipelineCPU {
		w.CPURounds = o.CPURounds
	}
	rep := &Report{Workload: w}
	for i, c := range cases {
		res := Result{
			Name: c.name, Engine: c.engine, Guarantee: c.guarantee,
			CommitIntervalMS: ms(c.commit), Runs: len(runs[i]), Skipped: c.skipped, Workload: w,
			Workers: c.workers,
		}
		if records != nil {
			res.Records = records[i]
		}
		if errs[i] != nil {
			res.Error = errs[i].Error()
		}
		if c.engine == EngineStreams {
			res.BatchRecords = 0 // Kafka Streams batches by its own max.poll.records
			res.StreamThreads = c.streamThreads()
		}
		var rate, p50, p99, p999, cpu, cpuRec, rss, took, wall, window, crashed, crashCommit []float64
		for _, r := range runs[i] {
			window = append(window, r.window.Seconds())
			crashed = append(crashed, float64(r.crashRestored))
			crashCommit = append(crashCommit, r.crashCommit.Seconds())
			took = append(took, r.restoreTook.Seconds())
			wall = append(wall, r.restoreWall.Seconds())
			rate = append(rate, r.rate)
			p50 = append(p50, ms(r.p50))
			p99 = append(p99, ms(r.p99))
			p999 = append(p999, ms(r.p999))
			cpu = append(cpu, r.cpu.Seconds())
			cpuRec = append(cpuRec, float64(r.cpuPerRecord)/float64(time.Microsecond))
			rss = append(rss, float64(r.peakRSS))
			res.LatencySamples += r.samples
			res.Missing += r.missing
			res.Duplicates += r.dups
			res.Invalid += r.invalid
			res.Measured = r.measured
		}
		res.RecordsPerSec, res.RecordsPerSecMin, res.RecordsPerSecMax = spread(rate)
		res.WindowSeconds, res.WindowSecondsMin, _ = spread(window)
		res.MBPerSec = res.RecordsPerSec * float64(o.RecordSize) / 1e6
		if c.restore {
			res.MBPerSec = 0
			res.RestoreKeys = o.RestoreKeys
			res.RestoreSeconds, _, _ = spread(took)
			res.RestoreWallSeconds, _, _ = spread(wall)
		}
		if c.crash && len(runs[i]) > 0 {
			res.Crash = &Crash{}
			res.Crash.Restored, _, res.Crash.RestoredMax = spread(crashed)
			res.Crash.CommitSeconds, _, res.Crash.CommitSecondsMax = spread(crashCommit)
			res.Crash.RestoredShare = res.Crash.Restored / float64(o.RestoreKeys)
		}
		res.P50MS, _, _ = spread(p50)
		res.P99MS, res.P99MSMin, res.P99MSMax = spread(p99)
		res.P999MS, _, _ = spread(p999)
		res.CPUSeconds, _, _ = spread(cpu)
		res.CPUMicrosPerRecord, _, _ = spread(cpuRec)
		peak, _, _ := spread(rss)
		res.PeakRSSBytes = int64(peak)
		rep.Results = append(rep.Results, res)
	}
	// Ratios compare like with like: throughput with throughput, restore
	// rate with restore rate.
	byName := map[string]*Result{}
	for i := range rep.Results {
		if r := &rep.Results[i]; r.Runs > 0 {
			byName[r.Name] = r
		}
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Runs == 0 {
			continue
		}
		for name, other := range byName {
			if name == r.Name || (r.RestoreKeys > 0) != (other.RestoreKeys > 0) {
				continue
			}
			if r.Ratios == nil {
				r.Ratios = map[string]float64{}
			}
			r.Ratios[name] = r.RecordsPerSec / other.RecordsPerSec
		}
		if amo := byName[AtMostOnce]; amo != nil {
			v := r.RecordsPerSec / amo.RecordsPerSec
			r.RatioToAtMostOnce = &v
		}
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		other := byName[h.baselineOf(cases[i])]
		if r.Runs == 0 || other == nil || r.RecordsPerSec <= 0 || other.RecordsPerSec <= 0 {
			continue
		}
		r.Baseline = &Baseline{
			Against:                 other.Name,
			Ratio:                   r.RecordsPerSec / other.RecordsPerSec,
			MicrosPerRecordAdded:    1e6/r.RecordsPerSec - 1e6/other.RecordsPerSec,
			CPUMicrosPerRecordAdded: r.CPUMicrosPerRecord - other.CPUMicrosPerRecord,
		}
	}
	// The goals hold at every worker count: exactly-once/workers-2
	// against raw-franz-go/workers-2 and kafka-streams/threads-2.
	for _, c := range cases {
		eo := byName[c.name]
		base := c.base
		if base == "" {
			base = c.name
		}
		if eo == nil || base != ExactlyOnce || c.engine != EngineFramework {
			continue
		}
		suffix, streamsSuffix := "", ""
		if c.name != base {
			suffix = strings.TrimPrefix(c.name, base)
			streamsSuffix = threadsSuffix + strconv.Itoa(c.workers)
		}
		for _, t := range []struct {
			against string
			want    float64
		}{{AtLeastOnce + suffix, TargetVsAtLeastOnce}, {RawFranzGo + suffix, TargetVsRaw},
			{KafkaStreams + streamsSuffix, TargetVsStreams}, {KafkaStreamsTuned + streamsSuffix, TargetVsStreams}} {
			other := byName[t.against]
			if other == nil || other.RecordsPerSec <= 0 {
				continue
			}
			ratio := eo.RecordsPerSec / other.RecordsPerSec
			met := ratio >= t.want
			streams := strings.HasPrefix(t.against, KafkaStreams)
			if streams {
				met = ratio > t.want && eo.P99MS <= other.P99MS
			}
			var cpuRatio float64
			if eo.CPUMicrosPerRecord > 0 {
				cpuRatio = other.CPUMicrosPerRecord / eo.CPUMicrosPerRecord
			}
			if strings.HasPrefix(t.against, RawFranzGo) {
				met = met && eo.CPUMicrosPerRecord <= TargetCPUVsRaw*other.CPUMicrosPerRecord
			}
			eo.Targets = append(eo.Targets, Target{
				Against: t.against, Ratio: ratio, Want: t.want,
				P99MS: eo.P99MS, OtherP99: other.P99MS, Met: met, CPURatio: cpuRatio,
			})
		}
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		// The goal is the framework's; the others' speed-up is in Baseline.
		if cases[i].engine != EngineFramework || cases[i].workers != 2 || r.Baseline == nil || byName[r.Baseline.Against] == nil || byName[r.Baseline.Against].Workers != 1 {
			continue
		}
		one := byName[r.Baseline.Against]
		var cpuRatio float64
		if r.CPUMicrosPerRecord > 0 {
			cpuRatio = one.CPUMicrosPerRecord / r.CPUMicrosPerRecord
		}
		r.Targets = append(r.Targets, Target{Against: one.Name, Ratio: r.Baseline.Ratio, Want: TargetWorkers2,
			P99MS: r.P99MS, OtherP99: one.P99MS, Met: r.Baseline.Ratio >= TargetWorkers2, CPURatio: cpuRatio})
	}
	if m, eo := byName[ExactlyOnceMetrics], byName[ExactlyOnce]; m != nil && eo != nil && eo.RecordsPerSec > 0 {
		ratio := m.RecordsPerSec / eo.RecordsPerSec
		var cpuRatio float64
		if m.CPUMicrosPerRecord > 0 {
			cpuRatio = eo.CPUMicrosPerRecord / m.CPUMicrosPerRecord
		}
		m.Targets = append(m.Targets, Target{Against: ExactlyOnce, Ratio: ratio, Want: TargetMetrics,
			P99MS: m.P99MS, OtherP99: eo.P99MS, Met: ratio >= TargetMetrics, CPURatio: cpuRatio})
	}
	return rep
}

// baselineOf names the case c is measured against in Result.Baseline, ""
// for none: the same case at the fewest workers for a case expanded to
// more workers (so that its ratio is the speed-up), otherwise the case c
// adds one thing to (baselines) at c's worker count.
func (h *harness) baselineOf(c caseSpec) string {
	if c.base == "" {
		c.base = c.name
	}
	suffix := strings.TrimPrefix(c.name, c.base)
	if c.workers > 0 && len(h.o.Workers) > 1 {
		fewest := slices.Min(h.o.Workers)
		if c.workers != fewest {
			return c.base + strings.TrimSuffix(suffix, strconv.Itoa(c.workers)) + strconv.Itoa(fewest)
		}
	}
	if b, ok := baselines[c.base]; ok {
		return b + suffix
	}
	return ""
}
