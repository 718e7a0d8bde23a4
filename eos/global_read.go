package eos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
)

// ends is, per global topic and partition, its last stable offset now:
// how far start reads before the first batch; starts is its log start
// offset, where the read begins. A topic that does not
// exist, or does not answer, within connect_timeout is an error naming
// it and the fix.
func (g *globalTables) ends(ctx context.Context) (starts, ends map[string]map[int32]int64, err error) {
	topics := g.topics()
	lctx, cancel := context.WithTimeout(ctx, g.cfg.ConnectTimeout)
	defer cancel()
	adm := kadm.NewClient(g.admin())
	began, logged := time.Now(), time.Time{}
	for {
		var listed, first kadm.ListedOffsets
		listed, err = listEnds(lctx, adm, topics)
		if err == nil {
			if first, err = adm.ListStartOffsets(lctx, topics...); err == nil {
				err = first.Error()
			}
		}
		missing := topics
		if err == nil {
			missing = nil
			for _, topic := range topics {
				if len(listed[topic]) == 0 {
					missing = append(missing, topic)
				}
			}
			if len(missing) == 0 {
				return offsetMap(first), offsetMap(listed), nil
			}
		}
		if time.Since(logged) >= time.Second {
			g.log.Info("waiting for the global tables' topics to answer", zap.Strings("topics", missing),
				zap.Duration("waited", time.Since(began).Round(time.Millisecond)), zap.Duration("bound", g.cfg.ConnectTimeout), zap.Error(err))
			logged = time.Now()
		}
		select {
		case <-lctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if lctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("no such topic")
			}
			return nil, nil, fmt.Errorf("eos: global table topics %v cannot be read after connect_timeout %s: %w; %s",
				missing, g.cfg.ConnectTimeout, err, globalTopicsHint(missing))
		}
	}
}

// restore reads the global topics until every partition reaches its end
// in ends (or is caught up, see globalQuiet), applying each fetch at once.
// A read that makes no progress for the bound is an error naming the
// partitions left.
func (g *globalTables) restore(ctx context.Context, ends map[string]map[int32]int64) error {
	adm := kadm.NewClient(g.admin())
	began, progressed, logged := time.Now(), time.Now(), time.Now()
	var records, before int
	for {
		if now := time.Now(); g.lag.due(now) {
			g.lag.list(ctx, adm, g.topics(), now)
		}
		left := g.lag.left(ends)
		if len(left) == 0 {
			g.log.Info("global tables loaded", zap.Strings("topics", g.topics()), zap.Int("records", records),
				zap.Duration("took", time.Since(began).Round(time.Millisecond)))
			return nil
		}
		if len(left) != before {
			progressed, before = time.Now(), len(left)
		}
		if time.Since(progressed) > g.bound {
			return fmt.Errorf("eos: loading global tables: partitions %v made no progress for %s; %s",
				left, g.bound, globalTopicsHint(g.topics()))
		}
		if time.Since(logged) >= 5*time.Second {
			g.log.Info("loading global tables", zap.Strings("left", left), zap.Int("records", records),
				zap.Duration("waited", time.Since(began).Round(time.Millisecond)))
			logged = time.Now()
		}
		pctx, cancel := context.WithTimeout(ctx, globalCheckEvery)
		fs := g.cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := g.fetchErr(fs); err != nil {
			return err
		}
		for _, f := range g.fetched(fs) {
			if err := f.table.applyFetch(f); err != nil {
				return err
			}
			records += len(f.writes)
			progressed = time.Now()
		}
	}
}

// read keeps fetching the global topics and hands the fetches to apply,
// until ctx ends. A fetch error no retry cures, or a partition left
// behind its end for the bound (the topic deleted or unreadable), stops
// it and is what apply returns next, so that Run fails naming the topic
// rather than joining a stale table.
func (g *globalTables) read(ctx context.Context) {
	defer g.wg.Done()
	adm := kadm.NewClient(g.admin())
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, globalCheckEvery)
		fs := g.cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		err := g.fetchErr(fs)
		batch := g.fetched(fs)
		if now := time.Now(); err == nil && g.lag.due(now) {
			g.lag.list(ctx, adm, g.topics(), now)
			err = g.lag.stale(g.log, g.bound, now)
		}
		if err != nil {
			g.failed <- err
			return
		}
		if len(batch) == 0 {
			continue
		}
		select {
		case g.updates <- batch:
		case <-ctx.Done():
			return
		}
	}
}

// offsetMap is os by topic and partition.
func offsetMap(os kadm.ListedOffsets) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	os.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out
}
