package eos

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"
)

// The mirror is read backwards from its end in growing windows: an input
// topic whose last commit lies far behind another's, in the same mirror
// partition, is still found, and the latest record of each wins. A
// mirror partition that does not exist (an input grew) holds nothing.
func TestReadMirrorFindsEachTopicsLatest(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	top := topology.New()
	topology.To(topology.Source(top, "a", codec.Bytes()), "out", codec.Bytes())
	r, err := New(cfg, top, Logger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	r.admin = newPlainClient(t, c)
	mirror := topology.OffsetsTopic("app")
	if _, err := kadm.NewClient(r.admin).CreateTopic(context.Background(), 1, 1, nil, mirror); err != nil {
		t.Fatal(err)
	}
	r.mirror = &offsetsMirror{topic: mirror, partitions: 1, ids: map[string]kadm.TopicID{}}
	w, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rec := func(topic string, at int64) *kgo.Record {
		return &kgo.Record{Topic: mirror, Key: []byte(topic), Value: encodeMirror(kadm.TopicID{}, kgo.EpochOffset{Offset: at, Epoch: -1})}
	}
	recs := []*kgo.Record{rec("b", 6), rec("b", 7)}
	for i := range int64(3000) {
		recs = append(recs, rec("a", i))
	}
	if err := w.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fetched := map[string]map[int32]kgo.Offset{"a": {0: kgo.NewOffset(), 1: kgo.NewOffset()}, "b": {0: kgo.NewOffset()}}
	got, err := r.resume.readMirror(ctx, fetched)
	if err != nil {
		t.Fatal(err)
	}
	if got["a"][0].Offset != 2999 || got["b"][0].Offset != 7 || len(got["a"]) != 1 {
		t.Fatalf("read %v, want a/0 at 2999 and b/0 at 7, and nothing for a/1", got)
	}
}
