package kafkautil

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func connect(t *testing.T) *Conn {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := config.Default()
	cfg.Brokers = c.ListenAddrs()
	conn, err := Connect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func TestCreateTopicsExistingIsSuccess(t *testing.T) {
	conn := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	retention := "60000"
	cfgs := map[string]*string{"retention.ms": &retention}
	if err := CreateTopics(ctx, conn.Admin, 3, -1, cfgs, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := CreateTopics(ctx, conn.Admin, 3, -1, nil, "a", "c"); err != nil {
		t.Fatalf("creating an existing topic again: %v", err)
	}
	details, err := conn.Admin.ListTopics(ctx, "a", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if d := details[n]; d.Err != nil || len(d.Partitions) != 3 {
			t.Errorf("topic %s: %d partitions, error %v", n, len(d.Partitions), d.Err)
		}
	}
}

func TestCreateTopicsReportsRefusal(t *testing.T) {
	conn := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := CreateTopics(ctx, conn.Admin, 1, 5, nil, "x")
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("want INVALID_REPLICATION_FACTOR, got %v", err)
	}
}

func TestProduceAll(t *testing.T) {
	conn := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := CreateTopics(ctx, conn.Admin, 2, -1, nil, "seeded"); err != nil {
		t.Fatal(err)
	}
	if err := ProduceAll(ctx, conn.Client, 50, func(i int) *kgo.Record {
		return &kgo.Record{Topic: "seeded", Value: []byte{byte(i)}}
	}); err != nil {
		t.Fatal(err)
	}
	ends, err := conn.Admin.ListEndOffsets(ctx, "seeded")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	if n != 50 {
		t.Fatalf("%d records on the topic, want 50", n)
	}
	err = ProduceAll(ctx, conn.Client, 1, func(int) *kgo.Record { return &kgo.Record{Topic: "no-such-topic-" + t.Name()} })
	if err == nil {
		t.Fatal("producing to a missing topic succeeded")
	}
}
