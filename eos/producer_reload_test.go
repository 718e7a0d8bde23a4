package eos_test

import (
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A produce answered UNKNOWN_PRODUCER_ID with a log start offset past the
// partition's last acknowledged record (what a broker says after the
// partition's head was deleted) makes franz-go load a new producer epoch
// in the middle of the transaction and retry the batch under it. Loading
// the epoch aborts what the transaction had written so far, on other
// partitions too, yet the session then commits the rest with the input
// offsets: unless the runtime sees that the batch's records were written
// under two epochs and aborts it, those records are lost.
func TestProducerEpochReloadMidBatchAbortsIt(t *testing.T) {
	env := kafkatest.Fake(t, kfake.NumBrokers(3))
	env.CreateTopics(t, 1, "in")
	env.CreateTopics(t, 2, "out")
	mirror := topology.OffsetsTopic("app")
	env.CreateTopicsWith(t, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, mirror)
	const n = 3000
	conformance.Seed(t, env, "in", n)
	// Each output partition on a broker of its own, and the offsets
	// mirror on the third, so that each gets produce requests of its own.
	for i, tp := range []struct {
		topic string
		p     int32
	}{{"out", 0}, {"out", 1}, {mirror, 0}} {
		if err := env.Fake.MoveTopicPartition(tp.topic, tp.p, int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	outID := env.Fake.TopicInfo("out").TopicID

	var (
		mu      sync.Mutex
		acked0  bool               // out/0 has an acknowledged record of this app
		epochs1 = map[int16]bool{} // epochs under which out/1 got records
		fired   int                // faults answered
	)
	env.Fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		env.Fake.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 ||
			req.Topics[0].Topic != "out" && req.Topics[0].TopicID != outID {
			return nil, nil, false
		}
		p := req.Topics[0].Partitions[0]
		epoch := producerEpoch(p.Records)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.Partition == 1:
			epochs1[epoch] = true
			return nil, nil, false
		case !acked0:
			acked0 = true
			return nil, nil, false
		case fired > 0 || !epochs1[epoch]:
			return nil, nil, false
		}
		// out/1 already holds records of this transaction: fault out/0.
		fired++
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition = 0
		rp.ErrorCode = kerr.UnknownProducerID.Code
		rp.LogStartOffset = 1 << 40
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})

	cfg := env.Config("app", "1", config.ExactlyOnce)
	cfg.MaxBatchRecords = 100
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	x.WaitCommitted(t, n, 60*time.Second)
	mu.Lock()
	f := fired
	mu.Unlock()
	if f == 0 {
		t.Fatalf("the fault never fired: no batch wrote out/1 before out/0")
	}
	v := conformance.ExactlyOnce(t, env, "out", n)
	t.Logf("fault fired %d time(s); %v", f, v)
	if s := x.R.Stats(); s.Aborted == 0 {
		t.Errorf("stats %+v: the batch written under two epochs was not aborted", s)
	}
}

// producerEpoch reads the producer epoch of a record batch (v2 layout:
// offset 8 + length 4 + leader epoch 4 + magic 1 + crc 4 + attributes 2 +
// last offset delta 4 + first timestamp 8 + max timestamp 8 + producer id 8).
func producerEpoch(b []byte) int16 {
	const at = 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8
	if len(b) < at+2 {
		return -1
	}
	return int16(b[at])<<8 | int16(b[at+1])
}
