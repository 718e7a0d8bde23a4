package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A group that consumed a transactionally written topic commits the offset
// after its last record, and the commit marker stays behind it as lag:
// repartitionLeft must call that consumed, and count only records.
func TestRepartitionLeftSeesPastMarkers(t *testing.T) {
	env := kafkatest.Fake(t)
	topic, group := env.Name("rep"), env.Name("app")
	env.CreateTopics(t, 1, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := []kgo.Opt{kgo.SeedBrokers(env.Brokers...)}
	adm := env.Admin(t)

	txn := env.Client(t, kgo.TransactionalID(env.Name("txn")), kgo.DefaultProduceTopic(topic))
	write := func(n int, commit bool) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := txn.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	commitAt := func(at int64) {
		t.Helper()
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		if _, err := adm.CommitOffsets(ctx, group, offs); err != nil {
			t.Fatal(err)
		}
	}
	check := func(wantLeft int, wantWhy string) {
		t.Helper()
		left, why := repartitionLeft(ctx, adm, base, group, topic)
		if left != wantLeft || (wantWhy == "") != (why == "") || !strings.Contains(why, wantWhy) {
			t.Fatalf("repartitionLeft = %d, %q; want %d, %q", left, why, wantLeft, wantWhy)
		}
	}

	write(10, true) // records at 0..9, the commit marker at 10
	check(10, "")   // no commit yet: everything is left
	commitAt(4)
	check(6, "")
	commitAt(10) // past the last record, before the marker
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ends.Lookup(topic, 0); e.Offset != 11 {
		t.Fatalf("end offset %d, want 11: the commit marker is the lag this test is about", e.Offset)
	}
	check(0, "")

	write(3, false) // an open transaction: its records may yet commit
	check(0, "open transaction")
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	check(0, "") // aborted records and their marker are not left to consume
	write(2, true)
	check(2, "")
}
