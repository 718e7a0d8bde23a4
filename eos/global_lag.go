package eos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
)

// globalCheckEvery is how often the global reader lists the topics' last
// stable offsets, to tell how far behind it is.
const globalCheckEvery = time.Second

// globalFetchWait is the global client's fetch wait: a fetch at the end
// of a partition answers empty within it.
const globalFetchWait = 500 * time.Millisecond

// globalQuiet is how long a partition must deliver nothing, neither
// record nor error, with its last stable offset unchanged, before the
// read counts as caught up with it. A read_committed fetch never delivers
// the records of an aborted transaction, nor a marker or record past the
// last stable offset, nor offsets compaction removed: the next offset
// delivered can stay below the end for good although nothing is left to
// read. Several fetches answer within this time, so a partition still
// behind would have delivered something.
const globalQuiet = 4*globalFetchWait + time.Second

// globalPart is how far the read of one partition of a global topic got,
// and what the last checks said of its end.
type globalPart struct {
	next   int64     // the offset after the last record delivered
	caught int64     // the last stable offset the read was found caught up with
	heard  time.Time // when the partition last delivered a record or an error
	lso    int64     // its last stable offset at the last check; -1 unknown
	since  time.Time // since when the read is behind without moving; zero if not behind
	at     int64     // how far the read was at since
}

// reached is the offset up to which nothing is left to read.
func (p *globalPart) reached() int64 { return max(p.next, p.caught) }

// globalLag follows the read of the global topics, to end the load and
// to stop Run when a table goes stale.
type globalLag struct {
	parts   map[string]map[int32]*globalPart
	listErr error     // the last listing's error, if any
	checked time.Time // when the offsets were last listed
	warned  time.Time
}

// newGlobalLag follows the partitions in starts, read from the offsets
// given.
func newGlobalLag(starts map[string]map[int32]int64, now time.Time) *globalLag {
	l := &globalLag{parts: map[string]map[int32]*globalPart{}}
	for topic, ps := range starts {
		l.parts[topic] = map[int32]*globalPart{}
		for p, at := range ps {
			l.parts[topic][p] = &globalPart{next: at, caught: -1, heard: now, lso: -1}
		}
	}
	return l
}

// heard notes that partition p of topic delivered records up to next-1
// (next 0 for an error alone).
func (l *globalLag) heard(topic string, p int32, next int64, now time.Time) {
	if gp := l.parts[topic][p]; gp != nil {
		gp.next, gp.heard = max(gp.next, next), now
	}
}

// due reports whether the offsets should be listed again.
func (l *globalLag) due(now time.Time) bool { return now.Sub(l.checked) >= globalCheckEvery }

// list lists the last stable offsets of topics and checks them.
func (l *globalLag) list(ctx context.Context, adm *kadm.Client, topics []string, now time.Time) {
	lctx, cancel := context.WithTimeout(ctx, globalCheckEvery)
	defer cancel()
	listed, err := adm.ListCommittedOffsets(lctx, topics...)
	if err == nil {
		err = listed.Error()
	}
	l.listErr = err
	l.check(offsetMap(listed), now)
}

// check takes the last stable offsets listed: a partition is caught up
// when it reached its offset, or delivered nothing for globalQuiet while
// the offset stayed the same; one behind starts, or keeps, its clock.
func (l *globalLag) check(listed map[string]map[int32]int64, now time.Time) {
	l.checked = now
	for topic, ps := range l.parts {
		for p, gp := range ps {
			lso, ok := listed[topic][p]
			if ok && lso == gp.lso && now.Sub(gp.heard) >= globalQuiet {
				gp.caught = max(gp.caught, lso)
			}
			gp.lso = -1
			if ok {
				gp.lso = lso
			}
			switch {
			case ok && gp.reached() >= lso:
				gp.since = time.Time{}
			case gp.since.IsZero() || gp.reached() != gp.at:
				gp.since, gp.at = now, gp.reached()
			}
		}
	}
}

// stale is the error naming the first partition behind, without moving,
// for longer than bound, or nil. It warns, every few seconds, of the
// partitions behind for longer than globalQuiet.
func (l *globalLag) stale(log *zap.Logger, bound time.Duration, now time.Time) error {
	var first error
	for topic, ps := range l.parts {
		for p, gp := range ps {
			if gp.since.IsZero() || now.Sub(gp.since) < globalQuiet {
				continue
			}
			if now.Sub(l.warned) >= 5*time.Second {
				log.Warn("a global table's topic is read behind its end", zap.String("topic", topic), zap.Int32("partition", p),
					zap.String("lag", gp.describe(l.listErr)), zap.Duration("for", now.Sub(gp.since).Round(time.Millisecond)))
			}
			if first == nil && now.Sub(gp.since) > bound {
				first = fmt.Errorf("eos: global table topic %s partition %d: %s, for %s; the table would be stale, so Run stops: "+
					"check the topic (`eosctl topic describe %s`), then start again to read it whole", topic, p, gp.describe(l.listErr),
					now.Sub(gp.since).Round(time.Second), topic)
			}
		}
	}
	if now.Sub(l.warned) >= 5*time.Second {
		l.warned = now
	}
	return first
}

// describe says how far behind gp is.
func (gp *globalPart) describe(listErr error) string {
	if gp.lso < 0 {
		return fmt.Sprintf("its last stable offset cannot be listed (the topic deleted or unreadable: %v), read up to offset %d", listErr, gp.reached())
	}
	return fmt.Sprintf("%d offsets behind its last stable offset %d, read up to offset %d", gp.lso-gp.reached(), gp.lso, gp.reached())
}

// left names the partitions not yet read up to their offset in ends.
func (l *globalLag) left(ends map[string]map[int32]int64) []string {
	var out []string
	for topic, ps := range ends {
		for p, end := range ps {
			if gp := l.parts[topic][p]; gp != nil && gp.reached() < end {
				out = append(out, fmt.Sprintf("%s/%d", topic, p))
			}
		}
	}
	return out
}
