package main

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/chaos"
)

// processStarted is when this process started, as near as Go lets us
// see: a verify worker measures its time to the first commit from it.
var processStarted = time.Now()

// newVerifyWorkerCmd is the worker process `eosctl verify` starts: one
// eos.Runner with the sample pipeline. It stops gracefully on SIGTERM and
// prints its counters and why it stopped (chaos.WorkerReport) as one JSON
// line on stdout; before that, a chaos.WorkerEvent line once its first
// batch committed, which verify reads while it runs. Its exit status says
// why it stopped too, so verify can fail a run on any stop it did not
// inject: 0 after a clean stop on SIGTERM, chaos.ExitInjected after an
// injected processing error, 2 on settings no restart can fix (including
// a missing ACL or a refused login), 1 on any
// other error.
func newVerifyWorkerCmd(g *globals) *cobra.Command {
	var (
		o              chaos.WorkerOptions
		app, instance  string
		guarantee      string
		sessionTimeout time.Duration
		batchRecords   int
		pipeline       string
		stateKind      string
		stateDir       string
		groupBy        string
		dedupMode      string
	)
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "Run one worker of eosctl verify (started by verify itself)",
		Hidden: true,
		Args:   usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.pipelineConfig()
			if err != nil {
				return err
			}
			cfg.AppID, cfg.InstanceID = app, instance
			cfg.Guarantee = config.Guarantee(guarantee)
			cfg.SessionTimeout = sessionTimeout
			cfg.RebalanceTimeout = max(10*time.Second, 2*sessionTimeout)
			cfg.MaxBatchRecords = batchRecords
			if stateDir != "" {
				cfg.StateDir = stateDir
			}
			o.Config = cfg
			o.Pipeline, o.State, o.GroupBy = chaos.PipelineKind(pipeline), chaos.StateKind(stateKind), chaos.Grouping(groupBy)
			o.DedupMode = chaos.DedupMode(dedupMode)
			if err := o.Validate(); err != nil {
				return usageError{err} // a restart cannot fix it: verify stops
			}
			zc := zap.NewProductionConfig()
			zc.OutputPaths = []string{"stderr"}
			// EOS_LOG_LEVEL=debug reaches the worker's own logger too,
			// so a failed run's logs can show every batch's end.
			zc.Level = zap.NewAtomicLevelAt(runcfg.Level(cfg))
			if l, err := zc.Build(); err == nil {
				o.Logger = l.With(zap.Int("pid", os.Getpid()))
				defer func() { _ = l.Sync() }()
			}
			out := json.NewEncoder(cmd.OutOrStdout()) // one Write per line: verify reads them as they come
			o.Started = processStarted
			o.FirstCommit = func(after time.Duration) {
				_ = out.Encode(chaos.WorkerEvent{Event: chaos.EventFirstCommit, Instance: instance, AfterMs: after.Milliseconds()})
			}
			ctx, stop := untilSignal(cmd)
			defer stop()
			rep, err := chaos.RunWorker(ctx, o)
			_ = out.Encode(rep)
			switch {
			case rep.Stopped == chaos.StopCancelled:
				return nil
			case rep.Stopped == chaos.StopInjected:
				return &exitError{code: chaos.ExitInjected, err: err}
			case errors.Is(err, config.ErrInvalid):
				return usageError{err} // a restart cannot fix it: verify stops
			case errors.Is(err, eos.ErrNotAuthorized), errors.Is(err, eos.ErrAuthentication):
				// A missing grant or a refused login: verify stops at
				// once with the fix rather than restarting the worker
				// until the run times out.
				return usageError{err}
			}
			return err // exit 1: a real failure, which fails the verify run
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application id: the consumer group and transactional.id prefix")
	f.StringVar(&instance, "instance", "", "instance id, stable across restarts so a restart fences its zombie")
	f.StringVar(&o.In, "in", "", "input topic")
	f.StringVar(&o.Out, "out", "", "output topic")
	f.StringVar(&o.Payments, "payments", "", "second input topic of the join pipeline (the orders are --in)")
	f.StringVar(&o.Table, "table", "", "global table topic of the global-join pipeline (the orders are --in)")
	f.BoolVar(&o.TableSnapshot, "table-snapshot", false, "global-join pipeline only: join a copy of the table read once at start, never kept current (a negative control)")
	f.StringVar(&guarantee, "guarantee", string(config.ExactlyOnce), "delivery guarantee")
	f.IntVar(&o.Rate, "rate", 0, "records per second at most; 0 unlimited")
	f.DurationVar(&o.CommitDelay, "commit-delay", 0, "pause before each batch commits"+durationFlagHelp)
	f.Float64Var(&o.AbortRate, "abort-rate", 0, "probability per batch of an injected processing error")
	f.DurationVar(&sessionTimeout, "session-timeout", 6*time.Second, "group session timeout"+durationFlagHelp)
	f.IntVar(&batchRecords, "batch-records", 500, "most records in one batch")
	f.StringVar(&pipeline, "pipeline", string(chaos.PipelineUpper), "sample pipeline: upper (stateless), count (a state store per key), windowed (a count per key and event-time window), join (two streams within a window), outer-join (orders and payments of one topic outer-joined), global-join (orders left-joined with a global table) or dedup (an effect in Redis behind a dedup store)")
	f.StringVar(&stateKind, "state", "", "store engine of the count, windowed, join, outer-join and global-join pipelines: memory (default) or pebble")
	f.StringVar(&groupBy, "group-by", "", "what the count pipeline counts by: key (default) or value (through a repartition topic)")
	f.StringVar(&stateDir, "state-dir", "", "directory of the state stores, kept across restarts; default state_dir (EOS_STATE_DIR)")
	f.StringVar(&o.RedisURL, "redis-url", os.Getenv(chaos.EnvRedisURL), "Redis of the dedup pipeline's store and effects (default "+chaos.EnvRedisURL+", which verify sets)")
	f.StringVar(&dedupMode, "dedup-mode", "", "when the dedup pipeline marks ids: after (default), before, or none (no Dedup node)")
	f.StringVar(&o.DedupPrefix, "dedup-prefix", "", "key prefix of the dedup pipeline's store")
	f.StringVar(&o.EffectsKey, "effects-key", "", "Redis hash the dedup pipeline's effects count in")
	for _, name := range []string{"app", "instance", "in", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
