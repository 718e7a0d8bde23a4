package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// orphaned returns the transactions of open (held open by partitions for
// producers other than this instance's) that hang, with their verdicts:
// the producer is one of this app's (its transactional id starts with
// app_id:), and its coordinator has since moved to a newer epoch and is
// writing no markers (neither PrepareCommit nor PrepareAbort), so none
// will come. The coordinator itself proves the outcome while it is one
// epoch on; later, only its log or the markers it wrote elsewhere do (see
// txnrepair). A transaction of an instance that runs again (in the
// group, its coordinator in a new session) and that no evidence decides
// is left to it: it alone holds the proof (see noteOwnTxn). It also
// returns the grants it lacked.
func (r *Runner) orphaned(ctx context.Context, adm *kadm.Client, ev *evidence, open []kadm.DescribedProducer) ([]hangingTxn, []string) {
	if len(open) == 0 {
		return nil, nil
	}
	byPID, listed, denied := r.appCoordinators(ctx, adm, open)
	var instances map[string]bool // the group's, described once, when first asked
	live := func(txnID string) bool {
		if instances == nil {
			instances = r.hanging.groupInstances(ctx)
		}
		return instances[strings.TrimPrefix(txnID, r.cfg.AppID+config.TransactionalIDSeparator)]
	}
	var out []hangingTxn
	for _, p := range open {
		if listed != nil && !listed[p.ProducerID] {
			if h, ok := r.unknownProducer(ev, p); ok {
				out = append(out, h)
			}
			continue
		}
		d, ok := byPID[p.ProducerID]
		if !ok || d.ProducerEpoch <= p.ProducerEpoch || d.State == "PrepareCommit" || d.State == "PrepareAbort" {
			continue
		}
		h := hangingTxn{DescribedProducer: p, txnID: d.TxnID, current: d.ProducerEpoch,
			why: fmt.Sprintf("a transaction of %s at epoch %d, whose coordinator is at epoch %d (%s) and writes it no marker", d.TxnID, p.ProducerEpoch, d.ProducerEpoch, d.State)}
		if h.verdict = r.hanging.finder().FromCoordinator(ctx, d, p); !h.verdict.Proven() {
			h.verdict = ev.of(d.TxnID, p)
		}
		if !h.verdict.Proven() && (d.State == "Empty" || d.State == "Ongoing") && live(d.TxnID) {
			// Its instance has started a new session and runs: it knows,
			// from before its InitProducerId, how this one ended, and
			// completes it itself.
			continue
		}
		out = append(out, h)
	}
	return out, denied
}

// unknownProducer takes the transaction open in p, whose producer id no
// coordinator lists, for hanging once it has been open longer than any
// transaction may be (config.MaxTransactionTimeout): its transactional id
// has moved to a new producer id (transaction version 2 rolls it over
// every ~32,000 transactions), or its producer is gone. Only the markers
// it wrote elsewhere can tell how it ended; its log cannot be found
// without the transactional id.
func (r *Runner) unknownProducer(ev *evidence, p kadm.DescribedProducer) (hangingTxn, bool) {
	open := time.Since(time.UnixMilli(p.LastTimestamp))
	if p.LastTimestamp <= 0 || open <= config.MaxTransactionTimeout {
		return hangingTxn{}, false
	}
	// No producer writes with this id any more: its marker goes at the
	// next epoch, as its coordinator's would (see RepairEpoch).
	h := hangingTxn{DescribedProducer: p, current: p.ProducerEpoch + 2,
		why: fmt.Sprintf("a transaction of producer id %d at epoch %d, which no coordinator knows, last written %s ago", p.ProducerID, p.ProducerEpoch, open.Round(time.Second))}
	h.verdict = ev.of("", p)
	return h, true
}

// appCoordinators returns, by producer id, what the coordinators of the
// app's transactional ids among open's producers say now, and which of
// open's producer ids any coordinator lists (nil when the listing
// failed). It also returns the grants it lacked.
func (r *Runner) appCoordinators(ctx context.Context, adm *kadm.Client, open []kadm.DescribedProducer) (map[int64]kadm.DescribedTransaction, map[int64]bool, []string) {
	var denied []string
	deny := func(err error) {
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			denied = append(denied, "Describe on the transactional ids "+r.cfg.AppID+": (prefixed)")
		}
	}
	pids := make([]int64, 0, len(open))
	for _, p := range open {
		if !slices.Contains(pids, p.ProducerID) {
			pids = append(pids, p.ProducerID)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	listed, err := adm.ListTransactions(lctx, pids, nil)
	if err != nil && len(listed) == 0 {
		r.log.Info("cannot list transactions to tell hanging ones from open ones", zap.Error(err))
		deny(err)
		return nil, nil, denied
	}
	known := map[int64]bool{}
	var ids []string
	for _, l := range listed {
		known[l.ProducerID] = true
		if r.hanging.appTxnID(l.TxnID) {
			ids = append(ids, l.TxnID)
		}
	}
	if len(ids) == 0 {
		return nil, known, denied
	}
	described, err := adm.DescribeTransactions(lctx, ids...)
	if err != nil && len(described) == 0 {
		r.log.Info("cannot describe transactions to tell hanging ones from open ones", zap.Error(err))
		deny(err)
		return nil, known, denied
	}
	byPID := map[int64]kadm.DescribedTransaction{}
	for _, d := range described {
		if d.Err == nil {
			byPID[d.ProducerID] = d
		} else {
			deny(d.Err)
		}
	}
	return byPID, known, denied
}
