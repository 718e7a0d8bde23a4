package eos

import (
	"context"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// resumeCheck decides where a partition assigned to this member resumes:
// at the group's committed offset, checked against the offsets this
// process's own commits reached (the floor) and those the offsets mirror
// records, so that a broker that forgot or has not loaded the group's
// offsets cannot make the app process records again. It is the client's
// AdjustFetchOffsetsFn.
type resumeCheck struct {
	cfg         config.Config
	log         *zap.Logger
	extra       []kgo.Opt             // the user's client options
	clientLevel func() kgo.LogLevel   // the mirror reader's log level
	admin       func() *kgo.Client    // preflight's client, once made
	mirror      func() *offsetsMirror // the offsets mirror, once preflight made it; nil without exactly-once
	mirrorTopic string                // its topic
	authz       *authz                // names the grants a refusal lacks
	floor       *offsetFloor          // the offsets this process's commits reached
	idleWake    *pollWake             // ends an idle poll once tasks have their offsets
	hasState    bool                  // the topology has state stores (and so timers may wait)
}

// newResumeCheck is r's check.
func newResumeCheck(r *Runner) *resumeCheck {
	return &resumeCheck{cfg: r.cfg, log: r.log, extra: r.extra, clientLevel: r.clientLogLevel,
		admin: func() *kgo.Client { return r.admin }, mirror: func() *offsetsMirror { return r.mirror }, mirrorTopic: topology.OffsetsTopic(r.cfg.AppID),
		authz: r.authz, floor: &r.floor, idleWake: &r.idleWake, hasState: r.state != nil}
}

// adjustFetched is the client's AdjustFetchOffsetsFn: offsets fetched below
// the floor are not used; the group's offsets are asked again until they
// reach it, for up to recovery_timeout, and then Run stops.
func (rc *resumeCheck) adjustFetched(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	defer rc.floor.pause()
	offsets, err := rc.checkFetched(ctx, fetched)
	if err == nil && rc.hasState {
		// New tasks' wall-clock timers wait for their offsets; an idle
		// poll would keep them waiting until it ends.
		rc.idleWake.wake()
	}
	return offsets, err
}

// checkFetched is adjustFetched's check, waiting as long as it must.
func (rc *resumeCheck) checkFetched(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	mirrored, err := rc.learnMirror(ctx, fetched)
	if err != nil {
		return nil, err
	}
	fetched = rc.resumeFromMirror(fetched, mirrored)
	behind := rc.floor.behind(fetched)
	if len(behind) == 0 {
		rc.floor.answered()
		return fetched, nil
	}
	since := rc.floor.wait(behind, rc.cfg.RebalanceTimeout)
	rc.log.Warn("the group's coordinator answered committed offsets below those the app's last commits reached; waiting for it to load the group before consuming them",
		zap.Strings("partitions", behind), zap.Duration("waited", time.Since(since)), zap.Duration("bound", rc.cfg.RecoveryTimeout))
	for next := time.Now().Add(10 * time.Second); ; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		again, ferr := rc.fetchCommitted(ctx, fetched)
		rc.floor.failed(ferr)
		if ferr == nil {
			if behind = rc.floor.behind(again); len(behind) == 0 {
				rc.floor.answered()
				rc.log.Info("the group's committed offsets are back", zap.Duration("waited", time.Since(since)))
				return again, nil
			}
			rc.floor.wait(behind, rc.cfg.RebalanceTimeout)
		}
		if err := rc.floor.bound(rc.cfg.AppID, rc.cfg.RecoveryTimeout); err != nil {
			return nil, err
		}
		if time.Now().After(next) {
			rc.log.Warn("still waiting for the group's committed offsets", zap.Strings("partitions", behind), zap.Duration("waited", time.Since(since)), zap.Error(ferr))
			next = time.Now().Add(10 * time.Second)
		}
	}
}

// resumeFromMirror starts each partition the group answered no committed
// offset for where the mirror says its last commit reached: written in
// the same transactions as the group's offsets, the mirror is what the
// group held before its coordinator forgot it, or before the offsets
// expired (offsets.retention.minutes) while the app was stopped. An
// offset the group does answer is never replaced: one below the mirror's
// (a reset on purpose, or a broker's stale answer) waits in checkFetched.
func (rc *resumeCheck) resumeFromMirror(fetched map[string]map[int32]kgo.Offset, mirrored map[string]map[int32]kgo.EpochOffset) map[string]map[int32]kgo.Offset {
	for topic, ps := range fetched {
		for p, o := range ps {
			m, ok := mirrored[topic][p]
			if !ok || o.EpochOffset().Offset >= 0 || !rc.mirror().provenTopic(topic) {
				continue
			}
			rc.log.Warn("the group has no committed offset for a partition; resuming where the offsets mirror says its last commit reached",
				zap.String("topic", topic), zap.Int32("partition", p), zap.Int64("offset", m.Offset), zap.String("mirror", rc.mirrorTopic),
				zap.String("if_deleted_on_purpose", fmt.Sprintf("to process the input again, stop the app and also delete the mirror: eosctl topic delete %s --yes", rc.mirrorTopic)))
			ps[p] = kgo.NewOffset().At(m.Offset).WithEpoch(m.Epoch)
		}
	}
	return fetched
}

// fetchCommitted asks the group's committed offsets of the partitions of
// fetched again, keeping each kgo reset offset where none is committed.
func (rc *resumeCheck) fetchCommitted(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	topics := make([]string, 0, len(fetched))
	for t := range fetched {
		topics = append(topics, t)
	}
	resp, err := kadm.NewClient(rc.admin()).FetchOffsetsForTopics(kadm.RequireStable(ctx), rc.cfg.AppID, topics...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[int32]kgo.Offset, len(fetched))
	for topic, ps := range fetched {
		out[topic] = make(map[int32]kgo.Offset, len(ps))
		for p, o := range ps {
			got, ok := resp.Lookup(topic, p)
			switch {
			case ok && got.Err != nil:
				return nil, fmt.Errorf("%s/%d: %w", topic, p, got.Err)
			case ok && got.At >= 0:
				out[topic][p] = kgo.NewOffset().At(got.At).WithEpoch(got.LeaderEpoch)
			default:
				out[topic][p] = o
			}
		}
	}
	return out, nil
}
