package kafkautil

import (
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kgo"
)

func testConfig(g config.Guarantee) config.Config {
	cfg := config.Default()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.AppID, cfg.InstanceID, cfg.Guarantee = "app", "i0", g
	return cfg
}

// pipelineClient builds a client from PipelineOptions without contacting
// any broker, so that its options can be read back.
func pipelineClient(t *testing.T, g config.Guarantee, user ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts, err := PipelineOptions(testConfig(g), []string{"in"}, user...)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// The user's options come first, so they cannot switch off what the
// guarantee depends on, while the options the runtime leaves alone hold.
func TestPipelineOptionsUserCannotOverrideEssentials(t *testing.T) {
	user := []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.TransactionalID("someone-else"),
		kgo.SeedBrokers("elsewhere:9092"),
		kgo.FetchMaxWait(123 * time.Millisecond),
	}
	cl := pipelineClient(t, config.ExactlyOnce, user...)
	if got := cl.OptValue(kgo.FetchIsolationLevel); got != int8(1) { // read_committed
		t.Errorf("isolation level %v, want read_committed", got)
	}
	if got := cl.OptValue(kgo.TransactionalID); got != "app:i0" {
		t.Errorf("transactional id %v, want app:i0", got)
	}
	if got := cl.OptValue(kgo.SeedBrokers); len(got.([]string)) != 1 || got.([]string)[0] != "127.0.0.1:1" {
		t.Errorf("seed brokers %v, want the configured one", got)
	}
	if got := cl.OptValue(kgo.FetchMaxWait); got != 123*time.Millisecond {
		t.Errorf("fetch max wait %v, want the user's 123ms", got)
	}
	if got := cl.OptValue(kgo.InstanceID); got == nil {
		t.Errorf("no instance id")
	}
}

func TestPipelineOptionsPerGuarantee(t *testing.T) {
	for _, tc := range []struct {
		g          config.Guarantee
		txn        bool
		idempotent bool
		acks       kgo.Acks
	}{
		{config.ExactlyOnce, true, true, kgo.AllISRAcks()},
		{config.Idempotent, false, true, kgo.AllISRAcks()},
		{config.AtLeastOnce, false, false, kgo.AllISRAcks()},
		{config.AtMostOnce, false, false, kgo.NoAck()},
	} {
		t.Run(string(tc.g), func(t *testing.T) {
			cl := pipelineClient(t, tc.g)
			if got := cl.OptValue(kgo.TransactionalID) != ""; got != tc.txn {
				t.Errorf("transactional: %v, want %v", got, tc.txn)
			}
			if got := !cl.OptValue(kgo.DisableIdempotentWrite).(bool); got != tc.idempotent {
				t.Errorf("idempotent: %v, want %v", got, tc.idempotent)
			}
			if got := cl.OptValue(kgo.RequiredAcks); got != tc.acks {
				t.Errorf("acks %v, want %v", got, tc.acks)
			}
		})
	}
}

func TestPipelineOptionsNeedBrokers(t *testing.T) {
	cfg := testConfig(config.ExactlyOnce)
	cfg.Brokers = nil
	if _, err := PipelineOptions(cfg, []string{"in"}); err == nil {
		t.Fatal("no error without brokers")
	}
}

// A pipeline client's fetch and produce buffers are the sizes max_memory
// gives, for every guarantee, and a user's option can still change them.
func TestPipelineOptionsSizeBuffersFromMaxMemory(t *testing.T) {
	for _, g := range config.Guarantees() {
		for _, mm := range []config.ByteSize{0, 48 * config.MiB, 2 * config.GiB} {
			cfg := testConfig(g)
			cfg.MaxMemory = mm
			m := runcfg.MemoryOf(cfg)
			opts, err := PipelineOptions(cfg, []string{"in"})
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []struct {
				name      string
				got, want any
			}{
				{"FetchMaxBytes", cl.OptValue(kgo.FetchMaxBytes), m.FetchMaxBytes},
				{"FetchMaxPartitionBytes", cl.OptValue(kgo.FetchMaxPartitionBytes), m.FetchMaxPartitionBytes},
				{"MaxBufferedBytes", cl.OptValue(kgo.MaxBufferedBytes), int64(m.ProducerBufferedBytes)},
			} {
				if o.got != o.want {
					t.Errorf("%s, max_memory %s: %s %v (%T), want %v (%T)", g, mm, o.name, o.got, o.got, o.want, o.want)
				}
			}
			cl.Close()
		}
	}
	cl := pipelineClient(t, config.ExactlyOnce, kgo.FetchMaxBytes(7<<20))
	if got := cl.OptValue(kgo.FetchMaxBytes); got != int32(7<<20) {
		t.Errorf("FetchMaxBytes %v, want the user's 7 MiB", got)
	}
}

// A pipeline's fetches wait at most FetchMaxWait for records, not
// franz-go's 5s, which a restarted pipeline's first fetch could wait out
// with input there; a user's own value wins.
func TestPipelineFetchesWaitHalfASecond(t *testing.T) {
	for _, g := range config.Guarantees() {
		if got := pipelineClient(t, g).OptValue(kgo.FetchMaxWait); got != FetchMaxWait || FetchMaxWait != 500*time.Millisecond {
			t.Errorf("%s: fetch max wait %v, want 500ms", g, got)
		}
	}
	if got := pipelineClient(t, config.ExactlyOnce, kgo.FetchMaxWait(2*time.Second)).OptValue(kgo.FetchMaxWait); got != 2*time.Second {
		t.Errorf("a user's fetch max wait of 2s became %v", got)
	}
}
