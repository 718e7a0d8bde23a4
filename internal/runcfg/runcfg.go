// Package runcfg holds the settings the runtime derives from a
// config.Config, which users neither write nor call: the workers and their
// ids (transactional.id, group.instance.id, state directory), the group
// protocol, the memory budget of a worker and the log level.
package runcfg

import (
	"github.com/eosflow/eosflow/config"
	"go.uber.org/zap/zapcore"
)

// Memory is what one worker's share of max_memory buys: the sizes of its
// client's fetch and produce buffers and of its batches. The runtime
// derives them with MemoryOf, so that memory is bounded by bytes
// whatever the record size, not by records alone.
type Memory struct {
	// Share is the worker's part of max_memory: max_memory divided by
	// the workers.
	Share config.ByteSize
	// FetchMaxBytes is the most bytes one fetch asks a broker for
	// (kgo.FetchMaxBytes, Java fetch.max.bytes): a 128th of the share,
	// at most franz-go's default 50 MiB. The client holds one fetch per
	// broker it consumes from while the records of another are
	// processed. It counts compressed bytes: decompressed and decoded,
	// records take several times that (up to 20 times for very
	// compressible values), which the share allows for.
	FetchMaxBytes int32
	// FetchMaxPartitionBytes is the most bytes one fetch takes of a
	// partition (kgo.FetchMaxPartitionBytes): a quarter of FetchMaxBytes,
	// at most the 1 MiB default. A larger record still comes through.
	FetchMaxPartitionBytes int32
	// ProducerBufferedBytes bounds the key, value and header bytes the
	// producer holds unacknowledged (kgo.MaxBufferedBytes): an eighth of
	// the share. Produce waits past it, and a record larger than it
	// fails.
	ProducerBufferedBytes int
	// BatchBytes ends a batch once its input records' key, value and
	// header bytes reach it, as max_batch_records does by count: a
	// quarter of the share. A batch always takes its first record.
	BatchBytes int64
	// GoLimit is the Go runtime's soft memory limit (debug.SetMemoryLimit)
	// Run sets for the process when neither GOMEMLIMIT nor the program
	// set one: four fifths of max_memory (of every worker together), the
	// rest left for what the Go runtime does not count, chiefly the
	// program's code.
	GoLimit int64
}

// maxMemory is max_memory for the whole process: the setting, or
// DefaultMaxMemory per worker when unset.
func maxMemory(c config.Config) config.ByteSize {
	if c.MaxMemory == 0 {
		return config.DefaultMaxMemory * config.ByteSize(WorkerCount(c))
	}
	return c.MaxMemory
}

// MemoryOf is the buffer sizes one worker derives from c's max_memory
// (see Memory's fields). It assumes c.Validate passed.
func MemoryOf(c config.Config) Memory {
	total := maxMemory(c)
	share := max(total/config.ByteSize(WorkerCount(c)), 1)
	fetch := min(int64(share)/128, 50<<20)
	return Memory{
		Share:                  share,
		FetchMaxBytes:          int32(max(fetch, 1<<10)),
		FetchMaxPartitionBytes: int32(max(min(fetch/4, 1<<20), 1<<10)),
		ProducerBufferedBytes:  int(share / 8),
		BatchBytes:             int64(share / 4),
		GoLimit:                int64(total) / 5 * 4,
	}
}

// Level is the zap level of c's LogLevel; the runtime filters its logger with
// it, so log_level takes effect. A LogLevel that Validate would reject
// gives info, the default.
func Level(c config.Config) zapcore.Level {
	switch c.LogLevel {
	case "debug":
		return zapcore.DebugLevel
	case "warn":
		return zapcore.WarnLevel
	case "error":
		return zapcore.ErrorLevel
	}
	return zapcore.InfoLevel
}
