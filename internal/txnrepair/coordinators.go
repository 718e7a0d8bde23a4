package txnrepair

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
)

// coordinatorLookupTimeout bounds asking the coordinators about a set of
// producer ids (ListTransactions, then DescribeTransactions).
const coordinatorLookupTimeout = 10 * time.Second

// Coordinators is what the transaction coordinators say now of a set of
// producer ids: the one lookup that both the runtime's repair and
// `eosctl txn` judge open transactions by.
type Coordinators struct {
	// TxnIDs holds, by producer id, the transactional id a coordinator
	// lists the producer id under.
	TxnIDs map[int64]string
	// States holds, by transactional id, what its coordinator says of
	// it: a state, or Err kerr.TransactionalIDNotFound when it no longer
	// knows the id. An id whose description failed, or that the lookup
	// did not ask for (another app's), is absent.
	States kadm.DescribedTransactions
	// AllListed reports that every coordinator answered the listing: only
	// then is a producer id missing from TxnIDs one that no coordinator
	// lists.
	AllListed bool
}

// LookupCoordinators asks the coordinators which transactional ids hold
// pids, and describes those ids; with appID set, only the app's ids
// (appID and the separator, then the instance id) are described. The
// error reports what could not be asked (a grant missing, a coordinator
// not answering); what was learned is returned with it.
func LookupCoordinators(ctx context.Context, adm *kadm.Client, pids []int64, appID string) (Coordinators, error) {
	c := Coordinators{TxnIDs: map[int64]string{}, States: kadm.DescribedTransactions{}}
	if len(pids) == 0 {
		c.AllListed = true
		return c, nil
	}
	lctx, cancel := context.WithTimeout(ctx, coordinatorLookupTimeout)
	defer cancel()
	listed, lerr := adm.ListTransactions(lctx, pids, nil)
	if lerr != nil {
		lerr = fmt.Errorf("listing the transactions of %d producer id(s): %w", len(pids), lerr)
	}
	c.AllListed = lerr == nil
	var ids []string
	for _, l := range listed {
		if !slices.Contains(pids, l.ProducerID) { // a broker that ignores the filter
			continue
		}
		c.TxnIDs[l.ProducerID] = l.TxnID
		if appID == "" || strings.HasPrefix(l.TxnID, appPrefix(appID)) {
			ids = append(ids, l.TxnID)
		}
	}
	if len(ids) == 0 {
		return c, lerr
	}
	described, derr := adm.DescribeTransactions(lctx, ids...)
	if derr != nil {
		derr = fmt.Errorf("describing transactional ids %v: %w", ids, derr)
	}
	for id, d := range described {
		switch {
		case d.Err == nil, errors.Is(d.Err, kerr.TransactionalIDNotFound):
			c.States[id] = d
		default:
			derr = errors.Join(derr, fmt.Errorf("describing transactional id %q: %w", id, d.Err))
		}
	}
	return c, errors.Join(lerr, derr)
}

// appPrefix is how every transactional id of app appID begins: the
// instance id follows it.
func appPrefix(appID string) string { return appID + config.TransactionalIDSeparator }
