package eos

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
	"go.uber.org/zap"
)

// Metrics registers the runtime's Prometheus metrics, and the franz-go
// client's own (kprom, under eosflow_kafka_), on reg, each labelled with
// the app, instance and guarantee, overriding the default of registering
// none. With metrics_addr set, Run serves reg's metrics if reg is also a
// prometheus.Gatherer (a *prometheus.Registry is both); without this
// option metrics_addr serves a registry of its own. docs/operating.md
// lists the metrics.
func Metrics(reg prometheus.Registerer) Option {
	return optFunc(func(r *Runner) { r.registerer = reg })
}

// abortReason is why a batch did not commit: a small fixed set, so that
// batches_aborted_total has bounded labels.
type abortReason uint8

const (
	abortProcessing abortReason = iota // user code failed under the Fail policy, or an aggregation's flush failed
	abortVeto                          // BeforeCommit returned an error
	abortRebalance                     // partitions were revoked during the batch
	abortProduce                       // an output (or a dead letter) could not be written
	abortCommit                        // EndTxn or the offset commit failed or was not confirmed and had not landed, fencing included
	abortShutdown                      // Run was stopped while the batch ran
	abortTimeout                       // the batch ran past transaction_timeout
	abortClient                        // the client failed while polling the batch's records
	numAbortReasons
)

// abortReasonNames are the reason label values, indexed by abortReason.
var abortReasonNames = [numAbortReasons]string{
	"processing_error", "veto", "rebalance", "produce_error", "commit_error", "shutdown", "timeout", "client_error",
}

// lagMaxAge is how long a lag reading serves scrapes before the brokers
// are asked again, so that frequent scrapes cost the brokers little.
const lagMaxAge = 5 * time.Second

// metrics holds the collectors that need updating; counters already kept
// in Stats are read from there when scraped.
type metrics struct {
	aborts        [numAbortReasons]prometheus.Counter
	batchSeconds  prometheus.Histogram
	commitSeconds prometheus.Histogram
	batchRecords  prometheus.Histogram
	wrapped       prometheus.Registerer // reg with the Runner's labels
	gatherer      prometheus.Gatherer   // what metrics_addr serves; nil if reg cannot be read
	collectors    []prometheus.Collector
}

// newMetrics registers the Runner's metrics on reg.
func (r *Runner) newMetrics(reg prometheus.Registerer) (*metrics, error) {
	gatherer, _ := reg.(prometheus.Gatherer)
	if reg == prometheus.DefaultRegisterer {
		gatherer = prometheus.DefaultGatherer
	}
	wrapped := prometheus.WrapRegistererWith(prometheus.Labels{
		"app": r.cfg.AppID, "instance": r.cfg.InstanceID, "guarantee": string(r.cfg.Guarantee),
	}, reg)
	m := &metrics{gatherer: gatherer, wrapped: wrapped}
	aborted := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eosflow_batches_aborted_total",
		Help: "Batches that did not commit, by reason: processing_error, veto, rebalance, produce_error, commit_error, shutdown, timeout, client_error."},
		[]string{"reason"})
	for i, name := range abortReasonNames {
		m.aborts[i] = aborted.WithLabelValues(name) // every reason exported from the start, at 0
	}
	m.batchSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eosflow_batch_duration_seconds",
		Help: "Time from a batch's start until it is ready to end (polling and processing its records), committed or not.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eosflow_commit_duration_seconds",
		Help: "Time to commit a batch: flushing its outputs and ending its transaction (or committing its offsets).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	m.batchRecords = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eosflow_batch_records",
		Help: "Input records per committed batch.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)})
	stat := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	bit := func(b *atomic.Bool) func() float64 {
		return func() float64 {
			if b.Load() {
				return 1
			}
			return 0
		}
	}
	h := &r.health
	cs := []prometheus.Collector{aborted, m.batchSeconds, m.commitSeconds, m.batchRecords,
		stat("eosflow_batches_committed_total", "Batches committed.", &r.counts.committed),
		stat("eosflow_records_in_total", "Input records whose batch committed (dead-lettered and skipped ones included).", &r.counts.recordsIn),
		stat("eosflow_records_out_total", "Output records committed (dead letters and repartition records included).", &r.counts.recordsOut),
		stat("eosflow_records_dead_lettered_total", "Committed input records that went to a dead-letter topic.", &r.counts.deadLettered),
		stat("eosflow_records_skipped_total", "Committed input records dropped by the Skip policy.", &r.counts.skipped),
		stat("eosflow_retries_total", "Retried calls of user code in batches that committed.", &r.counts.retries),
		stat("eosflow_expiries_skipped_total", "Expired entries (unmatched join records, final window results) whose emission failed and the Skip policy dropped, in batches that committed.", &r.counts.expiriesSkipped),
		stat("eosflow_expiries_dead_lettered_total", "Expired entries whose emission failed and that went to a dead-letter topic, in batches that committed.", &r.counts.expiriesDeadLettered),
		stat("eosflow_timer_firings_total", "Timer firings in batches that committed (a firing whose error the node's policy skipped included).", &r.counts.timerFirings),
		stat("eosflow_records_redone_total", "Input records run again after their batch did not commit its offsets although outputs may have been written (idempotent and at-least-once only).", &r.counts.redone),
		stat("eosflow_client_rebuilds_total", "Kafka clients closed and made anew after an error.", &r.counts.rebuilds),
		stat("eosflow_batch_rewinds_total", "Batches that ended with polled records left unprocessed, fetched again by the next batch.", &r.counts.rewinds),
		stat("eosflow_task_idle_waits_total", "Waits of a co-partitioned task for a partition without fetched records, its other partitions' records held back (max_task_idle).", &r.counts.idleWaits),
		stat("eosflow_task_idle_enforced_total", "Waits of a co-partitioned task that ran out: it went on without the empty partition.", &r.counts.idleEnforced),
		stat("eosflow_global_records_total", "Records of global tables' topics applied to their stores (tombstones included).", &r.counts.globalRecords),
		stat("eosflow_restore_records_total", "Changelog records applied to state stores while restoring them.", &r.counts.restored),
		gauge("eosflow_restore_remaining_offsets", "Changelog offsets left to read by the running restore (0 when none runs).", func() float64 { return float64(h.restoreLeft.Load()) }),
		gauge("eosflow_restoring", "1 while state stores are being restored from their changelogs.", bit(&h.restoring)),
		gauge("eosflow_running", "1 while Run is running.", bit(&h.running)),
		gauge("eosflow_fenced", "1 once another process with this instance id fenced this one.", bit(&h.fenced)),
		gauge("eosflow_assigned_partitions", "Input partitions assigned to this instance.", func() float64 { return float64(h.assignedCount()) }),
		gauge("eosflow_group_generation", "The consumer group generation this instance's client last joined (-1 when not in the group): a rising value means rebalances.", h.generation),
		&storeSizeCollector{r: r, desc: prometheus.NewDesc("eosflow_store_bytes",
			"Bytes of committed data in a state store's open tasks on this instance, as its engine counts them (memory: keys and values; pebble: its files and the memory its memtables took).",
			[]string{"store"}, nil)},
		&lagCollector{r: r,
			hw: prometheus.NewDesc("eosflow_input_lag_records", "Records of an assigned input partition after the group's committed offset, up to the high watermark (open transactions and markers included).",
				[]string{"topic", "partition"}, nil),
			lso: prometheus.NewDesc("eosflow_input_stable_lag_records", "Records of an assigned input partition after the group's committed offset, up to the last stable offset (what read_committed can read now).",
				[]string{"topic", "partition"}, nil)},
	}
	for _, c := range cs {
		if err := wrapped.Register(c); err != nil {
			for _, done := range cs {
				wrapped.Unregister(done)
			}
			return nil, err
		}
	}
	m.collectors = cs
	return m, nil
}

// unregister takes the Runner's metrics off its registry, for a Runner
// built but never run (a worker whose sibling could not be built); m may
// be nil.
func (m *metrics) unregister() {
	if m != nil {
		for _, c := range m.collectors {
			m.wrapped.Unregister(c)
		}
	}
}

// clientMetrics returns the hooks that register a new client's own
// metrics, unregistered when it closes. Each client gets its own: a closed
// client's connections may still report while its successor registers.
func (m *metrics) clientMetrics() *kprom.Metrics {
	return kprom.NewMetrics("eosflow", kprom.Subsystem("kafka"), kprom.Registerer(m.wrapped))
}

// ownRegistry is the registry metrics_addr serves when no Metrics option
// gave one: the runtime's metrics and the Go runtime's and process's.
func ownRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// abortReason classifies a batch that ends without committing, from what
// it recorded and the error its end returned.
func (b *batch) abortReason(endErr error) abortReason {
	switch {
	case b.vetoed:
		return abortVeto
	case b.slow != nil || b.timedOut:
		return abortTimeout
	case b.failed != nil && isPolicyFailure(b.failed):
		return abortProcessing
	case b.failed != nil && b.ctx.Err() != nil:
		return abortShutdown
	case b.failed != nil && b.pollFailed:
		return abortClient
	case b.failed != nil && errors.As(b.failed, new(*produceError)):
		return abortProduce
	case b.failed != nil && (b.interrupted || b.l.contexts.revokes.Load() != b.revokes):
		// User code, a held-back update or a timer firing saw its
		// partition's context end.
		return abortRebalance
	case b.failed != nil && !isRebuildable(b.failed):
		return abortProcessing
	case b.failed != nil:
		return abortClient
	case errors.As(endErr, new(*produceError)):
		return abortProduce
	case endErr != nil:
		return abortCommit
	case b.doomed || b.l.contexts.revokes.Load() != b.revokes:
		return abortRebalance
	}
	// End reported an abort with no revoke: an EndTxn answer it could not
	// confirm, and the broker had not committed.
	return abortCommit
}

// observeBatch records a batch's timings once it has ended; records > 0
// only for a committed batch.
func (m *metrics) observeBatch(b *batch, commit bool, ended time.Time, records int) {
	if m == nil {
		return
	}
	m.batchSeconds.Observe(b.decided.Sub(b.start).Seconds())
	if commit {
		m.commitSeconds.Observe(ended.Sub(b.decided).Seconds())
	}
	if records > 0 {
		m.batchRecords.Observe(float64(records))
	}
}

// health is what /readyz and the state gauges report; it is written by
// the consuming goroutine and the rebalance callbacks, and read by scrapes
// and probes.
type health struct {
	running   atomic.Bool
	stopping  atomic.Bool
	fenced    atomic.Bool
	restoring atomic.Bool
	// joined: the current session's client got its assignment (franz-go
	// calls OnPartitionsAssigned after every join, empty or not).
	joined atomic.Bool
	// restoreLeft is the running restore's changelog offsets left.
	restoreLeft atomic.Int64
	// client is the current session's client, for its group membership.
	client atomic.Pointer[kgo.Client]
	// admin is the Runner's admin client, for lag; nil outside Run.
	admin atomic.Pointer[kgo.Client]

	mu       sync.Mutex
	assigned map[string]map[int32]bool
}

// generation is the group generation of the current session's client, -1
// outside the group.
func (h *health) generation() float64 {
	cl := h.client.Load()
	if cl == nil {
		return -1
	}
	_, gen := cl.GroupMetadata()
	return float64(gen)
}

func (h *health) assign(got map[string][]int32) {
	h.joined.Store(true)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.assigned == nil {
		h.assigned = map[string]map[int32]bool{}
	}
	for topic, ps := range got {
		if h.assigned[topic] == nil {
			h.assigned[topic] = map[int32]bool{}
		}
		for _, p := range ps {
			h.assigned[topic][p] = true
		}
	}
}

func (h *health) revoke(gone map[string][]int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for topic, ps := range gone {
		for _, p := range ps {
			delete(h.assigned[topic], p)
		}
		if len(h.assigned[topic]) == 0 {
			delete(h.assigned, topic)
		}
	}
}

// sessionEnded forgets the assignment of a session's client, closed now.
func (h *health) sessionEnded() {
	h.client.Store(nil)
	h.joined.Store(false)
	h.mu.Lock()
	h.assigned = nil
	h.mu.Unlock()
}

func (h *health) assignedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ps := range h.assigned {
		n += len(ps)
	}
	return n
}

// assignment returns a copy of the assigned partitions.
func (h *health) assignment() map[string][]int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]int32, len(h.assigned))
	for topic, ps := range h.assigned {
		for p := range ps {
			out[topic] = append(out[topic], p)
		}
		slices.Sort(out[topic])
	}
	return out
}

// notReady returns why the Runner is not ready for traffic, or "" when it
// is: running, joined to its group (with partitions or idle), not
// restoring, not fenced, not stopping.
func (h *health) notReady(cfg config.Config) string {
	switch {
	case h.fenced.Load():
		return "fenced: another process with instance_id " + strconv.Quote(cfg.InstanceID) + " took over this instance's transactional id"
	case !h.running.Load():
		return "not running"
	case h.stopping.Load():
		return "stopping"
	case h.restoring.Load():
		return "restoring state stores: " + strconv.FormatInt(h.restoreLeft.Load(), 10) + " changelog offsets left"
	}
	if h.client.Load() == nil {
		return "connecting to the brokers"
	}
	if !h.joined.Load() {
		return "joining consumer group " + strconv.Quote(cfg.AppID)
	}
	return ""
}

// lagCollector reports the lag of this instance's assigned input
// partitions, read from the brokers when scraped (at most every
// lagMaxAge), never by the consuming goroutine.
type lagCollector struct {
	r       *Runner
	hw, lso *prometheus.Desc

	mu     sync.Mutex
	at     time.Time
	cached []prometheus.Metric
}

// Describe implements prometheus.Collector.
func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hw
	ch <- c.lso
}

// Collect implements prometheus.Collector.
func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) >= lagMaxAge {
		c.cached = c.read()
		c.at = time.Now()
	}
	for _, m := range c.cached {
		ch <- m
	}
}

// read asks the brokers for the group's committed offsets and the
// assigned partitions' start, end and last stable offsets.
func (c *lagCollector) read() []prometheus.Metric {
	r := c.r
	adminCl := r.health.admin.Load()
	parts := r.health.assignment()
	if adminCl == nil || len(parts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	adm := kadm.NewClient(adminCl)
	topics := make([]string, 0, len(parts))
	for topic := range parts {
		topics = append(topics, topic)
	}
	committed, err := adm.FetchOffsets(ctx, r.cfg.AppID)
	if err == nil {
		err = committed.Error()
	}
	var starts, ends, stable kadm.ListedOffsets
	if err == nil {
		starts, err = adm.ListStartOffsets(ctx, topics...)
	}
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, topics...)
	}
	if err == nil {
		stable, err = adm.ListCommittedOffsets(ctx, topics...)
	}
	if err != nil {
		r.log.Debug("reading input lag for metrics", zap.Error(err))
		return nil
	}
	var out []prometheus.Metric
	for topic, ps := range parts {
		for _, p := range ps {
			end, okEnd := ends.Lookup(topic, p)
			lso, okLSO := stable.Lookup(topic, p)
			if !okEnd || !okLSO || end.Err != nil || lso.Err != nil {
				continue
			}
			from := int64(0)
			if o, ok := committed.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
				from = o.At
			} else if s, ok := starts.Lookup(topic, p); ok && s.Err == nil {
				from = s.Offset
			}
			part := strconv.Itoa(int(p))
			out = append(out,
				prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(max(0, end.Offset-from)), topic, part),
				prometheus.MustNewConstMetric(c.lso, prometheus.GaugeValue, float64(max(0, lso.Offset-from)), topic, part))
		}
	}
	return out
}

// storeSizeCollector reports the size of each state store's open tasks
// when scraped.
type storeSizeCollector struct {
	r    *Runner
	desc *prometheus.Desc
}

func (c *storeSizeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *storeSizeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.r.state == nil {
		return
	}
	for name, n := range c.r.state.sizes() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), name)
	}
}
