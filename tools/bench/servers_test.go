package bench

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/topology"
)

func TestDedupAndPostgresOptions(t *testing.T) {
	o := Options{}
	o.defaults()
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(o.Cases, DedupMemoryCase) || slices.Contains(o.Cases, DedupRedisCase) || slices.Contains(o.Cases, DedupBloomCase) {
		t.Errorf("default cases without a Redis URL: %v; want dedup-memory only", o.Cases)
	}
	o = Options{RedisURL: "redis://127.0.0.1:1/0"}
	o.defaults()
	if !slices.Contains(o.Cases, DedupRedisCase) || !slices.Contains(o.Cases, DedupBloomCase) {
		t.Errorf("default cases with a Redis URL: %v", o.Cases)
	}
	for _, c := range []string{DedupRedisCase, DedupBloomCase} {
		o = Options{Cases: []string{c}}
		o.defaults()
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), "RedisURL") || !strings.Contains(err.Error(), "redis.sh start") {
			t.Errorf("%s without a Redis URL: %v", c, err)
		}
	}
	o = Options{Pipeline: PipelinePostgres}
	o.defaults()
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "PostgresURL") || !strings.Contains(err.Error(), "pg.sh start") {
		t.Errorf("postgres pipeline without a database: %v", err)
	}
	o = Options{Pipeline: PipelinePostgres, PostgresURL: "postgres://x", Sweep: []time.Duration{time.Second}}
	o.defaults()
	if err := o.validate(); err == nil {
		t.Error("a sweep of the postgres pipeline accepted")
	}
	o = Options{Pipeline: PipelinePostgres, PostgresURL: "postgres://x", Cases: []string{ExactlyOnce}}
	o.defaults()
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), PostgresAtLeastOnce) {
		t.Errorf("exactly-once under the postgres pipeline: %v", err)
	}
	o = Options{Pipeline: PipelinePostgres, PostgresURL: "postgres://x"}
	o.defaults()
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.BatchRecords != DefaultPostgresBatchRecords || o.LatencyDuration >= 0 || strings.Join(o.Cases, ",") != "postgres/exactly-once,postgres/at-least-once" {
		t.Errorf("postgres defaults: batch %d, latency %s, cases %v", o.BatchRecords, o.LatencyDuration, o.Cases)
	}
	cs := o.plan()
	if cs[0].engine != EnginePgsink || cs[1].engine != EngineFranzGo || cs[1].guarantee != AtLeastOnce || cs[0].commit != 0 {
		t.Errorf("postgres plan: %+v", cs)
	}
	o = Options{Cases: []string{DedupMemoryCase, DedupBloomCase}, RedisURL: "redis://x"}
	o.defaults()
	if cs := o.plan(); cs[0].dedup != DedupMemory || cs[1].dedup != DedupBloom || cs[1].kind != ExactlyOnce {
		t.Errorf("dedup plan: %+v", cs)
	}
}

func TestReportBaseline(t *testing.T) {
	h := &harness{o: &Options{Records: 10, RecordSize: 100}, broker: "b"}
	cases := []caseSpec{{name: ExactlyOnce}, {name: DedupMemoryCase}, {name: DedupRedisCase}, {name: RawFranzGo}}
	runs := [][]runResult{
		{{rate: 500_000, cpuPerRecord: 2 * time.Microsecond}},
		{{rate: 400_000, cpuPerRecord: 3 * time.Microsecond}},
		nil, // failed
		{{rate: 600_000}},
	}
	rep := h.report(cases, runs, make([]error, len(cases)), nil)
	b := rep.Results[1].Baseline
	if b == nil || b.Against != ExactlyOnce || b.Ratio != 0.8 || b.MicrosPerRecordAdded != 0.5 || b.CPUMicrosPerRecordAdded != 1 {
		t.Errorf("dedup-memory baseline: %+v", b)
	}
	for _, i := range []int{0, 2, 3} {
		if rep.Results[i].Baseline != nil {
			t.Errorf("%s has a baseline: %+v", rep.Results[i].Name, rep.Results[i].Baseline)
		}
	}
}

func TestDedupID(t *testing.T) {
	for in, want := range map[string]string{"id=12;xxxx": "id=12", "ID=7;T=1;": "ID=7", "noid": "noid"} {
		if got := dedupID(topology.Record[[]byte]{Value: []byte(in)}); got != want {
			t.Errorf("dedupID(%q) = %q, want %q", in, got, want)
		}
	}
	if pgTable("eosbench-postgres-exactly-once-1-00ab12") != "eosbench_postgres_exactly_once_1_00ab12" {
		t.Error(pgTable("eosbench-postgres-exactly-once-1-00ab12"))
	}
}

// The workers refuse a dedup store they cannot build and a postgres case
// without a database, before they say they are ready.
func TestWorkRefusesDedupAndPostgres(t *testing.T) {
	t.Setenv(EnvRedisURL, "")
	t.Setenv(EnvPostgresURL, "")
	for _, spec := range []WorkerSpec{
		{Case: ExactlyOnce, Dedup: "etcd"},
		{Case: ExactlyOnce, Dedup: DedupRedis, DedupName: "n"},
		{Case: ExactlyOnce, Pipeline: PipelineCount, State: StateMemory, Dedup: DedupMemory},
		{Case: PostgresExactlyOnce, Pipeline: PipelinePostgres, Table: "t"},
	} {
		spec.Brokers, spec.Input, spec.Output, spec.AppID = []string{"127.0.0.1:1"}, "i", "o", "a"
		spec.CommitInterval, spec.BatchRecords = time.Second, 10
		var out strings.Builder
		if err := Work(t.Context(), spec, &out); err == nil || out.Len() > 0 {
			t.Errorf("%+v: err %v, printed %q", spec, err, out.String())
		}
	}
}

// A short run of exactly-once and the dedup cases on the embedded broker,
// in this process: every record comes out once, and each dedup case is
// compared with exactly-once of the same run. The Redis cases need
// EOS_REDIS_URL, and must leave no keys behind.
func TestRunDedupCases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs up to four pipelines")
	}
	cases := []string{ExactlyOnce, DedupMemoryCase}
	url := os.Getenv(EnvRedisURL)
	if url != "" {
		cases = append(cases, DedupRedisCase, DedupBloomCase)
	} else {
		t.Logf("%s is not set: only dedup-memory runs; for the Redis cases run integration/redis/redis.sh start and export %s=$(integration/redis/redis.sh url)", EnvRedisURL, EnvRedisURL)
	}
	rep := shortRun(t, Options{Cases: cases, RedisURL: url, Rate: 2000, LatencyDuration: 500 * time.Millisecond})
	for _, r := range rep.Results {
		checkRan(t, r)
		if r.Name == ExactlyOnce {
			continue
		}
		if r.LatencySamples == 0 || r.Baseline == nil || r.Baseline.Against != ExactlyOnce || r.Baseline.Ratio <= 0 {
			t.Errorf("%s: latency or baseline missing: %+v", r.Name, r)
		}
	}
	if url == "" {
		return
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	cl := redis.NewClient(opts)
	defer cl.Close()
	if keys, _, err := cl.Scan(t.Context(), 0, "eosbench-*", 1000).Result(); err != nil || len(keys) > 0 {
		t.Errorf("keys left in Redis: %v (%v)", keys, err)
	}
}

// A short run of both postgres cases on the embedded broker, in this
// process: the table must hold every record once (or the run fails), and
// every run's tables are dropped. Needs EOS_POSTGRES_URL.
func TestRunPostgresCases(t *testing.T) {
	url := os.Getenv(EnvPostgresURL)
	if url == "" {
		t.Skipf("%s is not set: run integration/postgres/pg.sh start and export %s=$(integration/postgres/pg.sh url)", EnvPostgresURL, EnvPostgresURL)
	}
	rep := shortRun(t, Options{Pipeline: PipelinePostgres, PostgresURL: url})
	for _, r := range rep.Results {
		checkRan(t, r)
		if r.BatchRecords != DefaultPostgresBatchRecords || r.LatencySamples != 0 {
			t.Errorf("%s: batches of %d, %d latency samples", r.Name, r.BatchRecords, r.LatencySamples)
		}
	}
	if b := rep.Results[0].Baseline; b == nil || b.Against != PostgresAtLeastOnce {
		t.Errorf("the sink is not compared with the loop: %+v", b)
	}
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var left int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'eosbench\_postgres%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d tables left (%v)", left, err)
	}
}

// shortRun runs o with a few thousand records, once, in this process on
// the embedded broker.
func shortRun(t *testing.T, o Options) *Report {
	t.Helper()
	o.Records, o.Partitions, o.Repeat, o.CommitInterval, o.RunTimeout = 3000, 3, 1, 20*time.Millisecond, 90*time.Second
	if o.Pipeline != PipelinePostgres {
		o.BatchRecords = 250
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(o.Cases) * max(len(o.Workers), 1); len(rep.Results) != want && o.Cases != nil {
		t.Fatalf("%d results for %d cases at %v workers", len(rep.Results), len(o.Cases), o.Workers)
	}
	return rep
}

// checkRan fails r unless it ran once and every record came out once.
func checkRan(t *testing.T, r Result) {
	t.Helper()
	if r.Error != "" || r.Runs != 1 {
		t.Fatalf("%s: %d runs, error %q", r.Name, r.Runs, r.Error)
	}
	if r.RecordsPerSec <= 0 || r.Duplicates != 0 || r.Missing != 0 {
		t.Errorf("%s: %.0f records/s, %d duplicates, %d missing", r.Name, r.RecordsPerSec, r.Duplicates, r.Missing)
	}
}
