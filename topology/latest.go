package topology

// AggregateOption tunes Count, Reduce and Aggregate.
type AggregateOption interface{ applyAggregate(*aggConf) }

type aggConf struct {
	latest bool
}

type aggOpt func(*aggConf)

func (f aggOpt) applyAggregate(c *aggConf) { f(c) }

// LatestPerCommit makes the aggregation emit only each key's last update
// of a batch, overriding the default of one update per input record: the
// record cache of Kafka Streams, for hot keys whose every intermediate
// value is of no use downstream. The store is still written per record;
// the updates are held back and, when the batch is about to commit, each
// key's last one runs through the nodes after the aggregation, as if it
// were the input record that made it (its key, headers, timestamp, source
// partition and offset, and the stores of its task). Its outputs, the
// changelog and the input offsets then commit in the batch's transaction,
// or none of them; a batch that aborts emits nothing and is redone.
//
// What it trades: fewer outputs and changelog-sized output topics for
// latency (an update waits for the end of its batch, up to the commit
// interval) and for the intermediate values, which downstream never sees.
//
// A node after the aggregation that fails on a held-back update is
// settled by its policy at the end of the batch: Fail aborts the batch
// (state and outputs are undone) and stops Run; Skip and DeadLetter drop
// that update (the dead letter is the input record that made it) while the
// aggregation's store keeps the new value, which later updates of the key
// build on; the store writes of the nodes after it are undone. A failure
// after the update's context ended (a shutdown or a revoke) aborts the
// batch, which is redone. Aggregations downstream of the aggregation with
// this option may hold back updates too: they run in topology order.
func LatestPerCommit() AggregateOption {
	return aggOpt(func(c *aggConf) { c.latest = true })
}

func aggOptions(opts []AggregateOption) aggConf {
	var c aggConf
	for _, o := range opts {
		if o != nil {
			o.applyAggregate(&c)
		}
	}
	return c
}
