package eos_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A batch ends once its records' bytes reach max_memory's batch share, so
// large records do not make batches of max_batch_records; with room for
// them, the same backlog goes in larger batches.
func TestBatchEndsOnItsByteCap(t *testing.T) {
	const (
		n   = 600
		pad = 20 << 10 // value bytes
	)
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 1, "in", "out", "out-roomy")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := verdict.Seed(ctx, env.Client(t), "in", n, 97, pad); err != nil {
				t.Fatal(err)
			}
			run := func(app, out string, maxMemory config.ByteSize) (batches []int, capBytes int64) {
				cfg := env.Config(app, "a", g)
				cfg.MaxMemory = maxMemory
				cfg.CommitInterval, cfg.TransactionTimeout = 2*time.Second, 30*time.Second
				var mu sync.Mutex
				x := conformance.Start(t, cfg, conformance.Upper("in", out, nil), eos.BeforeCommit(func(_ context.Context, b eos.BatchInfo) error {
					mu.Lock()
					defer mu.Unlock()
					batches = append(batches, b.Records)
					return nil
				}))
				x.WaitCommitted(t, n, time.Minute)
				x.Stop()
				if err := x.Wait(t, 30*time.Second); err != nil {
					t.Fatal(err)
				}
				if g == config.ExactlyOnce {
					conformance.ExactlyOnce(t, env, out, n)
				}
				mu.Lock()
				defer mu.Unlock()
				return batches, runcfg.MemoryOf(cfg).BatchBytes
			}

			batches, capBytes := run("capped", "out", config.MinMaxMemory)
			t.Logf("max_memory %s, batch cap %d bytes: batches of %v records", config.MinMaxMemory, capBytes, batches)
			// The record that reaches the cap is the batch's last; keys
			// are at least 2 bytes ("k0").
			most := int((capBytes + pad + 2 - 1) / (pad + 2))
			full := 0
			for _, b := range batches {
				if b > most {
					t.Fatalf("a batch of %d records of %d bytes, past the %d-byte cap (at most %d records); batches %v", b, pad, capBytes, most, batches)
				}
				if b >= most-1 {
					full++
				}
			}
			if full < n/most-1 {
				t.Fatalf("%d batches ended on the byte cap (%d records), want at least %d: batches %v", full, most, n/most-1, batches)
			}

			roomy, _ := run("roomy", "out-roomy", config.GiB)
			biggest := 0
			for _, b := range roomy {
				biggest = max(biggest, b)
			}
			if biggest <= most {
				t.Fatalf("with max_memory 1GiB the largest batch held %d records, no more than the capped %d: the cap is not what ends batches (batches %v)", biggest, most, roomy)
			}
		})
	}
}

// envMemoryChild carries a memoryChild spec to the child process of
// TestMemoryStaysWithinMaxMemory.
const envMemoryChild = "EOS_TEST_MEMORY_CHILD"

// memoryChild is what the child process runs: an exactly-once pipeline
// over a backlog of n records under max_memory.
type memoryChild struct {
	Brokers   []string `json:"brokers"`
	In, Out   string
	App       string
	MaxMemory string `json:"max_memory"`
	N         int    `json:"n"`
}

// memoryPeak is what the child measured while it worked through the
// backlog: the most memory the Go runtime held (what its soft limit
// counts: mapped, less released to the OS), the largest heap, and the
// peak resident set.
type memoryPeak struct {
	GoBytes   int64 `json:"go_bytes"`
	HeapBytes int64 `json:"heap_bytes"`
	RSSBytes  int64 `json:"rss_bytes"`
	GoLimit   int64 `json:"go_limit"`
	Records   uint64
	Took      time.Duration
}

// The Go runtime's memory stays within max_memory while a pipeline works
// through a backlog of large, incompressible records spread over many
// partitions; with max_memory large, the same measurement exceeds that
// bound, so the test can fail. The pipeline runs in a child process so
// that the embedded broker, which holds the backlog, is not measured.
func TestMemoryStaysWithinMaxMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a 128 MiB backlog twice")
	}
	const (
		n     = 2000
		size  = 64 << 10
		bound = 64 * config.MiB
	)
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 32, "in", "out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 2))
	began := time.Now()
	seeder := env.Client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedBytes(32<<20))
	err := kafkautil.ProduceAll(ctx, seeder, n, func(i int) *kgo.Record {
		v := verdict.Value(i, size)
		for j := len(verdict.Value(i, 0)); j < size; j += 12 { // random letters: nothing to compress
			for r, k := rng.Uint64(), j; k < min(j+12, size); r, k = r>>5, k+1 {
				v[k] = 'a' + byte(r&31)%26
			}
		}
		return &kgo.Record{Topic: "in", Key: verdict.Key(i, 997), Value: v}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d records of %d bytes in %s", n, size, time.Since(began).Round(time.Millisecond))

	got := runMemoryChild(t, memoryChild{Brokers: env.Brokers, In: "in", Out: "out", App: "bounded", MaxMemory: bound.String(), N: n})
	t.Logf("max_memory %s: Go memory peak %.1f MiB (soft limit %.1f MiB), heap peak %.1f MiB, RSS peak %.1f MiB, %d records in %s",
		bound, mib(got.GoBytes), mib(got.GoLimit), mib(got.HeapBytes), mib(got.RSSBytes), got.Records, got.Took.Round(time.Millisecond))
	if got.GoBytes > int64(bound) {
		t.Fatalf("the Go runtime held %.1f MiB, more than max_memory %s", mib(got.GoBytes), bound)
	}

	roomy := runMemoryChild(t, memoryChild{Brokers: env.Brokers, In: "in", Out: "out", App: "roomy", MaxMemory: "8GiB", N: n})
	t.Logf("max_memory 8GiB: Go memory peak %.1f MiB, heap peak %.1f MiB, RSS peak %.1f MiB",
		mib(roomy.GoBytes), mib(roomy.HeapBytes), mib(roomy.RSSBytes))
	if roomy.GoBytes <= int64(bound) {
		t.Fatalf("with max_memory 8GiB the Go runtime held only %.1f MiB, within %s: the backlog does not test the bound", mib(roomy.GoBytes), bound)
	}
}

func mib(b int64) float64 { return float64(b) / float64(config.MiB) }

// runMemoryChild runs spec in a child process of this test binary and
// returns what it measured.
func runMemoryChild(t *testing.T, spec memoryChild) memoryPeak {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envMemoryChild+"="+string(js), "GOMEMLIMIT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "MEMORY "); ok {
			var p memoryPeak
			if err := json.Unmarshal([]byte(rest), &p); err != nil {
				t.Fatalf("child result %q: %v", rest, err)
			}
			return p
		}
	}
	t.Fatalf("the child printed no result:\n%s", out)
	return memoryPeak{}
}

// TestMemoryChild is the child process of TestMemoryStaysWithinMaxMemory;
// it does nothing when run directly.
func TestMemoryChild(t *testing.T) {
	js := os.Getenv(envMemoryChild)
	if js == "" {
		t.Skip("the child process of TestMemoryStaysWithinMaxMemory")
	}
	var spec memoryChild
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = spec.Brokers, spec.App, "a"
	cfg.SessionTimeout, cfg.RebalanceTimeout = 6*time.Second, 10*time.Second
	if err := cfg.MaxMemory.UnmarshalText([]byte(spec.MaxMemory)); err != nil {
		t.Fatal(err)
	}
	r, err := eos.New(cfg, conformance.Upper(spec.In, spec.Out, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var peak memoryPeak
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak.GoBytes = max(peak.GoBytes, int64(s[0].Value.Uint64()-s[1].Value.Uint64()))
			peak.HeapBytes = max(peak.HeapBytes, int64(s[2].Value.Uint64()))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	for r.Stats().RecordsIn < uint64(spec.N) {
		select {
		case err := <-errc:
			t.Fatalf("Run: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("%d of %d records after 2m", r.Stats().RecordsIn, spec.N)
		}
	}
	peak.Took, peak.Records = time.Since(start), r.Stats().RecordsIn
	peak.GoLimit = debug.SetMemoryLimit(-1)
	close(stop)
	<-sampled
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	peak.RSSBytes = peakRSS()
	b, _ := json.Marshal(peak)
	fmt.Println("MEMORY " + string(b))
}

// peakRSS is this process's peak resident set (VmHWM), or 0 where /proc
// does not say.
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// An output larger than the producer buffer max_memory gives fails under
// its sink's policy with an error naming max_memory, although the topic
// would take it; also when the producer reports the refusal late (its
// promise runs on a goroutine of its own, after Flush has returned), so
// the batch cannot commit without the output.
func TestOutputLargerThanProducerBufferNamesMaxMemory(t *testing.T) {
	for _, tc := range []struct {
		g    config.Guarantee
		late time.Duration
	}{{config.ExactlyOnce, 0}, {config.ExactlyOnce, 300 * time.Millisecond}, {config.AtLeastOnce, 300 * time.Millisecond}} {
		late := tc.late
		t.Run(string(tc.g)+"/late-"+late.String(), func(t *testing.T) {
			env := kafkatest.Fake(t)
			limit := "8388608"
			env.CreateTopicsWith(t, 1, map[string]*string{"max.message.bytes": &limit}, "in", "out")
			conformance.Seed(t, env, "in", 1)
			cfg := env.Config("app", "a", tc.g)
			cfg.MaxMemory = config.MinMaxMemory // a 2 MiB producer buffer
			top := topology.New()
			src := topology.Source(top, "in", codec.Bytes())
			big := topology.MapValues(src, "grow", func(_ context.Context, v []byte) ([]byte, error) {
				return append(v, make([]byte, 3<<20)...), nil
			})
			topology.To(big, "out", codec.Bytes())
			hook := &lateFailures{delay: late}
			x := conformance.Start(t, cfg, top, eos.ClientOpts(kgo.WithHooks(hook)))
			err := x.Wait(t, time.Minute)
			if !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), "max_memory") || !strings.Contains(err.Error(), strconv.Itoa(runcfg.MemoryOf(cfg).ProducerBufferedBytes)) {
				t.Fatalf("Run = %v; want MESSAGE_TOO_LARGE naming max_memory and the %d-byte buffer", err, runcfg.MemoryOf(cfg).ProducerBufferedBytes)
			}
			if late > 0 && hook.delayed.Load() == 0 {
				t.Fatal("no refusal was delayed")
			}
			if got := x.R.Stats(); got.RecordsIn != 0 || got.RecordsOut != 0 {
				t.Fatalf("stats %+v: the record committed without its output", got)
			}
			t.Log(err)
		})
	}
}

// lateFailures delays the promise of every record the producer refuses
// by delay, as a busy machine may.
type lateFailures struct {
	delay   time.Duration
	delayed atomic.Int64
}

func (h *lateFailures) OnProduceRecordUnbuffered(_ *kgo.Record, err error) {
	if err != nil && h.delay > 0 {
		h.delayed.Add(1)
		time.Sleep(h.delay)
	}
}
