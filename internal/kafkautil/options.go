package kafkautil

import (
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxBufferedBytes bounds the produce buffer of clients that do not size
// theirs from max_memory (MemoryOptions), so that large records cannot
// turn the record cap into gigabytes of buffer: Produce waits for
// acknowledgements past it.
const MaxBufferedBytes = 256 << 20

// MemoryOptions are the fetch and produce buffer sizes cfg.Memory derives
// from max_memory, so that a pipeline client's memory is bounded by bytes.
func MemoryOptions(cfg config.Config) []kgo.Opt {
	m := runcfg.MemoryOf(cfg)
	return []kgo.Opt{
		kgo.FetchMaxBytes(m.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(m.FetchMaxPartitionBytes),
		kgo.MaxBufferedBytes(m.ProducerBufferedBytes),
	}
}

// ConnOptions returns user's options followed by cfg's connection settings
// (config.KgoOpts: brokers, TLS, SASL, client id). A later option wins, so
// a client reaches the configured cluster whatever user holds, while the
// rest of user (a dialer, hooks) still applies.
func ConnOptions(cfg config.Config, user ...kgo.Opt) ([]kgo.Opt, error) {
	base, err := cfg.KgoOpts()
	if err != nil {
		return nil, err
	}
	return append(append(make([]kgo.Opt, 0, len(user)+len(base)+16), user...), base...), nil
}

// FetchMaxWait is how long a broker holds a fetch that finds no records:
// the Java consumer's default fetch.max.wait.ms, not franz-go's 5s. A
// fetch sent as a restarted pipeline starts could otherwise hold its
// first records back for 5s; idle, it costs two fetches a second per
// broker. A user's kgo.FetchMaxWait (eos.ClientOpts) overrides it.
const FetchMaxWait = 500 * time.Millisecond

// PipelineOptions returns the options of a pipeline client consuming
// inputs under cfg.Guarantee: the runtime's and the hand-written benchmark
// loop's alike, so what one measures is what the other runs. user's options
// come first and what the guarantee depends on last, because a later
// option wins and user options must not switch it off. Under exactly-once
// the options are for kgo.NewGroupTransactSession, else for kgo.NewClient.
// The buffer sizes of MemoryOptions come before user's, which may change
// them.
func PipelineOptions(cfg config.Config, inputs []string, user ...kgo.Opt) ([]kgo.Opt, error) {
	opts, err := ConnOptions(cfg, append(append(MemoryOptions(cfg), kgo.FetchMaxWait(FetchMaxWait)), user...)...)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.ConsumerGroup(cfg.AppID),
		kgo.ConsumeTopics(inputs...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		// Static membership (KIP-345): a restarted instance takes its
		// partitions back at once instead of waiting for the group to
		// give up on its previous incarnation.
		kgo.InstanceID(cfg.InstanceID),
		kgo.DisableAutoCommit(),
		kgo.MaxBufferedRecords(2*cfg.MaxBatchRecords+1000),
	)
	if runcfg.Consumer(cfg) {
		// KIP-848: the group coordinator assigns the partitions, with the
		// server assignor of the balancer in use (franz-go's default
		// cooperative-sticky is "uniform", range is "range").
		opts = append(opts, kgo.ServerSideBalancer())
	}
	switch cfg.Guarantee {
	case config.ExactlyOnce:
		opts = append(opts,
			kgo.TransactionalID(runcfg.TransactionalID(cfg)),
			kgo.TransactionTimeout(cfg.TransactionTimeout),
			kgo.RequiredAcks(kgo.AllISRAcks()),
		)
	case config.Idempotent:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.BlockRebalanceOnPoll())
	case config.AtLeastOnce:
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.BlockRebalanceOnPoll())
	case config.AtMostOnce:
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.NoAck()), kgo.BlockRebalanceOnPoll())
	}
	return opts, nil
}
