package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// restoreTriggers is how many input records a restore case feeds the
// fresh instance: enough that every partition gets one (a task restores
// when its first record arrives), at most one per changelog key.
// A crash case feeds as many again after the restart, of keys not fed
// yet, so it takes at most half the keys each time.
func (h *harness) restoreTriggers(c caseSpec) int {
	n := h.o.RestoreKeys
	if c.crash {
		n /= 2
	}
	return min(n, max(64, 20*int(h.o.Partitions)))
}

// runRestore measures restore case c on the real restore path: the
// store's changelog is filled with RestoreKeys distinct keys "k<i>", each
// with a count of 1 (codec.Int64), partitioned as the input is; the input gets
// one record for each of the first restoreTriggers keys; then a fresh
// instance of c's engine (pebble: an empty state directory) starts, must
// restore every changelog record before it counts, and reports when
// Stats.Restored reached RestoreKeys. A read_committed reader checks that
// every trigger's key came out with a count of 2: restored, then counted.
func (h *harness) runRestore(ctx context.Context, c caseSpec, rep int) (runResult, error) {
	o := h.o
	n := o.RestoreKeys
	id := runID(c, rep)
	in, out, changelog := id+"-in", id+"-out", topology.ChangelogTopic(id, CountStore)
	if err := h.createTopics(ctx, in, out); err != nil {
		return runResult{}, err
	}
	defer h.deleteTopics(in, out, changelog, topology.OffsetsTopic(id))
	if err := h.createChangelog(ctx, id); err != nil {
		return runResult{}, err
	}
	triggers, err := h.fillRestore(ctx, c, changelog, in)
	if err != nil {
		return runResult{}, err
	}
	stateDir, err := h.stateDir(c)
	if err != nil {
		return runResult{}, err
	}
	defer os.RemoveAll(stateDir)

	obs, err := newObserver(h.base, out, triggers, 0, 0, newCountAccount(n, triggers, 0, 1), nil, nil)
	if err != nil {
		return runResult{}, err
	}
	octx, stopObs := context.WithCancel(ctx)
	go obs.run(octx)
	defer func() { stopObs(); obs.close() }()

	p, measured, err := h.start(ctx, c, id, in, out, stateDir, n)
	if err != nil {
		return runResult{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = p.stop()
		}
	}()
	// Kafka Streams reports READY once RUNNING, after its restore: its
	// CPU counts from its restore's start, which it reports.
	if c.engine != EngineStreams {
		if err := h.awaitReady(ctx, p, c.name); err != nil {
			return runResult{}, err
		}
	}
	cpu0, _, _ := procStats(p.pid())
	got, err := h.awaitRestored(ctx, p, c.name)
	if err != nil {
		return runResult{}, err
	}
	cpu1, _, _ := procStats(p.pid())
	if c.engine == EngineStreams {
		cpu0 = got.CPUAtStart
	}
	if err := h.await(ctx, p, obs.phase1Ch, obs, c.name, triggers); err != nil {
		return runResult{}, err
	}
	_, rss, _ := procStats(p.pid())
	stopped = true
	end := p.stop
	if c.crash {
		end = func() error { return kill(p, c.name) }
	}
	if err := end(); err != nil {
		return runResult{}, err
	}
	r := restoreResult(obs, got, n, rss, max(cpu1-cpu0, 0), measured)
	if c.crash {
		if err := h.restartAfterCrash(ctx, c, id, in, out, stateDir, triggers, &r); err != nil {
			return runResult{}, err
		}
	}
	return r, nil
}

// awaitRestored waits for p to report it restored RestoreKeys records.
func (h *harness) awaitRestored(ctx context.Context, p pipeline, name string) (Restored, error) {
	t := time.NewTimer(h.o.RunTimeout)
	defer t.Stop()
	select {
	case got := <-p.restored():
		return got, nil
	case <-p.exited():
		return Restored{}, stoppedEarly(p, name)
	case <-ctx.Done():
		return Restored{}, ctx.Err()
	case <-t.C:
		return Restored{}, fmt.Errorf("%s: the stores did not restore %d changelog records within %s", name, h.o.RestoreKeys, h.o.RunTimeout)
	}
}

// fillRestore fills changelog with RestoreKeys keys, each with a count of
// 1, feeds in a record of each of the first restoreTriggers keys, and
// returns how many it fed.
func (h *harness) fillRestore(ctx context.Context, c caseSpec, changelog, in string) (int, error) {
	n := h.o.RestoreKeys
	one := binary.BigEndian.AppendUint64(nil, 1)
	fillStart := time.Now()
	if err := kafkautil.ProduceAll(ctx, h.cl, n, func(i int) *kgo.Record {
		return &kgo.Record{Topic: changelog, Key: key(i, n), Value: one}
	}); err != nil {
		return 0, fmt.Errorf("filling changelog %s: %w", changelog, err)
	}
	progressf(h.o.Progress, "%s: changelog %s filled with %d keys in %s", c.name, changelog, n, time.Since(fillStart).Round(time.Millisecond))
	triggers := h.restoreTriggers(c)
	if triggers < 1 {
		return 0, fmt.Errorf("%s: %d changelog keys leave none to feed after the restart; give --restore-keys of at least 2", c.name, n)
	}
	if err := kafkautil.ProduceAll(ctx, h.cl, triggers, func(i int) *kgo.Record {
		return &kgo.Record{Topic: in, Key: key(i, n), Value: value(i, time.Time{}, h.o.RecordSize)}
	}); err != nil {
		return 0, fmt.Errorf("seeding %s: %w", in, err)
	}
	return triggers, nil
}

// restoreResult is what a restore case measured of its restore of n
// changelog records, with obs's account of the triggers' counts.
func restoreResult(obs *observer, got Restored, n int, rss int64, cpu time.Duration, measured string) runResult {
	obs.mu.Lock()
	defer obs.mu.Unlock()
	r := runResult{
		peakRSS: rss, dups: obs.dups, missing: obs.total - obs.distinct,
		restoreTook: got.Took, restoreWall: got.Wall,
		cpu: cpu, measured: measured + "; CPU from start to the stores caught up",
	}
	took := got.Took
	if took <= 0 {
		// The runtime logged no restore duration: time it from the
		// start, group join included.
		took = got.Wall
		r.measured += "; restore timed from the start (the runtime logged no restore duration)"
	}
	r.rate = float64(n) / took.Seconds()
	r.cpuPerRecord = r.cpu / time.Duration(n)
	return r
}

// kill ends p with SIGKILL, as a crash would: nothing is closed or
// flushed.
func kill(p pipeline, name string) error {
	ch, ok := p.(*child)
	if !ok {
		return fmt.Errorf("%s: a crash needs the pipeline in a worker process; run without --in-process", name)
	}
	return ch.kill()
}

// restartAfterCrash feeds triggers records of keys the first instance
// did not count, starts the case again on the crashed instance's state
// directory, and records in r what it restored and how long after its
// start every trigger's count (2: restored, then counted) was read
// committed; the first instance's counts must not come out again.
func (h *harness) restartAfterCrash(ctx context.Context, c caseSpec, id, in, out, stateDir string, triggers int, r *runResult) error {
	n := h.o.RestoreKeys
	if err := kafkautil.ProduceAll(ctx, h.cl, triggers, func(i int) *kgo.Record {
		return &kgo.Record{Topic: in, Key: key(triggers+i, n), Value: value(triggers+i, time.Time{}, h.o.RecordSize)}
	}); err != nil {
		return fmt.Errorf("seeding %s after the crash: %w", in, err)
	}
	obs, err := newObserver(h.base, out, 2*triggers, 0, 0, newCountAccount(n, 2*triggers, 0, 1), nil, nil)
	if err != nil {
		return err
	}
	octx, stopObs := context.WithCancel(ctx)
	go obs.run(octx)
	defer func() { stopObs(); obs.close() }()
	start := time.Now()
	// No target: the restarted instance reports what it restored when
	// it stops, however much that was.
	p, _, err := h.start(ctx, c, id, in, out, stateDir, math.MaxInt)
	if err != nil {
		return err
	}
	if err := h.await(ctx, p, obs.phase1Ch, obs, c.name+" after the crash", 2*triggers); err != nil {
		_ = p.stop()
		return err
	}
	r.crashCommit = time.Since(start)
	if err := p.stop(); err != nil {
		return err
	}
	select {
	case got := <-p.restored():
		r.crashRestored = got.Records
	default:
		return fmt.Errorf("%s: the restarted instance stopped without reporting what it restored", c.name)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	// obs read the output from its start: the first instance's counts too.
	r.dups, r.missing = obs.dups, obs.total-obs.distinct
	return nil
}

// createChangelog creates the count store's changelog for appID as the
// runtime would (compacted, one partition per input partition). The
// harness creates it for the framework's cases, as it creates their input
// and output topics, so that the measured window holds no topic creation
// (Kafka Streams creates its internal topics before it reports READY).
func (h *harness) createChangelog(ctx context.Context, appID string) error {
	changelog := topology.ChangelogTopic(appID, CountStore)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	compact := "compact"
	if err := kafkautil.CreateTopics(cctx, h.adm, h.o.Partitions, -1, map[string]*string{"cleanup.policy": &compact}, changelog); err != nil {
		return fmt.Errorf("creating changelog %s: %w", changelog, err)
	}
	return nil
}
