package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// stallCheck tells a stalled pipeline from an idle one: when no batch has
// started for long, it looks whether records wait for this instance, and
// what holds them back. Like hangingRepair, it holds the Runner's config,
// logger and inputs as New left them, and reads the admin client through
// a function.
type stallCheck struct {
	cfg        config.Config
	log        *zap.Logger
	extra      []kgo.Opt          // the user's client options, for the reader that looks
	admin      func() *kgo.Client // the run's admin client; nil before preflight
	inputs     []string           // the topics consumed: the sources' and the repartition topics
	floor      *offsetFloor       // the offsets this instance's own commits reached
	floorBound func() error       // ends adjustFetched's wait past recovery_timeout (floor.go)
	hanging    *hangingRepair     // completes the hanging transactions records may wait behind
	stalls     int                // stalls in a row without a commit
}

// newStallCheck builds r's stall check over r's configuration, logger,
// inputs, offset floor, admin client and hanging-transaction repair.
func newStallCheck(r *Runner) *stallCheck {
	return &stallCheck{
		cfg: r.cfg, log: r.log, extra: r.extra, inputs: r.inputs, floor: &r.floor, floorBound: func() error { return r.floor.bound(r.cfg.AppID, r.cfg.RecoveryTimeout) }, hanging: r.hanging,
		admin: func() *kgo.Client { return r.admin },
	}
}

// checkStall runs when no batch started for longer than waits.stall. If
// records wait on partitions assigned to this instance (or the instance
// is not in the group at all while records wait), it logs what the
// client is waiting for and returns a rebuildError the first time and a
// *StallError the second time in a row. With nothing waiting it returns
// nil: an idle pipeline is not a stalled one.
func (sc *stallCheck) checkStall(ctx context.Context, waited time.Duration) error {
	if behind, _, err := sc.floor.waiting(); len(behind) > 0 && !errors.Is(err, kerr.UnstableOffsetCommit) {
		// adjustFetched waits for the group's offsets, and logs and
		// bounds that wait; a rebuild would only restart it. Offsets
		// held back by a pending transaction are this check's to look
		// at (repairHanging).
		return sc.floorBound()
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(sc.admin())
	inputs := sc.inputs
	stable, err := adm.ListCommittedOffsets(actx, inputs...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &rebuildError{fmt.Errorf("no batch for %s and the brokers %v do not answer: %w", waited.Round(time.Second), sc.cfg.Brokers, err)}
	}
	committed, err := adm.FetchOffsetsForTopics(actx, sc.cfg.AppID, inputs...)
	if err != nil {
		return &rebuildError{fmt.Errorf("no batch for %s and group %q's offsets cannot be read: %w", waited.Round(time.Second), sc.cfg.AppID, err)}
	}
	mine, member, known := sc.assigned(actx)
	candidates := sc.stallCandidates(stable, committed, mine, member, known)
	// Below the last stable offset may lie only transaction markers and
	// aborted records, which no consumer ever gets: records wait only
	// where a read_committed reader finds some.
	waiting := sc.readable(ctx, candidates)
	if len(waiting) == 0 {
		return nil
	}
	if n := sc.hanging.repairHanging(ctx); n > 0 {
		return &rebuildError{fmt.Errorf("no batch for %s: completed %d hanging transaction(s); restarting from the committed offsets", waited.Round(time.Second), n)}
	}
	what := sc.stallWaitingFor(ctx, adm, known && !member)
	serr := &StallError{Group: sc.cfg.AppID, Partitions: waiting, Waited: waited, Waiting: what, Hanging: slices.Clone(sc.hanging.unproven)}
	if len(serr.Hanging) > 0 {
		// Proof can still come (a coordinator, its log, an operator):
		// wait for it, rebuilding, until recovery_timeout ends Run with
		// this error.
		sc.log.Warn("stalled behind hanging transactions whose outcome nothing proves yet; waiting for proof", zap.Error(serr),
			zap.Duration("waiting_for", time.Since(sc.hanging.unprovenSince).Round(time.Second)), zap.Duration("recovery_timeout", sc.cfg.RecoveryTimeout))
		return &rebuildError{serr}
	}
	sc.stalls++
	if sc.stalls >= 2 {
		sc.log.Error("stalled; a new client did not help", zap.Error(serr))
		return serr
	}
	sc.log.Warn("stalled; rebuilding the client", zap.Error(serr))
	return &rebuildError{serr}
}

// stallCandidates are the partitions of this instance (all of them, if
// the instance is not known to be a member) whose committed offset is
// below the last stable offset. An offset the group lacks is taken from
// the floor (resumed from the offsets mirror, or committed here: the
// group has none there until input comes).
func (sc *stallCheck) stallCandidates(stable kadm.ListedOffsets, committed kadm.OffsetResponses, mine map[string]map[int32]bool, member, known bool) map[string]map[int32]kgo.Offset {
	candidates := make(map[string]map[int32]kgo.Offset)
	stable.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || known && member && !mine[o.Topic][o.Partition] {
			return
		}
		at := int64(0)
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok && c.At >= 0 {
			at = c.At
		}
		if floor, below := sc.floor.below(o.Topic, o.Partition, at); below {
			at = floor
		}
		if at < o.Offset {
			if candidates[o.Topic] == nil {
				candidates[o.Topic] = make(map[int32]kgo.Offset)
			}
			candidates[o.Topic][o.Partition] = kgo.NewOffset().At(at)
		}
	})
	return candidates
}

// stallWaitingFor says what a stalled instance waits for: to join the
// group, when it is not a member; the group's offsets, when a pending
// transactional offset commit holds them back; else the records.
func (sc *stallCheck) stallWaitingFor(ctx context.Context, adm *kadm.Client, outside bool) string {
	if outside {
		return "to join the group (this instance is not a member)"
	}
	sctx, scancel := context.WithTimeout(kadm.RequireStable(ctx), 3*time.Second)
	_, serr := adm.FetchOffsetsForTopics(sctx, sc.cfg.AppID, sc.inputs...)
	scancel()
	if serr == nil {
		return "records from these partitions (the consumer fetched none)"
	}
	what := fmt.Sprintf("the group's committed offsets, which a pending transactional offset commit holds back (%v): an open or hanging transaction", serr)
	if sc.hanging.denied != "" {
		what += "; " + sc.hanging.denied
	}
	return what
}

// readable returns, as "topic/partition", the partitions where a
// read_committed reader starting at the given offsets gets a record
// within a few seconds.
func (sc *stallCheck) readable(ctx context.Context, from map[string]map[int32]kgo.Offset) []string {
	if len(from) == 0 {
		return nil
	}
	base, err := sc.cfg.KgoOpts()
	if err != nil {
		return nil
	}
	opts := append(append([]kgo.Opt{}, sc.extra...), base...)
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(from), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	n := 0
	for _, ps := range from {
		n += len(ps)
	}
	seen := make(map[string]bool)
	for len(seen) < n && pctx.Err() == nil {
		cl.PollFetches(pctx).EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				seen[p.Topic+"/"+strconv.Itoa(int(p.Partition))] = true
			}
		})
	}
	out := make([]string, 0, len(seen))
	for tp := range seen {
		out = append(out, tp)
	}
	slices.Sort(out)
	return out
}

// assigned returns the input partitions the group assigned to this
// instance, whether the instance is a member, and whether the group could
// be described at all (without DescribeGroups permission every partition
// is judged).
func (sc *stallCheck) assigned(ctx context.Context) (map[string]map[int32]bool, bool, bool) {
	g, err := kafkautil.DescribeGroup(ctx, sc.admin(), sc.cfg.AppID)
	if err != nil {
		return nil, false, false
	}
	m, ok := g.Member(sc.cfg.InstanceID)
	if !ok {
		return nil, false, true
	}
	mine := make(map[string]map[int32]bool)
	for t, ps := range m.Assigned {
		mine[t] = make(map[int32]bool)
		for _, p := range ps {
			mine[t][p] = true
		}
	}
	return mine, true, true
}
