package chaos_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests run `eosctl verify worker` processes of the counting pipeline
// one at a time against an embedded broker, kill or stop them, and start
// them again on the same state directory (or a stale copy of it), to see
// how much of the changelog each start restores (the Restored of the
// worker's exit report): pebble resumes from the offset its database kept,
// memory restores everything.

// restoreKeys is how many keys the restore tests count.
const restoreKeys = 50

// restoreRig is one app on an in-process broker with its topics.
type restoreRig struct {
	env           *kafkatest.Env
	app, in, out  string
	changelog     string
	base          []kgo.Opt
	seeded        int
	workerLogPath string
}

// newRestoreRig makes the app's input and output with partitions each.
func newRestoreRig(t *testing.T, partitions int32) *restoreRig {
	env := kafkatest.Fake(t)
	r := &restoreRig{env: env, app: env.Name("restore"), in: env.Name("in"), out: env.Name("out"),
		base: []kgo.Opt{kgo.SeedBrokers(env.Brokers...)}, workerLogPath: filepath.Join(t.TempDir(), "worker.log")}
	r.changelog = topology.ChangelogTopic(r.app, chaos.CountStore)
	env.CreateTopics(t, partitions, r.in, r.out)
	return r
}

// seed adds n records to the input, continuing the ids (and so each key's
// count) from the records seeded before.
func (r *restoreRig) seed(t *testing.T, n int) {
	t.Helper()
	from := r.seeded
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := kafkautil.ProduceAll(ctx, r.env.Client(t), n, func(i int) *kgo.Record {
		return &kgo.Record{Topic: r.in, Key: verdict.Key(from+i, restoreKeys), Value: verdict.Value(from+i, 16)}
	})
	if err != nil {
		t.Fatal(err)
	}
	r.seeded += n
}

// worker is one `eosctl verify worker` process.
type worker struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	done   chan struct{}
}

// start runs a worker of the counting pipeline on engine with its stores in
// stateDir; rate 0 is unpaced.
func (r *restoreRig) start(t *testing.T, engine, stateDir string, rate int) *worker {
	t.Helper()
	log, err := os.OpenFile(r.workerLogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	w := &worker{done: make(chan struct{})}
	w.cmd = exec.Command(eosctl(t), "verify", "worker", "--brokers", r.env.Brokers[0],
		"--app", r.app, "--instance", "worker-0", "--in", r.in, "--out", r.out,
		"--pipeline", "count", "--state", engine, "--state-dir", stateDir,
		"--rate", strconv.Itoa(rate), "--batch-records", "100", "--commit-delay", "5ms", "--session-timeout", "6s")
	w.cmd.Env = append(os.Environ(), "EOS_BROKERS=", "EOS_STATE_DIR=")
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() { _ = w.cmd.Process.Kill(); <-w.done })
	return w
}

// kill SIGKILLs the worker, which reports nothing.
func (w *worker) kill(t *testing.T) {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
}

// stop SIGTERMs the worker and returns the report it prints on its way out.
func (w *worker) stop(t *testing.T) chaos.WorkerReport {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30s of its SIGTERM")
	}
	var rep chaos.WorkerReport
	sc := bufio.NewScanner(bytes.NewReader(w.stdout.Bytes()))
	for sc.Scan() {
		var line chaos.WorkerReport
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Stopped != "" {
			rep = line
		}
	}
	if rep.Stopped != chaos.StopCancelled {
		t.Fatalf("worker report %+v (stdout %q): want a clean stop", rep, w.stdout.String())
	}
	return rep
}

// consumed is how many input records the group has committed.
func (r *restoreRig) consumed(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(r.env.Client(t)).FetchOffsets(ctx, r.app)
	if err != nil {
		return 0
	}
	n := 0
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == r.in && o.Err == nil {
			n += int(o.At)
		}
	})
	return n
}

// waitConsumed waits until the group has committed at least n input records.
func (r *restoreRig) waitConsumed(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for r.consumed(t) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the group committed %d of %d input records within %s; worker log %s", r.consumed(t), n, limit, r.workerLogPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drain reads topic read_committed: at least want records, then until
// nothing new comes for a second.
func (r *restoreRig) drain(t *testing.T, topic string, want int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := verdict.Drain(ctx, r.base, topic, want, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// judge asserts that every key counted 1…n_k exactly once over all
// records seeded so far, and that the changelog ends at n_k.
func (r *restoreRig) judge(t *testing.T) {
	t.Helper()
	out := r.drain(t, r.out, r.seeded)
	v, c := verdict.JudgeCounts(r.seeded, restoreKeys, out, r.drain(t, r.changelog, restoreKeys))
	if v.RecordsOut != r.seeded || v.Unknown != 0 || !c.OK() {
		t.Fatalf("verdict %s; %s (worker log %s)", v, c, r.workerLogPath)
	}
}

// A pebble store runs without a write-ahead log (see pebble.New): a
// SIGKILL loses what it applied since its last flush, data and offset
// together, and a clean stop flushes. So a worker stopped cleanly, started
// again and SIGKILLed mid-run restores, on its next start, exactly the
// changelog records committed since that clean stop: the tail beyond the
// offset its store kept, not the changelog. The same run with memory state
// restores every committed changelog record, which shows the restore is
// measured. One partition, so that the one task restores at every start.
func TestRestoreAfterSIGKILL(t *testing.T) {
	for _, engine := range []string{"pebble", "memory"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			r := newRestoreRig(t, 1)
			dir := t.TempDir()

			r.seed(t, 6000)
			w := r.start(t, engine, dir, 0)
			r.waitConsumed(t, r.seeded, time.Minute)
			if rep := w.stop(t); rep.Restored != 0 {
				t.Errorf("a new store restored %d records from an empty changelog", rep.Restored)
			}
			atStop := len(r.drain(t, r.changelog, 1))

			r.seed(t, 3000)
			w = r.start(t, engine, dir, 1500)
			r.waitConsumed(t, 6000+600, time.Minute)
			w.kill(t)
			if got := r.consumed(t); got >= r.seeded {
				t.Fatalf("the worker consumed all %d records before its SIGKILL: nothing was left to resume", got)
			}
			// The killed worker's open transaction hides what it wrote
			// since its last commit: this is what committed.
			atKill := len(r.drain(t, r.changelog, atStop+1))
			if atKill <= atStop {
				t.Fatalf("no changelog record committed between the restart and the SIGKILL (%d, then %d)", atStop, atKill)
			}

			w = r.start(t, engine, dir, 0)
			r.waitConsumed(t, r.seeded, time.Minute)
			rep := w.stop(t)
			t.Logf("%s: changelog records committed: %d at the clean stop, %d at the SIGKILL; restored after it: %d",
				engine, atStop, atKill, rep.Restored)
			want := uint64(atKill) // memory: everything, on every start
			if engine == "pebble" {
				want = uint64(atKill - atStop)
				if 5*want > uint64(atKill) {
					t.Fatalf("the tail since the clean stop (%d of %d changelog records) is too long to tell a resume from a full restore", want, atKill)
				}
			}
			if rep.Restored != want {
				t.Errorf("%s restored %d changelog records after the SIGKILL, want %d (%d committed, %d of them before the clean stop)",
					engine, rep.Restored, want, atKill, atStop)
				r.logRestores(t)
			}
			r.judge(t)
		})
	}
}

// logRestores logs what the workers said about restoring, to tell a
// restore that read too much from one that was counted wrong.
func (r *restoreRig) logRestores(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(r.workerLogPath)
	if err != nil {
		t.Log(err)
		return
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(line, []byte("restor")) || bytes.Contains(line, []byte("assigned")) || bytes.Contains(line, []byte("rebuild")) {
			t.Logf("worker log: %s", line)
		}
	}
}

// A stale copy of a pebble state directory (a backup, a volume restored
// from a snapshot) is behind the changelog: a worker started on it must
// restore exactly the changelog records committed since the copy, and
// count on from there. A store cannot be ahead of its changelog: a batch
// reaches the store only after its transaction committed.
func TestPebbleStaleStateCatchesUp(t *testing.T) {
	t.Parallel()
	r := newRestoreRig(t, 3)
	dir := t.TempDir()

	r.seed(t, 2000)
	w := r.start(t, "pebble", dir, 0)
	r.waitConsumed(t, r.seeded, time.Minute)
	if rep := w.stop(t); rep.Restored != 0 {
		t.Errorf("a new store restored %d records from an empty changelog", rep.Restored)
	}
	atCopy := len(r.drain(t, r.changelog, 1))
	stale := filepath.Join(t.TempDir(), "stale")
	if out, err := exec.Command("cp", "-a", dir, stale).CombinedOutput(); err != nil {
		t.Fatalf("copying the state directory: %v: %s", err, out)
	}

	r.seed(t, 2000)
	w = r.start(t, "pebble", dir, 0)
	r.waitConsumed(t, r.seeded, time.Minute)
	if rep := w.stop(t); rep.Restored != 0 {
		t.Errorf("after a clean stop pebble restored %d records, want none", rep.Restored)
	}
	afterwards := len(r.drain(t, r.changelog, atCopy+1))
	if afterwards <= atCopy {
		t.Fatalf("the changelog did not grow after the copy (%d, then %d records)", atCopy, afterwards)
	}

	r.seed(t, 2000)
	w = r.start(t, "pebble", stale, 0)
	r.waitConsumed(t, r.seeded, time.Minute)
	rep := w.stop(t)
	t.Logf("changelog: %d records at the copy, %d before the start on it; restored %d", atCopy, afterwards, rep.Restored)
	if want := uint64(afterwards - atCopy); rep.Restored != want {
		t.Errorf("the stale store restored %d changelog records, want the %d committed since the copy", rep.Restored, want)
	}
	r.judge(t)
}
