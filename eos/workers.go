package eos

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/topology"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// WorkerError is how Run reports the error that stopped one of its
// workers (workers > 1): it names the worker, whose instance id is the
// one to look for in the logs, the group and `eosctl txn`. The other
// workers were stopped cleanly. errors.Is and errors.As see through it,
// e.g. to a *FencedError.
type WorkerError struct {
	Worker     int    // the worker's index, 0 to workers-1
	InstanceID string // the worker's instance id, <instance_id>_<Worker>
	Err        error  // what stopped it
}

// Error names the worker and its error.
func (e *WorkerError) Error() string {
	return fmt.Sprintf("eos: worker %d (instance_id %q): %v", e.Worker, e.InstanceID, e.Err)
}

// Unwrap exposes the worker's error.
func (e *WorkerError) Unwrap() error { return e.Err }

// workers is what a Runner with workers > 1 runs instead of a session of
// its own: one Runner per worker, each with the configuration
// runcfg.ForWorker gives it and the same topology and options.
type workers struct {
	runners  []*Runner
	gatherer prometheus.Gatherer // what /metrics serves; nil when metrics are off
}

// newWorkers builds a Runner that runs n workers. The options apply to
// every worker: a Logger gets the worker's index and instance id as
// fields, and every worker registers its metrics, labelled with its own
// instance id, on the one registry (metrics_addr's, or Metrics').
func newWorkers(cfg config.Config, t *topology.Topology, n int, opts []Option) (*Runner, error) {
	// Applied to the parent only to learn the logger and the registry.
	r := &Runner{cfg: cfg, contract: contractOf(cfg), top: t, purge: &purger{}, waits: newWaits(cfg)}
	for _, o := range opts {
		o.apply(r)
	}
	var err error
	if r.log, err = runnerLogger(cfg, r.log); err != nil {
		return nil, err
	}
	base := r.log
	r.log = r.log.With(zap.String("app_id", cfg.AppID), zap.String("guarantee", string(cfg.Guarantee)),
		zap.String("instance_id", cfg.InstanceID), zap.Int("workers", n))
	g := &workers{}
	reg := r.registerer
	if reg == nil && cfg.MetricsAddr != "" {
		reg = ownRegistry()
	}
	if reg != nil {
		g.gatherer, _ = reg.(prometheus.Gatherer)
		if reg == prometheus.DefaultRegisterer {
			g.gatherer = prometheus.DefaultGatherer
		}
		if cfg.MetricsAddr != "" && g.gatherer == nil {
			return nil, errors.New("eos: metrics_addr serves the registry given to Metrics, which cannot be read (not a prometheus.Gatherer); pass a *prometheus.Registry")
		}
	}
	for i := range n {
		wc := runcfg.ForWorker(cfg, i)
		// Served once, by the parent, for all of them: its QueryHandler
		// reads every worker's stores.
		wc.MetricsAddr, wc.MetricsServeQueries = "", false
		wopts := append(copyOpts(opts), Logger(base.With(zap.Int("worker", i), zap.String("instance_id", wc.InstanceID))))
		if reg != nil {
			wopts = append(wopts, Metrics(reg))
		}
		w, err := newChecked(wc, t, wopts)
		if err != nil {
			for _, done := range g.runners {
				done.metrics.unregister()
			}
			return nil, fmt.Errorf("eos: worker %d (instance_id %q): %w", i, wc.InstanceID, err)
		}
		w.worker = true
		g.runners = append(g.runners, w)
	}
	r.workers = g
	return r, nil
}

// copyOpts copies opts, so that appending a worker's own options never
// writes into the caller's array.
func copyOpts(opts []Option) []Option { return append([]Option(nil), opts...) }

// runWorkers runs every worker until ctx ends, then returns nil once all
// stopped cleanly; the first worker to stop with an error stops the
// others, and its error, as a *WorkerError, is what Run returns.
func (r *Runner) runWorkers(ctx context.Context, cancel context.CancelFunc) error {
	ws := r.workers.runners
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(ws))
	for i, w := range ws {
		go func() { results <- result{i, w.Run(ctx)} }()
	}
	r.log.Info("started workers", zap.String("first_transactional_id", runcfg.TransactionalID(ws[0].cfg)),
		zap.String("last_transactional_id", runcfg.TransactionalID(ws[len(ws)-1].cfg)))
	var first error
	for range ws {
		res := <-results
		if res.err == nil {
			continue
		}
		werr := &WorkerError{Worker: res.i, InstanceID: ws[res.i].cfg.InstanceID, Err: res.err}
		if first == nil {
			first = werr
			r.log.Error("a worker stopped with an error; stopping the others", zap.Error(werr))
			cancel()
			continue
		}
		r.log.Warn("another worker stopped with an error", zap.Error(werr))
	}
	return first
}

// workersGatherer is what /metrics serves for the workers, nil with one
// worker or without metrics.
func (r *Runner) workersGatherer() prometheus.Gatherer {
	if r.workers == nil {
		return nil
	}
	return r.workers.gatherer
}

// closeWorkers marks every worker closed once Run returned (Run's
// context ended theirs), or before Run, so none can be run on its own.
func (r *Runner) closeWorkers() {
	if r.workers == nil {
		return
	}
	for _, w := range r.workers.runners {
		_ = w.Close()
	}
}

// stats sums the workers' counters.
func (g *workers) stats() Stats {
	var s Stats
	for _, w := range g.runners {
		ws := w.Stats()
		s.RecordsIn += ws.RecordsIn
		s.RecordsOut += ws.RecordsOut
		s.Committed += ws.Committed
		s.Aborted += ws.Aborted
		s.Rebuilds += ws.Rebuilds
		s.DeadLettered += ws.DeadLettered
		s.Skipped += ws.Skipped
		s.Retries += ws.Retries
		s.Restored += ws.Restored
		s.StoresWiped += ws.StoresWiped
		s.Redone += ws.Redone
		s.Rewinds += ws.Rewinds
		s.TimerFirings += ws.TimerFirings
		s.TaskIdleWaits += ws.TaskIdleWaits
		s.TaskIdleEnforced += ws.TaskIdleEnforced
		s.GlobalRecords += ws.GlobalRecords
		s.ExpiriesSkipped += ws.ExpiriesSkipped
		s.ExpiriesDeadLettered += ws.ExpiriesDeadLettered
	}
	return s
}

// notReady is the first worker's reason not to be ready, naming it, or
// "" when every worker is ready.
func (g *workers) notReady() string {
	for i, w := range g.runners {
		if why := w.health.notReady(w.cfg); why != "" {
			return "worker " + strconv.Itoa(i) + " (" + w.cfg.InstanceID + "): " + why
		}
	}
	return ""
}

// ready is /readyz's answer when every worker is ready.
func (g *workers) ready() string {
	n := 0
	for _, w := range g.runners {
		n += w.health.assignedCount()
	}
	return fmt.Sprintf("ready: %d partitions assigned over %d workers", n, len(g.runners))
}

// WorkerStats returns each worker's counters, in worker order (one entry
// with workers = 1), so that a caller can see how the group spread the
// work; Stats is their sum.
func (r *Runner) WorkerStats() []Stats {
	if r.workers == nil {
		return []Stats{r.Stats()}
	}
	out := make([]Stats, 0, len(r.workers.runners))
	for _, w := range r.workers.runners {
		out = append(out, w.Stats())
	}
	return out
}
