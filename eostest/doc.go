// Package eostest runs a topology in a test, in process and
// deterministically, with no broker: Kafka Streams' TopologyTestDriver
// for eosflow. Records go through the engine the runtime (package eos)
// runs, so operators, stores, windows, timers, re-keying and error
// policies behave as they do in production.
//
//	d := eostest.New(t, top, eostest.Partitions("orders", 3))
//	in := eostest.Input(d, "orders", codec.JSON[Order]())
//	out := eostest.Output(d, "invoices", codec.JSON[Invoice]())
//	if err := in.Pipe("ada", Order{ID: "o-1", Items: 2, Total: 150}); err != nil {
//		t.Fatal(err)
//	}
//	got := out.ReadAll() // key, value, headers, timestamp, partition, offset
//
// # What the driver does
//
// Each piped record is written to its topic (a partition and an offset)
// and run through the topology at once, in a batch of its own, or with
// others in one batch inside Driver.Batch. A batch that succeeds commits:
// its outputs land in their topics, where OutputTopic and
// Driver.DeadLetters read them, and its store writes are kept. A record
// that fails under the Fail policy aborts its batch: the pipe call
// returns the error Runner.Run would stop with, and none of the batch's
// outputs or store writes are kept. Records written to a topic the
// topology reads, a repartition topic above all, are taken after the
// batch that wrote them commits, each in a batch of its own, before the
// pipe call returns.
//
// A record goes to the partition the runtime's producer would choose:
// franz-go's murmur2 hash of its key, as Kafka's Java client computes it,
// or the partition the sink's topology.Partitioner chose. Every topic has
// one partition unless Partitions or DefaultPartitions say otherwise;
// repartition topics are sized as the runtime creates them. Stores have
// one instance per task (input partition), as in production; Store reads
// and seeds them.
//
// Stream time is per task and moves only with the timestamps of the
// task's records, as in production: windows close, and stream-time
// timers fire, when a later record arrives. There is no call to move it
// otherwise; pipe a record with a later timestamp (see Timestamp). The
// wall clock starts at DefaultStart and moves only in
// Driver.AdvanceWallClock, which fires the wall-clock timers due on the
// way. A piped record's timestamp is the wall clock's unless Timestamp
// sets one.
//
// # Where it differs from a broker-backed run
//
//   - No transactions, producers, consumer groups or fencing: a batch
//     commits or aborts in memory, and the guarantee (exactly-once,
//     at-least-once, ...) is not modelled. Batches are one record each
//     unless Driver.Batch holds one open, so topology.LatestPerCommit
//     emits every update outside Batch.
//   - A record failing under the Fail policy stops Runner.Run in
//     production, and a restart fails on it again; the driver returns
//     the error and passes the record over, so later records run. When
//     the record was fed back (from a repartition topic), the batch that
//     wrote it stays committed, as it is in production.
//   - No rebalances, revokes or shutdown mid-batch: one instance owns
//     every task, and user code's context ends only at Close.
//   - No changelog topics and no restore: every store is in memory,
//     whatever engine the topology declares, and Store's writes act as
//     if restored from the changelog.
//   - Order: records are taken in the order they are piped, and fed-back
//     records in the order they were written. A broker gives no order
//     across partitions; the runtime merges co-partitioned topics (a
//     join's) by timestamp as far as fetched, the driver keeps your order.
//   - Wall-clock timers fire only in AdvanceWallClock, not at the end of
//     every batch; a timer that would have fired several times while the
//     clock moved fires at each of its due times.
//   - Retry backoff does not wait, and does not move the wall clock.
//   - A record without a key goes to partition 0, where the producer
//     sticks to a random partition for a batch of such records.
//   - Topics are checked for existence and max.message.bytes (see
//     MaxMessageBytes) as the runtime checks them, but not for
//     compaction: a keyless output to a compacted topic is not refused.
//     Output topics keep every record, as with no retention or compaction.
//   - Dedup nodes use the store they were given (dedup.NewMemory suits a
//     test), whose leases and retention follow the real clock, not the
//     driver's. Metrics, tracing, health and the eos.Runner options are
//     not part of it.
package eostest
