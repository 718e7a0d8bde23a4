package kafkautil

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPipelineOptionsGroupProtocol(t *testing.T) {
	for _, tt := range []struct {
		protocol config.GroupProtocol
		want     bool
	}{{"", false}, {config.GroupProtocolClassic, false}, {config.GroupProtocolConsumer, true}} {
		cfg := testConfig(config.ExactlyOnce)
		cfg.GroupProtocol = tt.protocol
		opts, err := PipelineOptions(cfg, []string{"in"})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := cl.OptValue(kgo.ServerSideBalancer); got != tt.want {
			t.Errorf("group_protocol %q: ServerSideBalancer %v, want %v", tt.protocol, got, tt.want)
		}
		cl.Close()
	}
}

// DescribeGroup finds a static member and its partitions whichever
// protocol its group runs.
func TestDescribeGroupEitherProtocol(t *testing.T) {
	for _, protocol := range []config.GroupProtocol{config.GroupProtocolClassic, config.GroupProtocolConsumer} {
		t.Run(string(protocol), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "in"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"),
				kgo.InstanceID("i-0"), kgo.FetchMaxWait(100 * time.Millisecond)}
			if protocol == config.GroupProtocolConsumer {
				opts = append(opts, kgo.ServerSideBalancer())
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			go func() {
				for ctx.Err() == nil {
					cl.PollFetches(ctx)
				}
			}()
			missing, err := DescribeGroup(ctx, cl, "nobody")
			if err != nil || len(missing.Members) != 0 || missing.State != "Dead" {
				t.Fatalf("a group that does not exist: %+v, %v; want Dead with no members", missing, err)
			}
			for {
				g, err := DescribeGroup(ctx, cl, "g")
				if err != nil {
					t.Fatal(err)
				}
				if m, ok := g.Member("i-0"); ok && len(m.Assigned["in"]) == 3 {
					if g.Protocol != protocol {
						t.Fatalf("protocol %q, want %q", g.Protocol, protocol)
					}
					ps := slices.Sorted(slices.Values(m.Assigned["in"]))
					if !slices.Equal(ps, []int32{0, 1, 2}) || m.MemberID == "" {
						t.Fatalf("member %+v; want a member id and in 0, 1, 2", m)
					}
					return
				}
				if ctx.Err() != nil {
					t.Fatalf("no member i-0 with all three partitions: %+v", g)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

func TestAwaitTopicsOnEveryBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(2, "there"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := AwaitTopicsOnEveryBroker(ctx, cl, "there"); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := AwaitTopicsOnEveryBroker(short, cl, "there", "nowhere"); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("a topic no broker has: %v; want an error naming it", err)
	}
}
