package txnrepair

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Outcome is how a transaction ended, as far as the evidence proves.
type Outcome int8

const (
	// Unknown: no evidence proves either outcome.
	Unknown Outcome = iota
	// Committed: the coordinator decided to commit.
	Committed
	// Aborted: the coordinator decided to abort.
	Aborted
)

// String names the outcome as operators read it.
func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	}
	return "unknown"
}

// Verdict is what the evidence says of one transaction: its outcome and
// where that was read, or that a read failed or ran out of its bounds
// before it could tell (Unsure), which must not pass for "no evidence
// anywhere": asking again later may prove it.
type Verdict struct {
	Outcome Outcome
	Unsure  bool
	Where   string // the evidence: "topic/partition", or the coordinator
}

// Proven reports whether v decides the transaction.
func (v Verdict) Proven() bool { return v.Outcome != Unknown }

// Marker is the marker that completes a proven outcome.
func (v Verdict) Marker() string {
	if v.Outcome == Committed {
		return "COMMIT"
	}
	return "ABORT"
}

// Reader returns a client that reads topic/partition from offset as it
// is; ReaderOpts gives the options it must end with.
type Reader func(topic string, partition int32, offset int64) (*kgo.Client, error)

// ReaderOpts are the options a Reader's client ends with, over any of
// the caller's: read uncommitted with control records, from offset, and
// never reset (a gone offset is an error, not a jump).
func ReaderOpts(topic string, partition int32, offset int64) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(offset)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	}
}

// Finder searches the evidence of transactions' outcomes on one cluster.
type Finder struct {
	cl   *kgo.Client
	adm  *kadm.Client
	read Reader
	log  *zap.Logger
	v2   atomic.Bool
}

// NewFinder searches through cl (admin requests) and read (log reads),
// and logs every search on log.
func NewFinder(cl *kgo.Client, read Reader, log *zap.Logger) *Finder {
	return &Finder{cl: cl, adm: kadm.NewClient(cl), read: read, log: log}
}

// TransactionsV2 reports whether the cluster has finalized
// transaction.version 2, under which the client bumps the epoch on every
// EndTxn: only then do epochs name transactions, and only then can any
// evidence but a running coordinator's be read. Only a yes is kept: a
// cluster is not downgraded under a running app, and a failed lookup
// must not stick as a no.
func (f *Finder) TransactionsV2(ctx context.Context) bool {
	if f.v2.Load() {
		return true
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(actx, f.cl)
	if err != nil || resp.ErrorCode != 0 {
		return false
	}
	for _, ft := range resp.FinalizedFeatures {
		if ft.Name == "transaction.version" && ft.MaxVersionLevel >= 2 {
			f.v2.Store(true)
		}
	}
	return f.v2.Load()
}

// FromCoordinator is what coordinator state d proves of the transaction
// open in h: under transaction version 2 every EndTxn bumps the epoch, so
// a coordinator one epoch on that prepares or completes a commit (or an
// abort) decided exactly that for h's transaction. Any other state, an
// earlier or later epoch, or version 1 (where a commit and an abort can
// share an epoch) proves nothing.
func (f *Finder) FromCoordinator(ctx context.Context, d kadm.DescribedTransaction, h kadm.DescribedProducer) Verdict {
	if d.ProducerID != h.ProducerID || d.ProducerEpoch != h.ProducerEpoch+1 {
		return Verdict{}
	}
	var o Outcome
	switch d.State {
	case "PrepareCommit", "CompleteCommit":
		o = Committed
	case "PrepareAbort", "CompleteAbort":
		o = Aborted
	default:
		return Verdict{}
	}
	if !f.TransactionsV2(ctx) {
		return Verdict{}
	}
	return Verdict{Outcome: o, Where: "its coordinator, at epoch " + itoa16(d.ProducerEpoch) + " in " + d.State}
}

// Search finds how the coordinator of txnID ended the transaction open in
// h: from its log first, then from the markers it wrote on the other
// partitions of all (the described producers of every partition the
// transaction may have written). Each source is bounded and logged.
func (f *Finder) Search(ctx context.Context, txnID string, all kadm.DescribedProducersTopics, h kadm.DescribedProducer) Verdict {
	v := f.txnLogOutcome(ctx, txnID, h.ProducerID, h.ProducerEpoch)
	if v.Proven() {
		return v
	}
	m := f.markerOutcome(ctx, all, h)
	m.Unsure = m.Unsure || v.Unsure && !m.Proven()
	return m
}

// RepairEpoch is the epoch of the marker that completes hanging
// transaction h with a proven outcome, while its producer is at epoch
// current: the next one, as its coordinator writes it under transaction
// version 2, when the producer is past it, so that a later search reads
// it as this transaction's outcome too; else h's own. Kafka checks a
// marker written by WriteTxnMarkers only against the partition's epoch:
// the next epoch on a partition that a live producer at that epoch has
// joined would end its open transaction too.
func (f *Finder) RepairEpoch(ctx context.Context, h kadm.DescribedProducer, current int16) int16 {
	if current > h.ProducerEpoch+1 && f.TransactionsV2(ctx) {
		return h.ProducerEpoch + 1
	}
	return h.ProducerEpoch
}

// Complete writes the marker of proven verdict v to h's partition at
// epoch, and refuses an unproven one: completing a transaction on a guess
// can drop committed records or expose aborted ones.
func Complete(ctx context.Context, adm *kadm.Client, h kadm.DescribedProducer, v Verdict, epoch int16) error {
	if !v.Proven() {
		return ErrUnproven
	}
	return WriteMarker(ctx, adm, h, v.Outcome == Committed, epoch)
}

// WriteMarker writes a COMMIT (commit) or ABORT marker for h's producer
// at epoch to h's partition. Only an operator's --force calls it without
// proof.
func WriteMarker(ctx context.Context, adm *kadm.Client, h kadm.DescribedProducer, commit bool, epoch int16) error {
	resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID: h.ProducerID, ProducerEpoch: epoch,
		// A transaction that hung before its coordinator ever wrote a
		// marker has coordinator epoch -1; 0 is not above any epoch the
		// partition has seen, as Kafka's own tool does.
		CoordinatorEpoch: max(h.CoordinatorEpoch, 0), Commit: commit,
		Topics: kadm.TopicsSet{h.Topic: {h.Partition: struct{}{}}},
	})
	if err != nil {
		return err
	}
	resp.EachPartition(func(pr kadm.TxnMarkersPartitionResponse) {
		err = errors.Join(err, pr.Err)
	})
	return err
}

// ErrUnproven: no evidence proves the transaction's outcome, so nothing
// may complete it.
var ErrUnproven = errors.New("txnrepair: the transaction's outcome is not proven")

// isAuthError reports a refusal no retry changes.
func isAuthError(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}
