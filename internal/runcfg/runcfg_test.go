package runcfg

import (
	"testing"

	"github.com/eosflow/eosflow/config"
	"go.uber.org/zap/zapcore"
)

// maxMessageBytes is the broker default message.max.bytes.
const maxMessageBytes = 1048588

func valid() config.Config {
	c := config.Default()
	c.Brokers, c.AppID, c.InstanceID = []string{"127.0.0.1:9092"}, "orders", "worker-0"
	return c
}

// The derived sizes follow the documented fractions of a worker's share,
// and every worker's share together is max_memory.
func TestMemoryDerived(t *testing.T) {
	c := valid()
	m := MemoryOf(c)
	want := Memory{
		Share:                  128 * config.MiB,
		FetchMaxBytes:          1 << 20,
		FetchMaxPartitionBytes: 256 << 10,
		ProducerBufferedBytes:  16 << 20,
		BatchBytes:             32 << 20,
		GoLimit:                int64(128*config.MiB) / 5 * 4,
	}
	if m != want {
		t.Fatalf("default MemoryOf = %+v, want %+v", m, want)
	}

	c.Workers = 4
	want4 := want
	want4.GoLimit = int64(4*128*config.MiB) / 5 * 4
	if got := MemoryOf(c); got != want4 {
		t.Fatalf("workers 4, max_memory unset: %+v; want the default share per worker and a limit for all four, %+v", got, want4)
	}
	c.MaxMemory = config.GiB
	m = MemoryOf(c)
	if m.Share != 256*config.MiB || m.FetchMaxBytes != 2<<20 || m.FetchMaxPartitionBytes != 512<<10 || m.ProducerBufferedBytes != 32<<20 || m.BatchBytes != 64<<20 || m.GoLimit != int64(config.GiB)/5*4 {
		t.Fatalf("max_memory 1GiB over 4 workers: %+v", m)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	w := ForWorker(c, 3)
	if w.MaxMemory != 256*config.MiB || MemoryOf(w).Share != m.Share {
		t.Fatalf("ForWorker(3): max_memory %s, share %s; want the worker's share", w.MaxMemory, MemoryOf(w).Share)
	}
	onlySeparator(t, w)

	c = valid()
	c.MaxMemory = 64 * config.GiB
	if m := MemoryOf(c); m.FetchMaxBytes != 50<<20 || m.FetchMaxPartitionBytes != 1<<20 {
		t.Fatalf("max_memory 64GiB: fetch %d, partition %d; want franz-go's defaults as the ceiling", m.FetchMaxBytes, m.FetchMaxPartitionBytes)
	}
	c.MaxMemory = config.MinMaxMemory
	if m := MemoryOf(c); m.ProducerBufferedBytes <= maxMessageBytes {
		t.Fatalf("max_memory %s: producer buffer %d cannot hold a %d-byte record", c.MaxMemory, m.ProducerBufferedBytes, maxMessageBytes)
	}
}

func TestLevel(t *testing.T) {
	for name, want := range map[string]zapcore.Level{
		"debug":   zapcore.DebugLevel,
		"info":    zapcore.InfoLevel,
		"warn":    zapcore.WarnLevel,
		"error":   zapcore.ErrorLevel,
		"":        zapcore.InfoLevel, // unvalidated: the default
		"verbose": zapcore.InfoLevel,
	} {
		c := valid()
		c.LogLevel = name
		if got := Level(c); got != want {
			t.Errorf("LogLevel %q: Level = %v, want %v", name, got, want)
		}
	}
	// Every level Validate accepts maps to the zap level of that name.
	for _, name := range []string{"debug", "info", "warn", "error"} {
		c := valid()
		c.LogLevel = name
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := Level(c).String(); got != name {
			t.Errorf("LogLevel %q: Level = %v", name, got)
		}
	}
	if got := Level(config.Default()); got != zapcore.InfoLevel {
		t.Errorf("default Level = %v, want info", got)
	}
}
