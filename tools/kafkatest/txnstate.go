package kafkatest

import (
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CoordinatorSays makes c's coordinators answer every DescribeTransactions
// with state at producer id pid and epoch, for any transactional id: what
// a coordinator says after a restarting broker skipped a transaction's
// markers, which the embedded broker never does by itself.
func CoordinatorSays(c *kfake.Cluster, pid int64, epoch int16, state string) {
	c.ControlKey(int16(kmsg.DescribeTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.DescribeTransactionsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.State, st.TimeoutMillis, st.StartTimestamp = id, state, 60000, -1
			st.ProducerID, st.ProducerEpoch = pid, epoch
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
}
