package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The audit can fail: a store that holds a count its changelog never
// committed, yet claims to be checked up to past it (what a store keeping
// an aborted batch looks like to a runtime that checks too little), is
// caught when the member starts again and counts from it.
func TestTheAuditCatchesAStoreAheadOfItsChangelog(t *testing.T) {
	key := verdict.Key(0, Config{}.withDefaults(Schedule{}).Keys)
	var tampered bool
	tamper := func(s *sim) error {
		disk := s.disk(0)
		dir := filepath.Join(stateDir, appID, memberID(0))
		for p := range s.cfg.Partitions {
			st, err := store.Open(pebble.New(pebble.FS(disk)), dir, chaos.CountStore, state.Task{Topic: input, Partition: p})
			if err != nil {
				return err
			}
			if _, ok, _ := st.Get(key); ok {
				// One past the last record applied: the commit marker
				// that follows it.
				err = st.Restore([]state.Write{{Key: key, Value: []byte{0, 0, 0, 0, 0, 0, 0x10, 0}}}, st.Offset()+1)
				tampered = err == nil
			}
			if cerr := st.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	r := run(context.Background(), Schedule{Pipeline: CountPebble}, Config{}, tamper)
	if !tampered {
		t.Fatalf("no store held key %s: the test proves nothing (%s)", key, r.Failure)
	}
	if r.OK() || r.Kind != KindAudit || !strings.Contains(r.Failure, "did not equal its changelog") || !strings.Contains(r.Failure, "key "+string(key)+" ") {
		t.Fatalf("a store ahead of its changelog: failure %q, want the audit to name key %s", r.Failure, key)
	}
}

// The side-effect judge can fail: an effect run twice with no crash
// between an effect and its mark is reported, naming the id.
func TestTheEffectsJudgeCatchesARepeat(t *testing.T) {
	tamper := func(s *sim) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.effects["7"] != 1 {
			return nil // the test fails below: the run proved nothing
		}
		s.effects["7"]++
		return nil
	}
	r := run(context.Background(), Schedule{Pipeline: DedupAfter}, Config{}, tamper)
	if r.OK() || r.Kind != KindEffects || !strings.Contains(r.Failure, "id 7 ran 2 times") {
		t.Fatalf("an effect run twice without a crash: failure %q, want it reported", r.Failure)
	}
}

// The windows judge can fail: a window's final count written twice is
// reported as a duplicate.
func TestTheWindowsJudgeCatchesARepeat(t *testing.T) {
	tamper := func(s *sim) error {
		out, err := s.read(context.Background(), output, true)
		if err != nil || len(out) == 0 {
			return err // the test fails below: the run proved nothing
		}
		return s.produceAgain(out[0])
	}
	r := run(context.Background(), Schedule{Pipeline: Windowed}, Config{}, tamper)
	if r.OK() || r.Kind != KindWindows || !strings.Contains(r.Failure, "window_duplicates=1 ") {
		t.Fatalf("a window emitted twice: failure %q (%s), want it reported", r.Failure, r.Kind)
	}
}

// The pairs judge can fail: a joined pair whose output record is lost is
// reported missing. The tamper reads the output, then empties it by
// deleting its records, so the judge reads the pairs from nothing.
func TestThePairsJudgeCatchesALoss(t *testing.T) {
	var had int
	tamper := func(s *sim) error {
		out, err := s.read(context.Background(), output, true)
		if err != nil || len(out) == 0 {
			return err // the test fails below: the run proved nothing
		}
		had = len(out)
		cl, err := kgo.NewClient(s.base()...)
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		offs := kadm.Offsets{}
		for _, r := range out {
			offs.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.Offset + 1})
		}
		_, err = adm.DeleteRecords(context.Background(), offs)
		return err
	}
	r := run(context.Background(), Schedule{Pipeline: StreamJoin}, Config{}, tamper)
	if had == 0 || r.OK() || r.Kind != KindPairs || !strings.Contains(r.Failure, fmt.Sprintf("pair_missing=%d ", had)) {
		t.Fatalf("%d pairs deleted: failure %q (%s), want them reported missing", had, r.Failure, r.Kind)
	}
}

// A store fault allows a repeat only of the id whose effect it could run
// again: a failed lookup of an id not yet marked allows none, so another
// id run twice is still reported.
func TestAStoreFaultAllowsOnlyTheRepeatItCanCause(t *testing.T) {
	step := Step{Point: Store, N: 1, Fault: StoreFail} // the first lookup, of an id never marked
	tamper := func(s *sim) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.effects["7"]++
		return nil
	}
	r := run(context.Background(), Schedule{Pipeline: DedupAfter, Steps: []Step{step}}, Config{}, tamper)
	if !slices.Contains(r.Fired, step) {
		t.Fatalf("the store fault never struck (fired %v): the test proves nothing", r.Fired)
	}
	if r.OK() || r.Kind != KindEffects || !strings.Contains(r.Failure, "id 7 ran 2 times, allowed 1") {
		t.Fatalf("an effect run twice beside a fault that cannot repeat it: failure %q, want it reported", r.Failure)
	}
}

// produceAgain writes r once more, to its topic and partition, outside
// any transaction: a tamper that repeats an output.
func (s *sim) produceAgain(r *kgo.Record) error {
	cl, err := kgo.NewClient(append(s.base(), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	again := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value}
	return cl.ProduceSync(context.Background(), again).FirstErr()
}

// The store audit can fail: a windowed store on disk holding a key its
// committed changelog never had, listed as checked, is reported, naming
// the key.
func TestTheStoreAuditCatchesAKeyTheChangelogNeverCommitted(t *testing.T) {
	var tampered bool
	tamper := func(s *sim) error {
		dir := filepath.Join(stateDir, appID, memberID(0))
		st, err := store.Open(pebble.New(pebble.FS(s.disk(0))), dir, chaos.WindowStore, state.Task{Topic: input, Partition: 0})
		if err != nil {
			return err
		}
		if st.Offset() >= 0 {
			err = st.Restore([]state.Write{{Key: []byte("zz-bogus"), Value: []byte{1}}}, st.Offset()+1)
			tampered = err == nil
		}
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		return err
	}
	r := run(context.Background(), Schedule{Pipeline: Windowed}, Config{}, tamper)
	if !tampered {
		t.Fatalf("member 0 held no windowed store of partition 0: the test proves nothing (%s)", r.Failure)
	}
	if r.OK() || r.Kind != KindAudit || !strings.Contains(r.Failure, `key "zz-bogus" holds`) {
		t.Fatalf("a store holding a key its changelog never committed: failure %q, want the audit to name it", r.Failure)
	}
}
