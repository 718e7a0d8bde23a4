package eos

// A broker that restarts can make a transaction coordinator skip a
// partition's marker ("Couldn't find leader endpoint ... can be
// skipped"): the coordinator completes the transaction, but the partition
// keeps it open. Kafka then accepts the same producer's next
// transactional batch there at its newer epoch without starting a new
// transaction (ProducerAppendInfo keeps currentTxnFirstOffset), so the
// new transaction JOINS the old one, and its marker ends both: a commit
// exposes the records of an old one that aborted (a batch that was redone
// appears twice), an abort drops those of an old one that committed.
// joinGuard closes that hole mid-session, as repairHanging does at a
// session's start: once a request to a broker has failed on the wire (a
// broker may have restarted), the batch looks, before it ends, at the
// producers of every partition the app writes. A partition it wrote
// whose open transaction began before its first record there has joined
// an older one: the older one's outcome (from this instance's own EndTxn
// answers, else txnrepair's evidence) decides whether this transaction
// must abort (the older one aborted), may commit (it committed), or must
// not end at all (unproven, or committed while this one must abort). A
// partition it did not write that holds an older own transaction open is
// completed by repairHanging before this transaction can write there.
// Without a failed request nothing is looked at: a batch costs no request.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/internal/txnrepair"
	"github.com/eosflow/eosflow/topology"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ownEndedKept bounds the EndTxn answers kept as proof (see noteOwnEnd):
// a transaction whose marker was skipped is found by the next check, a
// few transactions later at most.
const ownEndedKept = 64

// joinLookEvery paces the looks of a check that waits for proof.
const joinLookEvery = 2 * time.Second

// joinGuard is one transactional session's watch for transactions joined
// to older ones (see the file's doc). It is a kgo hook on the session's
// client; suspect is set when a request fails on the wire and cleared by
// a check that saw every partition.
type joinGuard struct {
	hr          *hangingRepair // completes older transactions, and keeps this instance's proofs
	cfg         config.Config
	log         *zap.Logger
	mirrorTopic string // named last among the joined (see decideJoined)
	suspect     atomic.Bool
	doom        txnDoom // see doom.go
	// begun is the producer id and epoch the batch's transaction runs
	// at, read when it began; begunOK is false when that read failed.
	begun   producerEpoch
	begunOK bool
}

var (
	_ kgo.HookBrokerE2E     = (*joinGuard)(nil)
	_ kgo.HookBrokerConnect = (*joinGuard)(nil)
)

// OnBrokerConnect marks the same for a dial that failed: a broker that
// is down fails no request until the client reaches it again.
func (g *joinGuard) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		g.arm(meta)
	}
}

// arm marks that a broker may have restarted: the next check looks, and
// the open transaction is doomed. A seed broker's failed dial does not
// count: a dead seed fails one at every metadata refresh, and a broker
// that restarts fails requests on its own connections too.
func (g *joinGuard) arm(meta kgo.BrokerMetadata) {
	if meta.NodeID < 0 {
		return
	}
	g.suspect.Store(true)
	g.doom.fail()
}

// isDoomed reports whether the open transaction is doomed (see doom.go).
func (g *joinGuard) isDoomed() bool { return g != nil && g.doom.isDoomed() }

// OnBrokerE2E marks that a broker may have restarted, which is when a
// coordinator can skip a marker: a request written or read with an error
// (a killed broker, a reset connection). An idle connection the client
// reaps fails no request, and does not count.
func (g *joinGuard) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	if err := e2e.Err(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		if isConnRetired(err) {
			// The client retired the connection (reaped it idle, or a
			// metadata update moved on) and sends the request again on
			// a new one, whose dial fails if the broker is down. Look
			// before the end, but doom nothing.
			g.suspect.Store(true)
			return
		}
		g.arm(meta)
	}
}

// isConnRetired reports franz-go's error for a request it retries on a
// new connection because it found its own dead (unexported there).
func isConnRetired(err error) bool {
	return strings.Contains(err.Error(), "the broker connection has died and the request will be retried on a new connection")
}

// suspected reports whether a broker may have restarted since the last
// check that saw every partition.
func (g *joinGuard) suspected() bool { return g != nil && g.suspect.Load() }

// begin starts the transaction's doom state and reads its epoch.
func (g *joinGuard) begin(cl *kgo.Client, bound time.Duration) {
	if g == nil {
		return
	}
	g.doom.start()
	g.readEpoch(cl, bound)
}

// readEpoch reads the producer id and epoch the transaction just begun
// runs at: under transaction version 2 the epoch names the transaction.
func (g *joinGuard) readEpoch(cl *kgo.Client, bound time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	id, epoch, err := cl.ProducerID(ctx)
	g.begun, g.begunOK = producerEpoch{id, epoch}, err == nil
	if g.begunOK && g.hr != nil {
		// A proof kept for this epoch was of a transaction that wrote
		// nothing and so did not move the epoch on; from now on the
		// epoch names this one.
		delete(g.hr.ownTxns, txnEpoch{id, epoch})
	}
}

// check runs the join check before the transaction ends, if a broker may
// have restarted, and returns whether it may still commit; an error means
// it must end neither way. firsts is read only then.
func (g *joinGuard) check(ctx context.Context, cl *kgo.Client, firsts func() map[topicPartition]int64, commit bool) (bool, error) {
	if !g.suspected() {
		return commit, nil
	}
	if !g.begunOK {
		// Until it ends, the transaction runs at the epoch it began at.
		g.readEpoch(cl, time.Until(deadlineOf(ctx)))
	}
	if !g.begunOK {
		// As a look that cannot see every partition (see noteBlindEnd);
		// the guard stays armed.
		g.noteBlindEnd(fmt.Errorf("cannot read the producer epoch of transactional id %q", runcfg.TransactionalID(g.cfg)), 0, commit)
		return commit, nil
	}
	return g.checkJoined(ctx, firsts(), commit)
}

// deadlineOf is ctx's deadline, or a minute from now without one.
func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// ended keeps what the coordinator answered the transaction's EndTxn as
// proof of its outcome: a commit End reports, or an abort this instance
// asked for (an abort cannot end as a commit), when no request failed
// since the check before End. An abort End chose itself
// after a commit was asked proves nothing: it also reports a commit whose
// answer was lost.
func (g *joinGuard) ended(ctx context.Context, cl *kgo.Client, committed, asked bool) {
	if g == nil || !g.begunOK || !committed && asked {
		return
	}
	if g.suspected() {
		// A request failed since the check before End: a broker was
		// away while End retried, and its coordinator may meanwhile
		// have timed the transaction out and aborted it. Leave the
		// outcome to the evidence (the coordinator, its log).
		return
	}
	// Under version 1 a producer keeps its epoch across transactions,
	// which it then does not name; under version 2 End moved it on by
	// one. The client knows its epoch: no request.
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil || id != g.begun.id || epoch != g.begun.epoch+1 {
		return
	}
	o := txnrepair.Aborted
	if committed {
		o = txnrepair.Committed
	}
	g.hr.noteOwnEnd(txnEpoch{g.begun.id, g.begun.epoch}, o)
}

// noteOwnEnd keeps o as the proven outcome of this instance's transaction
// k, and forgets the oldest such proofs past ownEndedKept.
func (hr *hangingRepair) noteOwnEnd(k txnEpoch, o txnrepair.Outcome) {
	if hr.ownTxns == nil {
		hr.ownTxns = make(map[txnEpoch]txnrepair.Verdict)
	}
	hr.ownTxns[k] = txnrepair.Verdict{Outcome: o, Where: fmt.Sprintf("this instance's EndTxn at epoch %d, answered", k.epoch)}
	hr.ownEnded = append(hr.ownEnded, k)
	if n := len(hr.ownEnded) - ownEndedKept; n > 0 {
		for _, old := range hr.ownEnded[:n] {
			delete(hr.ownTxns, old)
		}
		hr.ownEnded = append(hr.ownEnded[:0], hr.ownEnded[n:]...)
	}
}

// leftOpenError: the batch's transaction was neither committed nor
// aborted, as either could be wrong (see checkJoined); Run stops with it
// rather than rebuild, since a new client's InitProducerId would abort it.
type leftOpenError struct{ err error }

func (e *leftOpenError) Error() string { return e.err.Error() }
func (e *leftOpenError) Unwrap() error { return e.err }

// joinedTxn is a partition this transaction wrote whose open transaction
// began with an older one of the same producer, and what the evidence
// says of that one.
type joinedTxn struct {
	kadm.DescribedProducer       // the partition, its start offset, and this transaction's epoch
	older                  int16 // the epoch of the transaction it joined; -1 when unread
	verdict                txnrepair.Verdict
	readErr                error // why the older epoch could not be read
}

// joinLook is what one look found: the joined transactions, this
// instance's own hanging ones that nothing proves, and why it could not
// see every partition, if it could not.
type joinLook struct {
	joined   []joinedTxn
	unproven []HangingTxn
	blind    error
}

// checkJoined looks until it can decide, and returns whether the
// transaction may commit: no if it joined an older one that aborted (its
// abort ends both), and an error, ending nothing, if it joined one that
// committed and must abort. While an older one's outcome is unproven, or
// a partition was not seen, it waits and looks again, each wait logged,
// up to recovery_timeout (and the end of ctx), and then returns a
// *HangingError.
func (g *joinGuard) checkJoined(ctx context.Context, firsts map[topicPartition]int64, commit bool) (bool, error) {
	start := time.Now()
	for {
		// A request failing during the look arms the next batch's check:
		// its broker may skip this transaction's marker.
		g.suspect.Store(false)
		g.doom.checked.Store(g.doom.failures.Load())
		look := g.lookJoined(ctx, firsts)
		may, err := g.decideJoined(look.joined, commit)
		if err != nil {
			g.suspect.Store(true)
			return false, err
		}
		if len(look.unproven) == 0 && look.blind == nil {
			return may, nil
		}
		waited := time.Since(start)
		if waited >= g.cfg.RecoveryTimeout || ctx.Err() != nil {
			g.suspect.Store(true)
			if len(look.unproven) == 0 {
				g.noteBlindEnd(look.blind, waited, commit)
				return commit, nil
			}
			return false, &HangingError{Hanging: look.unproven, Waited: waited}
		}
		g.logJoinWait(look, waited)
		t := time.NewTimer(joinLookEvery)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// noteBlindEnd logs a batch that ends as it would have without the check,
// because the brokers could not be described before its end was due. An
// open transaction cannot wait longer: its coordinator aborts it at
// transaction_timeout. Ending it as asked keeps to the odds: most batches
// commit, so an older transaction it may have joined most likely
// committed too. The check stays armed, so the next batch looks again.
func (g *joinGuard) noteBlindEnd(blind error, waited time.Duration, commit bool) {
	g.log.Error("could not look whether this batch joined an older transaction of this instance that a restarted broker left open; ending it as asked, and the next batch looks again",
		zap.String("transactional_id", runcfg.TransactionalID(g.cfg)), zap.Int64("producer_id", g.begun.id), zap.Int16("epoch", g.begun.epoch),
		zap.Bool("commit", commit), zap.Duration("waited", waited.Round(time.Millisecond)), zap.Error(blind),
		zap.String("inspect", "eosctl txn hanging"))
}

// lookJoined looks once: repairHanging completes the older transactions
// of this producer open on partitions this one has not written (case b),
// then every partition this one wrote is checked for a join (case a).
func (g *joinGuard) lookJoined(ctx context.Context, firsts map[topicPartition]int64) joinLook {
	g.hr.pid, g.hr.pidEpoch = g.begun.id, g.begun.epoch
	g.hr.repairHanging(ctx)
	var look joinLook
	for _, h := range g.hr.unproven {
		if h.ProducerID == g.begun.id {
			look.unproven = append(look.unproven, h)
		}
	}
	adm := kadm.NewClient(g.hr.admin())
	var written []string
	for tp := range firsts {
		if !slices.Contains(written, tp.topic) {
			written = append(written, tp.topic) // ToTopicFunc's are not the topology's
		}
	}
	producers, _, err := g.hr.appProducers(ctx, adm, written...)
	look.blind = errors.Join(g.hr.blind, err)
	if producers == nil {
		return look
	}
	sctx, cancel := context.WithTimeout(ctx, searchBound)
	defer cancel()
	ev := g.hr.finder().NewEvidence(sctx, producers)
	producers.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID != g.begun.id || p.ProducerEpoch != g.begun.epoch || p.CurrentTxnStartOffset < 0 {
			return
		}
		first, wrote := firsts[topicPartition{p.Topic, p.Partition}]
		if wrote && p.CurrentTxnStartOffset >= first {
			return // it began with this transaction
		}
		j, ok := g.joinedAt(sctx, ev, p, g.begun, wrote)
		if !ok {
			return
		}
		look.joined = append(look.joined, j)
		look.blind = errors.Join(look.blind, j.readErr)
		if !j.verdict.Proven() && j.readErr == nil {
			// Unread, it is not known to be a join at all (it may be
			// this transaction's own record whose answer was lost):
			// the look is blind there, not waiting for proof.
			look.unproven = append(look.unproven, HangingTxn{TransactionalID: runcfg.TransactionalID(g.cfg), ProducerID: p.ProducerID,
				Epoch: j.older, Topic: p.Topic, Partition: p.Partition, StartOffset: p.CurrentTxnStartOffset})
		}
	})
	return look
}

// joinedAt reads which transaction opened what p holds open, and reports
// whether it is an older one than this (begun), with its verdict. wrote
// says whether this transaction wrote p after that start (which proves a
// join, even where epochs do not name transactions).
func (g *joinGuard) joinedAt(ctx context.Context, ev *txnrepair.Evidence, p kadm.DescribedProducer, begun producerEpoch, wrote bool) (joinedTxn, bool) {
	j := joinedTxn{DescribedProducer: p, older: -1}
	pid, epoch, err := g.hr.finder().ProducerAt(ctx, p.Topic, p.Partition, p.CurrentTxnStartOffset)
	if err != nil {
		j.readErr, j.verdict = err, txnrepair.Verdict{Unsure: true}
		return j, true
	}
	if pid == begun.id && epoch == begun.epoch && g.hr.finder().TransactionsV2(ctx) {
		return j, false // this transaction's own record, one whose answer was lost
	}
	if pid != begun.id || epoch >= begun.epoch {
		// Another producer's record there, or this epoch's: no older
		// transaction of this producer to name, but a join all the same
		// if this one wrote p later.
		return j, wrote
	}
	j.older = epoch
	older := p
	older.ProducerEpoch = epoch
	if v, ok := g.hr.ownTxns[txnEpoch{pid, epoch}]; ok {
		j.verdict = v
	} else {
		j.verdict = ev.Search(runcfg.TransactionalID(g.cfg), older)
	}
	return j, true
}

// decideJoined says whether the transaction may commit given the older
// transactions it joined: an aborted one makes it abort (its ABORT ends
// both, and the batch is redone); a committed one lets it commit, but
// when it must abort (or also joined an aborted one) it must end neither
// way, as its abort would drop committed records: that is an error
// naming the transaction and how to settle it.
func (g *joinGuard) decideJoined(joined []joinedTxn, commit bool) (bool, error) {
	// The error names the first: one of the user's topics rather than
	// the offsets mirror, which every transaction writes too.
	joined = slices.Clone(joined)
	slices.SortStableFunc(joined, func(a, b joinedTxn) int {
		return cmp.Or(cmp.Compare(g.lastIfMirror(a.Topic), g.lastIfMirror(b.Topic)), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	may := commit
	for _, j := range joined {
		if j.verdict.Outcome == txnrepair.Aborted {
			may = false
			g.log.Warn("this transaction joined an older one of this instance that aborted, left open by a restarted broker; aborting both, and the batch is redone",
				g.joinFields(j)...)
		}
	}
	for _, j := range joined {
		if j.verdict.Outcome == txnrepair.Committed && !may {
			g.log.Error("this transaction joined an older one of this instance that committed, and must abort; ending neither", g.joinFields(j)...)
			return false, fmt.Errorf("eos: the transaction of transactional id %q (producer id %d epoch %d) joined, on %s/%d from offset %d, its transaction at epoch %d that committed (%s), a restarted broker having left it open there; this one must abort, which would drop those committed records, so it is left open; its coordinator aborts it once transaction_timeout (%s) passes, which drops them too: settle it before then with `eosctl txn hanging --topic %s --partition %d` and `eosctl txn commit`",
				runcfg.TransactionalID(g.cfg), g.begun.id, g.begun.epoch, j.Topic, j.Partition, j.CurrentTxnStartOffset, j.older, j.verdict.Where, g.cfg.TransactionTimeout, j.Topic, j.Partition)
		}
	}
	return may, nil
}

// joinFields are the log fields naming joined transaction j.
func (g *joinGuard) joinFields(j joinedTxn) []zap.Field {
	return []zap.Field{zap.String("transactional_id", runcfg.TransactionalID(g.cfg)), zap.Int64("producer_id", g.begun.id),
		zap.Int16("epoch", g.begun.epoch), zap.Int16("joined_epoch", j.older), zap.String("topic", j.Topic), zap.Int32("partition", j.Partition),
		zap.Int64("start_offset", j.CurrentTxnStartOffset), zap.String("outcome", j.verdict.Outcome.String()), zap.String("proof", j.verdict.Where),
		zap.String("inspect", fmt.Sprintf("eosctl txn hanging --topic %s --partition %d", j.Topic, j.Partition))}
}

// logJoinWait logs what a waiting check waits for.
func (g *joinGuard) logJoinWait(look joinLook, waited time.Duration) {
	for _, h := range look.unproven {
		g.log.Warn("waiting for proof of how an older transaction of this instance ended, which a restarted broker left open where this batch writes; this batch ends neither way until then",
			zap.String("transactional_id", h.TransactionalID), zap.Int64("producer_id", h.ProducerID), zap.Int16("epoch", h.Epoch),
			zap.String("topic", h.Topic), zap.Int32("partition", h.Partition), zap.Int64("start_offset", h.StartOffset),
			zap.Duration("waited", waited.Round(time.Second)), zap.Duration("recovery_timeout", g.cfg.RecoveryTimeout), zap.String("inspect", h.inspect()))
	}
	if look.blind != nil {
		g.log.Warn("waiting to see every partition this app writes before ending the batch, as a restarted broker may have left an older transaction of this instance open there",
			zap.String("transactional_id", runcfg.TransactionalID(g.cfg)), zap.Error(look.blind),
			zap.Duration("waited", waited.Round(time.Second)), zap.Duration("recovery_timeout", g.cfg.RecoveryTimeout), zap.String("inspect", "eosctl txn hanging"))
	}
}

// newJoinGuard is the join guard of one transactional session of r.
func newJoinGuard(r *Runner) *joinGuard {
	return &joinGuard{hr: r.hanging, cfg: r.cfg, log: r.log, mirrorTopic: topology.OffsetsTopic(r.cfg.AppID)}
}

// lastIfMirror returns 1 for the offsets mirror's topic, else 0: a sort
// key that names the user's topics first.
func (g *joinGuard) lastIfMirror(topic string) int {
	if topic == g.mirrorTopic {
		return 1
	}
	return 0
}
