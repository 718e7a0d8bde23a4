package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eosflow/eosflow/tools/sim"
)

// exploreFlags are verify's flags for seeded fault schedules.
type exploreFlags struct {
	on       bool
	seed     uint64 // verify's --seed: the first seed
	seeds    int
	parallel int
	records  int    // verify's --records when given, else the harness's default
	postgres string // verify's --postgres-url: the Postgres sink's schedules run only with one
}

func addExploreFlags(cmd *cobra.Command, e *exploreFlags) {
	f := cmd.Flags()
	f.BoolVar(&e.on, "explore", false, "run seeded fault schedules in-process on the embedded broker instead of worker processes: each schedule strikes protocol points (a request of the transaction or group protocol, a record, a timer's firing, a state store write, a restore's end, a side effect, a dedup store call, a database commit) with faults (refusals, lost answers, dropped connections, requests applied late, coordinators moving, crashes, joins, leaves, slow code, failing stores, database commits cut or their answers lost) and is judged like a verify run; with --postgres-url the Postgres sink's schedules run too (--sink postgres: only those); --seed is the first seed, --records the input per schedule (default 300; below about 200 the schedules that start at a restore's end may not reach it)")
	f.IntVar(&e.seeds, "seeds", 1, "with --explore: how many seeds to run per pipeline")
	f.IntVar(&e.parallel, "parallel", 0, "with --explore: schedules run at once, each on its own embedded broker (0: 12 per core)")
}

// explorePipelines maps verify's --pipeline, --state and --sink to the
// harness's pipelines. With none given it runs them all, the Postgres
// sink's only with a database (url).
func explorePipelines(pipeline, stateKind, sink, url string, changed bool) ([]string, error) {
	switch {
	case sink == sinkPostgres && url == "":
		return nil, usageErrorf("--explore --sink postgres needs --postgres-url (or EOS_POSTGRES_URL), e.g. $(integration/postgres/pg.sh url)")
	case sink == sinkPostgres:
		return []string{sim.PgSink}, nil
	case sink != "":
		return nil, usageErrorf("--explore runs --sink postgres (got %s); the other sinks are checked by verify without --explore", sink)
	case !changed && url != "":
		return append(slices.Clone(sim.Pipelines), sim.PgSink), nil
	case !changed:
		return sim.Pipelines, nil
	}
	name := pipeline
	switch pipeline {
	case "count":
		name = "count-" + cmp.Or(stateKind, "memory")
	case "dedup":
		return []string{sim.DedupAfter, sim.DedupBefore}, nil
	}
	if !slices.Contains(sim.Pipelines, name) {
		return nil, usageErrorf("--explore runs --pipeline upper, count (--state memory or pebble), dedup, windowed, join or timers (got %s); the others are checked by verify without --explore", name)
	}
	return []string{name}, nil
}

// runExplore runs the schedules, prints each failure with its smallest
// failing schedule and the command that replays it, then the coverage
// table. It fails when any schedule failed.
func runExplore(ctx context.Context, out io.Writer, e exploreFlags, pipelines []string) error {
	rep := sim.Explore(ctx, sim.Plan{
		Pipelines: pipelines, FirstSeed: e.seed, Seeds: e.seeds, Parallel: e.parallel,
		Config: sim.Config{Records: e.records, Postgres: e.postgres},
	})
	fmt.Fprintf(out, "explore: %d schedules in %v; slowest %v (%v)\n", rep.Runs, rep.Took.Round(1e6), rep.Slowest.Took.Round(1e6), rep.Slowest.Schedule)
	records := ""
	if e.records > 0 {
		records = fmt.Sprintf(" --records %d", e.records)
	}
	for _, f := range rep.Failures {
		s := f.Result.Schedule
		fmt.Fprintf(out, "FAIL %v\n  %s: %s\n  failed again the same way on %d of %d replays\n  smallest subset of its faults failing that way: %v\n  replay: eosctl verify --explore %s --seed %d%s\n",
			s, f.Result.Kind, f.Result.Failure, f.Refailed, f.Replayed, f.Smallest.Schedule, replayPipeline(s.Pipeline), s.Seed, records)
	}
	fmt.Fprintln(out, "coverage (times each point/fault pair struck):")
	rep.WriteCoverage(out)
	missed := rep.Missed()
	for _, pl := range slices.Sorted(maps.Keys(missed)) {
		fmt.Fprintf(out, "%s: %d pairs never struck: %v\n", pl, len(missed[pl]), missed[pl])
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("explore: stopped after %d schedules: %w", rep.Runs, err)
	}
	if len(rep.Failures) > 0 {
		return fmt.Errorf("explore: %d of %d schedules broke an invariant", len(rep.Failures), rep.Runs)
	}
	fmt.Fprintf(out, "VERDICT: PASS — %d schedules, every invariant held\n", rep.Runs)
	return nil
}

// replayPipeline is the --pipeline (and --state), or --sink, that selects
// a harness pipeline.
func replayPipeline(name string) string {
	if st, ok := strings.CutPrefix(name, "count-"); ok {
		return "--pipeline count --state " + st
	}
	if strings.HasPrefix(name, "dedup-") {
		return "--pipeline dedup"
	}
	if name == sim.PgSink {
		return "--sink postgres --postgres-url URL"
	}
	return "--pipeline " + name
}
