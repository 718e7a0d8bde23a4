package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/eosflow/eosflow/config"
)

// topJSON is one frame of `top`: the app's rates over the last interval,
// summed over its instances, then each instance, then its group.
type topJSON struct {
	App              string            `json:"app"`
	Time             time.Time         `json:"time"`
	IntervalSeconds  float64           `json:"interval_seconds"`
	CommitsPerSec    float64           `json:"commits_per_sec"`
	AbortsPerSec     float64           `json:"aborts_per_sec"`
	RecordsInPerSec  float64           `json:"records_in_per_sec"`
	RecordsOutPerSec float64           `json:"records_out_per_sec"`
	CommitP99Seconds *float64          `json:"commit_p99_seconds"` // null: no commit in the interval
	Aborts           []topAbortJSON    `json:"aborts"`
	Instances        []topInstanceJSON `json:"instances"`
	Group            appGroupJSON      `json:"group"`
	GroupError       string            `json:"group_error,omitempty"`
}

// topAbortJSON is one abort reason with batches aborted for it, summed
// over the instances.
type topAbortJSON struct {
	Reason string  `json:"reason"`
	PerSec float64 `json:"per_sec"`
	Total  float64 `json:"total"` // since each instance started
}

// topInstanceJSON is one instance as its /metrics and /readyz tell it.
type topInstanceJSON struct {
	URL                string   `json:"url"`
	Instance           string   `json:"instance"`
	Guarantee          string   `json:"guarantee,omitempty"`
	Running            bool     `json:"running"`
	Fenced             bool     `json:"fenced"`
	Ready              *bool    `json:"ready"` // null when /readyz is not beside /metrics
	NotReady           string   `json:"not_ready,omitempty"`
	AssignedPartitions int      `json:"assigned_partitions"`
	Generation         int      `json:"generation"`
	CommitsPerSec      float64  `json:"commits_per_sec"`
	AbortsPerSec       float64  `json:"aborts_per_sec"`
	RecordsInPerSec    float64  `json:"records_in_per_sec"`
	RecordsOutPerSec   float64  `json:"records_out_per_sec"`
	CommitP99Seconds   *float64 `json:"commit_p99_seconds"`
	Error              string   `json:"error,omitempty"` // the endpoint failed, or serves no series of the app
}

// newTopCmd watches one app live: what its instances' metrics say it does
// now, and what its group says about members and lag, in one screen.
func newTopCmd(g *globals) *cobra.Command {
	var (
		urls     []string
		interval time.Duration
		once     bool
	)
	c := &cobra.Command{
		Use:   "top [APP_ID] --metrics URL...",
		Short: "Watch an app live: commit and abort rates, latency, throughput, members and lag",
		Long: `Watch the pipeline whose app_id is APP_ID (default: app_id of --config, or
EOS_APP_ID, or else the one app the --metrics endpoints serve). Every
--interval it scrapes each --metrics endpoint (an instance's metrics_addr)
and reads the app's consumer group, then prints:

  - commits and aborts per second, aborts by reason, p99 commit latency
    (from the eosflow_commit_duration_seconds buckets observed in the
    interval), and records in and out per second, over all instances
  - each instance: running, fenced, ready (/readyz beside /metrics),
    partitions assigned, group generation and its own rates
  - the group's members and the tasks (input partitions) each owns
  - each input partition's committed offset and lag to the last stable
    offset and to the high watermark; an LSO behind the HWM is an open
    transaction ('eosctl txn hanging' if it stays)

Rates need two scrapes, so the first frame comes after one interval. On a
terminal the screen is redrawn; otherwise frames follow each other. With
--once it prints one frame and exits; -o json prints frames as JSON.`,
		Example: "  eosctl top orders --metrics 127.0.0.1:9464\n" +
			"  eosctl top orders --metrics 10.0.0.1:9464 --metrics 10.0.0.2:9464 --interval 5s\n" +
			"  eosctl top --config pipeline.yaml --metrics 127.0.0.1:9464 --once -o json",
		Args:              usageArgs(cobra.MaximumNArgs(1)),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.pipelineConfig()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				cfg.AppID = args[0]
			}
			if interval <= 0 {
				return usageErrorf("--interval must be positive, got %s", interval)
			}
			t := &topper{g: g, cfg: cfg, interval: interval, once: once, out: cmd.OutOrStdout(),
				hc: &http.Client{Timeout: g.timeout}}
			for _, u := range urls {
				full, err := metricsURL(u)
				if err != nil {
					return usageError{err}
				}
				t.urls = append(t.urls, full)
			}
			ctx, stop := untilSignal(cmd)
			defer stop()
			return t.run(ctx)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&urls, "metrics", nil, "an instance's metrics endpoint: host:port (its metrics_addr) or a URL; repeat for each instance")
	f.DurationVar(&interval, "interval", 2*time.Second, "time between frames, over which rates are computed"+durationFlagHelp)
	f.BoolVar(&once, "once", false, "print one frame (after two scrapes one interval apart) and exit")
	_ = c.MarkFlagRequired("metrics")
	return c
}

// topper is one `top` session.
type topper struct {
	g        *globals
	cfg      config.Config
	urls     []string
	interval time.Duration
	once     bool
	out      io.Writer
	hc       *http.Client
	desc     *appDescriber
}

// run connects, takes the first scrape, then prints a frame every
// interval until ctx ends (or once). Before the first frame any failure
// ends it; afterwards failures show in the frame, as a dead instance is
// what top is for.
func (t *topper) run(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, t.g.timeout)
	cl, err := t.g.client(cctx, t.cfg)
	cancel()
	if err != nil {
		return err
	}
	defer cl.Close()
	t.desc = &appDescriber{adm: t.g.newAdmin(cl), cfg: t.cfg}
	prev := scrapeAll(ctx, t.hc, t.urls)
	if err := firstErr(prev); err != nil {
		return err
	}
	if t.cfg.AppID == "" {
		if t.cfg.AppID, err = onlyApp(prev); err != nil {
			return err
		}
		t.desc.cfg.AppID = t.cfg.AppID
	}
	clear := t.g.output != outputJSON && isTerminal(t.out)
	for frames := 0; ; frames++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(t.interval):
		}
		cur := scrapeAll(ctx, t.hc, t.urls)
		if ctx.Err() != nil {
			return nil
		}
		if err := firstErr(cur); err != nil && frames == 0 {
			return err
		}
		frame, err := t.frame(ctx, prev, cur)
		if err != nil && frames == 0 {
			return err
		}
		if clear {
			fmt.Fprint(t.out, "\033[H\033[2J")
		} else if frames > 0 && t.g.output != outputJSON {
			fmt.Fprintln(t.out)
		}
		if err := t.write(frame); err != nil {
			return err
		}
		if t.once {
			return nil
		}
		for i := range cur {
			if cur[i].err == nil {
				prev[i] = cur[i]
			}
		}
	}
}

// onlyApp is the app the endpoints serve when none was named, if they
// serve exactly one.
func onlyApp(ss []scrape) (string, error) {
	var apps []string
	for _, s := range ss {
		for _, a := range s.apps() {
			if !slices.Contains(apps, a) {
				apps = append(apps, a)
			}
		}
	}
	switch len(apps) {
	case 1:
		return apps[0], nil
	case 0:
		return "", usageErrorf("name the app: give APP_ID, or --config with app_id (or EOS_APP_ID); the --metrics endpoints serve no eosflow series")
	}
	slices.Sort(apps)
	return "", usageErrorf("name the app: the --metrics endpoints serve %s", quoteAll(apps))
}

// firstErr is the first endpoint's error, if any failed.
func firstErr(ss []scrape) error {
	for _, s := range ss {
		if s.err != nil {
			return s.err
		}
	}
	return nil
}

// frame builds one frame from two scrapes of every endpoint and a fresh
// reading of the group; the error is the group's, also in GroupError.
func (t *topper) frame(ctx context.Context, prev, cur []scrape) (topJSON, error) {
	app := t.cfg.AppID
	f := topJSON{App: app, Time: time.Now().UTC(), IntervalSeconds: t.interval.Seconds(), Aborts: []topAbortJSON{}, Instances: []topInstanceJSON{}}
	aborted := map[string]*topAbortJSON{}
	var commits buckets
	for i, c := range cur {
		if c.err != nil {
			f.Instances = append(f.Instances, topInstanceJSON{URL: c.url, Error: c.err.Error()})
			continue
		}
		now, before := c.readings(app), prev[i].readings(app)
		if len(now) == 0 {
			msg := fmt.Sprintf("no eosflow series of app %q", app)
			if apps := c.apps(); len(apps) > 0 {
				msg += " (this endpoint serves " + quoteAll(apps) + ")"
			}
			f.Instances = append(f.Instances, topInstanceJSON{URL: c.url, Error: msg})
			continue
		}
		secs := c.at.Sub(prev[i].at).Seconds()
		for _, inst := range sortedKeys(now) {
			r, p := now[inst], before[inst]
			if p == nil {
				p = &reading{aborted: map[string]float64{}}
			}
			rate := func(cur, prev float64) float64 { return increase(prev, cur) / secs }
			row := topInstanceJSON{URL: c.url, Instance: inst, Guarantee: r.guarantee, Running: r.running == 1, Fenced: r.fenced == 1,
				Ready: c.ready, NotReady: c.notReady, AssignedPartitions: int(r.assigned), Generation: int(r.generation),
				CommitsPerSec: rate(r.committed, p.committed), RecordsInPerSec: rate(r.in, p.in), RecordsOutPerSec: rate(r.out, p.out)}
			d := r.commit.since(p.commit)
			row.CommitP99Seconds = p99(d)
			commits = commits.add(d)
			for reason, v := range r.aborted {
				a := aborted[reason]
				if a == nil {
					a = &topAbortJSON{Reason: reason}
					aborted[reason] = a
				}
				a.Total += v
				a.PerSec += rate(v, p.aborted[reason])
				row.AbortsPerSec += rate(v, p.aborted[reason])
			}
			f.Instances = append(f.Instances, row)
			f.CommitsPerSec += row.CommitsPerSec
			f.AbortsPerSec += row.AbortsPerSec
			f.RecordsInPerSec += row.RecordsInPerSec
			f.RecordsOutPerSec += row.RecordsOutPerSec
		}
	}
	f.CommitP99Seconds = p99(commits)
	for _, reason := range sortedKeys(aborted) {
		if a := aborted[reason]; a.Total > 0 {
			f.Aborts = append(f.Aborts, *a)
		}
	}
	gctx, cancel := context.WithTimeout(ctx, t.g.timeout)
	defer cancel()
	t.desc.ctx = gctx
	g, err := t.desc.group(nil)
	f.Group = g
	if err != nil {
		f.GroupError = err.Error()
	}
	return f, err
}

// p99 is the 0.99-quantile of b, nil with no observations.
func p99(b buckets) *float64 {
	v, ok := b.quantile(0.99)
	if !ok {
		return nil
	}
	return &v
}

// sortedKeys is m's keys in order, so frames list things stably.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// write prints a frame as JSON, or as a summary line and tables.
func (t *topper) write(f topJSON) error {
	if t.g.output == outputJSON {
		return t.g.render(t.out, f, nil)
	}
	w := t.out
	fmt.Fprintf(w, "app %s  %s  rates over %s\n", f.App, f.Time.Format("2006-01-02 15:04:05 UTC"), t.interval)
	fmt.Fprintf(w, "commits/s %s  aborts/s %s  records in/s %s  out/s %s  p99 commit %s\n\n",
		fmtRate(f.CommitsPerSec), fmtRate(f.AbortsPerSec), fmtRate(f.RecordsInPerSec), fmtRate(f.RecordsOutPerSec), fmtSeconds(f.CommitP99Seconds))
	inst := newTable("INSTANCE", "RUNNING", "FENCED", "READY", "PARTITIONS", "GENERATION", "COMMITS/S", "ABORTS/S", "IN/S", "OUT/S", "P99 COMMIT", "METRICS")
	var problems []string
	for _, i := range f.Instances {
		if i.Error != "" {
			inst.add("-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", i.URL)
			problems = append(problems, i.Error)
			continue
		}
		ready := "-"
		if i.Ready != nil {
			ready = yesNo(*i.Ready)
		}
		if i.NotReady != "" {
			problems = append(problems, fmt.Sprintf("%s not ready: %s", i.Instance, i.NotReady))
		}
		inst.add(orDash(i.Instance), yesNo(i.Running), yesNo(i.Fenced), ready, i.AssignedPartitions, i.Generation,
			fmtRate(i.CommitsPerSec), fmtRate(i.AbortsPerSec), fmtRate(i.RecordsInPerSec), fmtRate(i.RecordsOutPerSec), fmtSeconds(i.CommitP99Seconds), i.URL)
	}
	if err := inst.write(w); err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(w, "  "+p)
	}
	fmt.Fprintln(w)
	if len(f.Aborts) == 0 {
		fmt.Fprintln(w, "Aborts: none")
	} else {
		fmt.Fprintln(w, "Aborts by reason:")
		ab := newTable("REASON", "PER SEC", "TOTAL")
		for _, a := range f.Aborts {
			ab.add(a.Reason, fmtRate(a.PerSec), fmt.Sprintf("%.0f", a.Total))
		}
		if err := ab.write(w); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	grp := f.Group
	if f.GroupError != "" {
		fmt.Fprintf(w, "Group %s: %s\n", grp.Group, f.GroupError)
		return nil
	}
	fmt.Fprintf(w, "Group %s: %s, %d member(s)\n", grp.Group, grp.State, len(grp.Members))
	if err := membersTable(grp.Members).write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Inputs: lag %d to the last stable offset, %d to the high watermark\n", grp.TotalLSO, grp.TotalHWM)
	return lagTable(grp.Inputs).write(w)
}

// fmtRate prints a per-second rate.
func fmtRate(v float64) string { return fmt.Sprintf("%.1f", v) }

// fmtSeconds prints a latency, or "-" when there was nothing to measure.
func fmtSeconds(v *float64) string {
	if v == nil {
		return "-"
	}
	return time.Duration(*v * float64(time.Second)).Round(100 * time.Microsecond).String()
}

// yesNo prints a flag for tables.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// isTerminal says whether w is a terminal, where frames redraw the screen
// instead of scrolling.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
