package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/sink/pgsink"
	"github.com/eosflow/eosflow/tools/chaos"
)

// The sinks verify --sink can run: the exactly-once Postgres sink, and its
// control, a loop that commits Kafka offsets after its own database commit.
const (
	sinkPostgres            = "postgres"
	sinkPostgresAtLeastOnce = "postgres-at-least-once"
)

// pgVerify is what verify --sink postgres does: the workload and faults of
// verify, into a database table.
type pgVerify struct {
	sink                     string
	url, restartCmd          string
	records, partitions      int
	workers, kills, terms    int
	rebalances               int
	brokerRestarts           int
	pgRestarts               int
	brokerRestartCmd         string
	netCmd, netDir           string // the network harness, and where it runs
	netCuts, pauses          int
	coordinatorCuts          int
	cutFor, pauseFor         time.Duration
	batchRecords             int
	commitDelay              time.Duration
	sessionTimeout, duration time.Duration
	keep                     bool
	events                   func(string)
}

// pgVerifyResult is the verdict of a verify --sink run.
type pgVerifyResult struct {
	Sink             string `json:"sink"`
	Records          int    `json:"records"`
	Rows             int64  `json:"rows"`
	Missing          int64  `json:"missing"`
	Duplicates       int64  `json:"duplicates"`
	Kills            int    `json:"kills"`
	Terms            int    `json:"terms"`
	WorkersAdded     int    `json:"workers_added"`
	WorkersRemoved   int    `json:"workers_removed"`
	BrokerRestarts   int    `json:"broker_restarts"`
	PostgresRestarts int    `json:"postgres_restarts"`
	// NetCuts, Pauses and CoordinatorCuts count the network faults that
	// fired; NetFaults has each, with its evidence and recovery, and
	// Recovery sums the recoveries up per action.
	NetCuts         int              `json:"net_cuts"`
	Pauses          int              `json:"pauses"`
	CoordinatorCuts int              `json:"coordinator_cuts"`
	NetFaults       []chaos.NetFault `json:"net_faults,omitempty"`
	Recovery        []chaos.Recovery `json:"recovery,omitempty"`
	// FaultsDuringWork counts the faults injected while records were
	// still missing from the table: the ones that tested something.
	FaultsDuringWork int      `json:"faults_during_work"`
	RatePerWorker    int      `json:"rate_per_worker"`
	WorkerFailures   []string `json:"worker_failures"`
	Seconds          float64  `json:"seconds"`
	Table            string   `json:"table"`
	Pass             bool     `json:"pass"`
}

// pgWorker is one worker process and how it ended.
type pgWorker struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{}
	stderr  *tailBuffer
	planned bool // verify killed or stopped it
}

// tailBuffer keeps the last lines a worker wrote to stderr.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (t *tailBuffer) read(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		t.mu.Lock()
		t.lines = append(t.lines, s.Text())
		if len(t.lines) > 5 {
			t.lines = t.lines[1:]
		}
		t.mu.Unlock()
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, " | ")
}

// retryDB runs fn until it succeeds, for up to a minute: the database may
// be restarting (a planned fault, or another user of the server).
func retryDB(ctx context.Context, fn func(context.Context) error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := fn(octx)
		cancel()
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pgVerifyTable is the table form of a verify --sink result.
func pgVerifyTable(r pgVerifyResult) *table {
	t := newTable("SINK", "RECORDS", "ROWS", "MISSING", "DUPLICATES", "KILLS", "TERMS", "ADDED", "REMOVED", "BROKER RESTARTS", "PG RESTARTS", "FAULTS DURING WORK", "SECONDS")
	t.add(r.Sink, r.Records, r.Rows, r.Missing, r.Duplicates, r.Kills, r.Terms, r.WorkersAdded, r.WorkersRemoved, r.BrokerRestarts, r.PostgresRestarts, r.FaultsDuringWork, fmt.Sprintf("%.1f", r.Seconds))
	return t
}

// newVerifyPgWorkerCmd is the worker process of verify --sink: the
// exactly-once Postgres sink, or with --sink postgres-at-least-once the
// control, writing one row per record.
func newVerifyPgWorkerCmd(g *globals) *cobra.Command {
	var (
		sink, app, instance, in, table, url string
		batchRecords, rate                  int
		commitDelay, sessionTimeout         time.Duration
	)
	cmd := &cobra.Command{
		Use:    "pg-worker",
		Short:  "Run one worker of eosctl verify --sink (started by verify itself)",
		Hidden: true,
		Args:   usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.pipelineConfig()
			if err != nil {
				return err
			}
			cfg.AppID, cfg.InstanceID = app, instance
			cfg.SessionTimeout = sessionTimeout
			cfg.RebalanceTimeout = max(10*time.Second, 2*sessionTimeout)
			cfg.MaxBatchRecords = batchRecords
			cfg.LeaveGroupOnClose = true
			ctx, stop := untilSignal(cmd)
			defer stop()
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				return err
			}
			defer pool.Close()
			write := func(ctx context.Context, tx pgx.Tx, recs []*kgo.Record) error { return copyRows(ctx, tx, table, recs) }
			// Paced at --rate, at least --commit-delay, before the commit
			// that makes the batch done: a kill often lands there.
			pause := func(n int) {
				d := commitDelay
				if rate > 0 {
					d = max(d, time.Duration(n)*time.Second/time.Duration(rate))
				}
				time.Sleep(d)
			}
			if sink == sinkPostgresAtLeastOnce {
				return atLeastOnceIntoPostgres(ctx, cfg, in, pool, write, pause)
			}
			s, err := pgsink.New(cfg, pool, []string{in}, func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
				if err := write(ctx, tx, b.Records); err != nil {
					return err
				}
				pause(len(b.Records))
				return nil
			})
			if err != nil {
				return err
			}
			return s.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&sink, "sink", sinkPostgres, "postgres or postgres-at-least-once")
	f.StringVar(&app, "app", "", "consumer group")
	f.StringVar(&instance, "instance", "", "instance id")
	f.StringVar(&in, "in", "", "input topic")
	f.StringVar(&table, "table", "", "table of rows")
	f.StringVar(&url, "postgres-url", "", "database")
	f.IntVar(&batchRecords, "batch-records", 500, "most records in one batch")
	f.DurationVar(&commitDelay, "commit-delay", 20*time.Millisecond, "pause before each batch commits")
	f.IntVar(&rate, "rate", 0, "records per second at most; 0: unlimited")
	f.DurationVar(&sessionTimeout, "session-timeout", 6*time.Second, "group session timeout")
	for _, n := range []string{"app", "instance", "in", "table", "postgres-url"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
}

// copyRows writes a row per record into table: its sequence number (the
// record's value) and where it was read.
func copyRows(ctx context.Context, tx pgx.Tx, table string, recs []*kgo.Record) error {
	rows := make([][]any, len(recs))
	for i, r := range recs {
		seq, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			return fmt.Errorf("record %s/%d@%d: value %q is not a sequence number", r.Topic, r.Partition, r.Offset, r.Value)
		}
		rows[i] = []any{seq, r.Topic, r.Partition, r.Offset}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, []string{"seq", "topic", "partition", "offset"}, pgx.CopyFromRows(rows))
	return err
}

// atLeastOnceIntoPostgres is the control: the loop consumers write by
// hand, the batch's rows in a database transaction and then its offsets
// committed to Kafka. Its pause is between the two, where a kill makes it
// write the batch again.
func atLeastOnceIntoPostgres(ctx context.Context, cfg config.Config, in string, pool *pgxpool.Pool, write func(context.Context, pgx.Tx, []*kgo.Record) error, pause func(int)) error {
	opts, err := kafkautil.ConnOptions(cfg)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumerGroup(cfg.AppID), kgo.ConsumeTopics(in), kgo.DisableAutoCommit(),
		kgo.InstanceID(cfg.InstanceID), kgo.SessionTimeout(cfg.SessionTimeout), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		recs := cl.PollRecords(ctx, cfg.MaxBatchRecords).Records()
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return nil
		}
		if len(recs) > 0 {
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(ctx, tx, recs) }); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			pause(len(recs))
			if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
				return err
			}
		}
		cl.AllowRebalance()
	}
}

// verifySink runs verify --sink with verify's workload and fault flags.
func verifySink(cmd *cobra.Command, g *globals, o chaos.Options, pg pgVerify, verbose bool) error {
	switch pg.sink {
	case sinkPostgres, sinkPostgresAtLeastOnce:
	default:
		return usageErrorf("--sink %q: want postgres, postgres-at-least-once, redis-dedup or redis-dedup-none", pg.sink)
	}
	if pg.url == "" {
		return usageErrorf("--sink %s needs --postgres-url (or EOS_POSTGRES_URL), e.g. $(integration/postgres/pg.sh url)", pg.sink)
	}
	if pg.pgRestarts > 0 && pg.restartCmd == "" {
		return usageErrorf("--postgres-restarts needs --postgres-restart-cmd, e.g. \"integration/postgres/pg.sh restart --hard\"")
	}
	if o.BrokerRestarts > 0 && o.BrokerRestartCmd == "" {
		return usageErrorf("--sink with --broker-restarts needs --broker-restart-cmd, e.g. \"integration/kafka/kafka.sh restart --hard\"")
	}
	if o.Records <= 0 || o.Kills < 0 || o.Terms < 0 || o.Rebalances < 0 || pg.pgRestarts < 0 || o.NetCuts < 0 || o.Pauses < 0 || o.CoordinatorCuts < 0 || o.CutFor < 0 || o.PauseFor < 0 {
		return usageErrorf("--records must be positive and --kills, --terms, --rebalances, --postgres-restarts, --net-cuts, --pauses, --coordinator-cuts, --cut-for and --pause-for not negative")
	}
	if o.NetCuts+o.Pauses+o.CoordinatorCuts > 0 && (o.NetClusterCmd == "" || !g.brokersSet && os.Getenv("EOS_BROKERS") == "") {
		return usageErrorf("%v", chaos.ErrNoNetCluster)
	}
	o.NetDefaults()
	pg.netCmd, pg.netDir, pg.netCuts, pg.pauses, pg.coordinatorCuts = o.NetClusterCmd, o.BrokerRestartDir, o.NetCuts, o.Pauses, o.CoordinatorCuts
	pg.cutFor, pg.pauseFor = o.CutFor, o.PauseFor
	pg.records, pg.partitions, pg.workers = o.Records, int(o.Partitions), max(o.Workers, 1)
	pg.kills, pg.terms, pg.rebalances, pg.brokerRestarts = o.Kills, o.Terms, o.Rebalances, o.BrokerRestarts
	pg.brokerRestartCmd, pg.batchRecords, pg.commitDelay = o.BrokerRestartCmd, o.BatchRecords, o.CommitDelay
	pg.sessionTimeout, pg.duration, pg.keep = o.SessionTimeout, o.Duration, o.KeepTopics
	if pg.partitions <= 0 {
		pg.partitions = 6
	}
	errw := cmd.ErrOrStderr()
	if verbose {
		pg.events = func(line string) { fmt.Fprintln(errw, "verify:", line) }
	}
	ctx, stop := untilSignal(cmd)
	defer stop()
	res, err := runVerifyPostgres(ctx, g, pg)
	if err != nil {
		return err
	}
	if err := g.render(cmd.OutOrStdout(), res, pgVerifyTable(res)); err != nil {
		return err
	}
	if g.output != outputJSON && len(res.NetFaults) > 0 {
		t := newTable("CHECK", "RESULT")
		addNetFaultRows(t, res.NetCuts, res.Pauses, res.CoordinatorCuts, res.NetFaults, res.Recovery, "rows written")
		if err := t.write(cmd.OutOrStdout()); err != nil {
			return err
		}
	}
	why := fmt.Sprintf("%d missing, %d duplicate rows", res.Missing, res.Duplicates)
	if len(res.WorkerFailures) > 0 {
		why += "; workers stopped on their own: " + strings.Join(res.WorkerFailures, "; ")
	}
	if failed := chaos.NetFailures(res.NetFaults); len(failed) > 0 {
		why += fmt.Sprintf("; %d network faults did not take, hold or heal: %s", len(failed), strings.Join(failed, "; "))
	}
	return g.verdict(cmd.OutOrStdout(), res.Pass,
		fmt.Sprintf("every record in table %s exactly once, through %d kills, %d SIGTERMs, %d rebalances, %d broker and %d database restarts%s",
			res.Table, res.Kills, res.Terms, res.WorkersAdded+res.WorkersRemoved, res.BrokerRestarts, res.PostgresRestarts, netSummary(res)), why)
}
