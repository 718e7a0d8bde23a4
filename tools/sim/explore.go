package sim

import (
	"context"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sync"
	"text/tabwriter"
	"time"
)

// Plan is a batch of schedules to explore.
type Plan struct {
	Pipelines []string // default: every pipeline
	FirstSeed uint64   // the seeds run are FirstSeed … FirstSeed+Seeds-1, per pipeline
	Seeds     int
	Parallel  int // schedules at once, default 12 per core (each has its own broker)
	Config    Config
	// Replays is how often a failing schedule is run again, to measure how
	// reliably its seed reproduces; default 3.
	Replays int
}

// Failure is a failing schedule, the smallest one shrinking kept, and how
// often the seed failed again on replay.
type Failure struct {
	Result   Result
	Smallest Result
	Replayed int
	Refailed int
}

// Report is what an exploration found.
type Report struct {
	Runs     int
	Took     time.Duration
	Failures []Failure
	Coverage map[string]map[Pair]int // per pipeline, how often each pair struck
	Slowest  Result
}

// Explore runs the plan's schedules, shrinks each failure to its smallest
// failing schedule, and counts coverage.
func Explore(ctx context.Context, p Plan) Report {
	p = p.withDefaults()
	start := time.Now()
	rep := Report{Coverage: map[string]map[Pair]int{}}
	var failed []Result
	results := make(chan Result)
	go feed(ctx, p, results)
	for r := range results {
		rep.Runs++
		cov := rep.Coverage[r.Schedule.Pipeline]
		if cov == nil {
			cov = map[Pair]int{}
			rep.Coverage[r.Schedule.Pipeline] = cov
		}
		for _, st := range r.Fired {
			cov[Pair{st.Point, st.Fault}]++
		}
		if r.Took > rep.Slowest.Took {
			rep.Slowest = r
		}
		if !r.OK() {
			failed = append(failed, r)
		}
	}
	for _, r := range failed {
		rep.Failures = append(rep.Failures, investigate(ctx, r, p))
	}
	rep.Took = time.Since(start)
	return rep
}

func (p Plan) withDefaults() Plan {
	if len(p.Pipelines) == 0 {
		p.Pipelines = slices.Clone(Pipelines)
		if p.Config.Postgres != "" {
			p.Pipelines = append(p.Pipelines, PgSink)
		}
	}
	if p.Parallel <= 0 {
		// A schedule mostly waits (on its broker, on timeouts), so many
		// share a core; far more and they contend for memory and the
		// scheduler.
		p.Parallel = min(12*runtime.GOMAXPROCS(0), 96)
	}
	if p.Replays <= 0 {
		p.Replays = 3
	}
	return p
}

// pgParallel bounds the Postgres sink's schedules run at once.
const pgParallel = 24

// feed runs every schedule of the plan, p.Parallel at once, and closes
// results when all are done.
func feed(ctx context.Context, p Plan, results chan<- Result) {
	defer close(results)
	sem := make(chan struct{}, p.Parallel)
	// Each Postgres sink schedule holds up to seven connections (three
	// members, the judge's): a bound keeps them within a server's 200.
	pgSem := make(chan struct{}, min(p.Parallel, pgParallel))
	var wg sync.WaitGroup
	for i := range p.Seeds {
		for _, pl := range p.Pipelines {
			if ctx.Err() != nil {
				break
			}
			if pl == PgSink {
				pgSem <- struct{}{} // first: no general slot held while waiting
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if pl == PgSink {
					defer func() { <-pgSem }()
				}
				results <- Run(ctx, Draw(p.FirstSeed+uint64(i), pl), p.Config)
			})
		}
	}
	wg.Wait()
}

// investigate replays a failure to measure how reliably it fails again
// the same way (its Kind), then shrinks it: drop one fault at a time,
// keeping each drop after which the schedule still fails that way.
func investigate(ctx context.Context, r Result, p Plan) Failure {
	f := Failure{Result: r, Smallest: r}
	for range p.Replays {
		f.Replayed++
		if again := Run(ctx, r.Schedule, p.Config); !again.OK() && again.Kind == r.Kind {
			f.Refailed++
		}
	}
	// A smaller schedule must fail the same check: one that fails
	// another way is another failure, not this one made smaller.
	cur := r
	for i := len(cur.Schedule.Steps) - 1; i >= 0 && ctx.Err() == nil; i-- {
		if cand := Run(ctx, cur.Schedule.Without(i), p.Config); !cand.OK() && cand.Kind == r.Kind {
			cur = cand
		}
	}
	f.Smallest = cur
	return f
}

// WriteCoverage prints, per pipeline, how often each handled pair struck,
// and lists the pairs that never did.
func (rep Report) WriteCoverage(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	pls := slices.Sorted(maps.Keys(rep.Coverage))
	fmt.Fprintf(tw, "point\tfault")
	for _, pl := range pls {
		fmt.Fprintf(tw, "\t%s", pl)
	}
	fmt.Fprintln(tw)
	for _, pair := range pairs(anyProtocol, "") {
		fmt.Fprintf(tw, "%s\t%s", pair.Point, pair.Fault)
		for _, pl := range pls {
			fmt.Fprintf(tw, "\t%d", rep.Coverage[pl][pair])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// Missed lists, per pipeline run, the handled pairs that never struck.
func (rep Report) Missed() map[string][]Pair {
	out := map[string][]Pair{}
	for pl, cov := range rep.Coverage {
		for _, pair := range pairs(anyProtocol, pl) {
			if cov[pair] == 0 {
				out[pl] = append(out[pl], pair)
			}
		}
	}
	return out
}
