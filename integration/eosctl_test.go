package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	buildOnce sync.Once
	eosctlBin string
	buildErr  error
)

// eosctl runs the eosctl binary against env and returns stdout and the
// exit code.
func eosctl(t *testing.T, env *kafkatest.Env, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(eosctlBinary(t), append([]string{"--brokers", strings.Join(env.Brokers, ",")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Logf("eosctl %s: stderr: %s", strings.Join(args, " "), stderr.String())
	}
	return string(out), code
}

// eosctlBinary builds eosctl once per test binary and returns its path.
func eosctlBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "eosctl-it")
		if err != nil {
			buildErr = err
			return
		}
		eosctlBin = filepath.Join(dir, "eosctl")
		out, err := exec.Command("go", "build", "-o", eosctlBin, "github.com/eosflow/eosflow/cmd/eosctl").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building eosctl: %v", buildErr)
	}
	return eosctlBin
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

// An open transaction on real Kafka shows in txn list, describe and
// producers and holds the LSO back in group lag; txn abort releases it.
func TestEosctlOnOpenTransaction(t *testing.T) {
	env := realEnv(t)
	// Built before the transaction opens: a build on a loaded machine
	// can outlast the transaction's timeout, which then aborts it.
	eosctlBinary(t)
	topic, group, txnID := env.Name("orders"), env.Name("group"), env.Name("txn")
	env.CreateTopics(t, 1, topic)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	plain := env.Client(t)
	for i := 0; i < 3; i++ {
		if err := plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("committed")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(plain)
	if _, err := adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 1})); err != nil {
		t.Fatal(err)
	}
	txn := env.Client(t, kgo.TransactionalID(txnID), kgo.TransactionTimeout(time.Minute))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	out, code := eosctl(t, env, "txn", "list", "-o", "json")
	list := decode[[]map[string]any](t, out)
	var found map[string]any
	for _, x := range list {
		if x["transactional_id"] == txnID {
			found = x
		}
	}
	if code != 0 || found == nil || found["state"] != "Ongoing" {
		t.Fatalf("txn list (exit %d) does not show %s as Ongoing:\n%s", code, txnID, out)
	}

	out, code = eosctl(t, env, "txn", "describe", txnID, "-o", "json")
	if code != 0 || !strings.Contains(out, topic) || !strings.Contains(out, "Ongoing") {
		t.Fatalf("txn describe (exit %d) lacks the partition or state:\n%s", code, out)
	}

	out, code = eosctl(t, env, "txn", "producers", "--topic", topic, "-o", "json")
	if code != 0 || !strings.Contains(out, `"current_txn_start_offset": 3`) {
		t.Fatalf("txn producers (exit %d) does not show the open transaction at offset 3:\n%s", code, out)
	}

	out, code = eosctl(t, env, "group", "lag", group, "-o", "json")
	lag := decode[struct {
		Partitions []struct {
			Committed, HighWatermark, LastStableOffset int64
			LagHWM                                     int64 `json:"lag_hwm"`
			LagLSO                                     int64 `json:"lag_lso"`
			Open                                       bool  `json:"open_transaction"`
		} `json:"partitions"`
	}](t, out)
	if code != 0 || len(lag.Partitions) != 1 {
		t.Fatalf("group lag (exit %d):\n%s", code, out)
	}
	// Committed 2 (after record 1); records 2 and the open one: the LSO
	// stops at the open record, the HWM counts it.
	if p := lag.Partitions[0]; p.LagLSO != 1 || p.LagHWM != 2 || !p.Open {
		t.Fatalf("want LSO lag 1, HWM lag 2 and the open transaction flagged, got %+v\n%s", p, out)
	}

	out, code = eosctl(t, env, "doctor", "-o", "json")
	doc := decode[struct {
		OK       bool `json:"ok"`
		Findings []struct{ Check, Status string }
	}](t, out)
	if code != 0 || !doc.OK || len(doc.Findings) < 4 {
		t.Fatalf("doctor (exit %d) should find this broker ready:\n%s", code, out)
	}
	for _, f := range doc.Findings {
		if f.Check == "api: KIP-447" && f.Status != "ok" {
			t.Fatalf("KIP-447 check on Kafka 4: %s", f.Status)
		}
	}

	// The open transaction has no outcome yet: abort refuses it without
	// --force, and commit refuses it outright.
	at := []string{"--topic", topic, "--partition", "0", "--start-offset", "3", "--yes", "-o", "json"}
	if out, code = eosctl(t, env, append([]string{"txn", "abort"}, at...)...); code == 0 {
		t.Fatalf("txn abort without --force of a transaction whose outcome nothing proves succeeded:\n%s", out)
	}
	if out, code = eosctl(t, env, append([]string{"txn", "commit"}, at...)...); code == 0 {
		t.Fatalf("txn commit of a transaction whose outcome nothing proves succeeded:\n%s", out)
	}
	out, code = eosctl(t, env, append([]string{"txn", "abort", "--force"}, at...)...)
	if code != 0 {
		t.Fatalf("txn abort --force (exit %d):\n%s", code, out)
	}
	conformance.Until(t, 30*time.Second, "the LSO to pass the aborted transaction", func() bool {
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return false
		}
		o, _ := lso.Lookup(topic, 0)
		return o.Offset >= 5 // 3 records, the open one, its abort marker
	})
}
