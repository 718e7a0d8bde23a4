package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/eosflow/eosflow/topology"
)

// devConfigs are the broker settings a single-broker cluster needs for
// transactions, as a real Kafka's server.properties would have them.
var devConfigs = map[string]string{
	"transaction.state.log.replication.factor": "1",
	"transaction.state.log.min.isr":            "1",
}

// doctor runs `eosctl doctor` with JSON output and returns the findings.
func doctor(t *testing.T, addr string, wantCode int, args ...string) doctorJSON {
	t.Helper()
	out, errOut, code := runCLI(t, nil, append([]string{"--brokers", addr, "-o", "json", "doctor"}, args...)...)
	if code != wantCode {
		t.Fatalf("exit %d, want %d; stderr %s\n%s", code, wantCode, errOut, out)
	}
	var got doctorJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return got
}

// findingWith returns the first finding of status whose detail has substr.
func findingWith(res doctorJSON, status, substr string) (finding, bool) {
	for _, f := range res.Findings {
		if f.Status == status && strings.Contains(f.Detail, substr) {
			return f, true
		}
	}
	return finding{}, false
}

// writeConfig writes a pipeline config YAML and returns its path.
func writeConfig(t *testing.T, addr, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	body := fmt.Sprintf("brokers: [%q]\napp_id: orders\ninstance_id: worker-0\n%s", addr, extra)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDoctorHealthyCluster(t *testing.T) {
	_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs))
	res := doctor(t, addr, exitOK, "--config", writeConfig(t, addr, ""))
	if !res.OK {
		t.Errorf("not ok: %+v", res.Findings)
	}
	for _, want := range []string{"TxnOffsetCommit v", "transaction.version=2", "replication.factor=1", "transaction_timeout 10s"} {
		if _, ok := findingWith(res, statusOK, want); !ok {
			if _, ok := findingWith(res, statusWarn, want); !ok {
				t.Errorf("no finding about %q: %+v", want, res.Findings)
			}
		}
	}
	out, _, code := runCLI(t, nil, "--brokers", addr, "doctor")
	if code != exitOK || !strings.HasPrefix(out, "STATUS") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

func TestDoctorFailsWhenTransactionLogCannotExist(t *testing.T) {
	_, addr := newCluster(t, kfake.BrokerConfigs(map[string]string{"transaction.state.log.replication.factor": "3"}))
	res := doctor(t, addr, exitFailure)
	f, ok := findingWith(res, statusFail, "replication.factor=3 but the cluster has 1 broker")
	if !ok || !strings.Contains(f.Fix, "transaction.state.log.replication.factor=1") {
		t.Errorf("want a failed transaction log check with a fix: %+v", res.Findings)
	}
	if res.OK {
		t.Error("ok is true despite a failure")
	}
}

func TestDoctorFailsOnTimeoutsTheBrokerRefuses(t *testing.T) {
	cfgs := map[string]string{"transaction.max.timeout.ms": "5000", "group.max.session.timeout.ms": "30000"}
	for k, v := range devConfigs {
		cfgs[k] = v
	}
	_, addr := newCluster(t, kfake.BrokerConfigs(cfgs))
	res := doctor(t, addr, exitFailure, "--config", writeConfig(t, addr, "transaction_timeout: 10s\n"))
	if f, ok := findingWith(res, statusFail, "INVALID_TRANSACTION_TIMEOUT"); !ok || !strings.Contains(f.Fix, "at most 5s") {
		t.Errorf("want transaction timeout failure: %+v", res.Findings)
	}
	if _, ok := findingWith(res, statusFail, "session_timeout 45s is above"); !ok {
		t.Errorf("want session timeout failure: %+v", res.Findings)
	}
}

func TestDoctorFailsOnInvalidPipelineConfig(t *testing.T) {
	_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs))
	res := doctor(t, addr, exitFailure, "--config", writeConfig(t, addr, "commit_interval: 20s\ntransaction_timeout: 10s\n"))
	if _, ok := findingWith(res, statusFail, "is not above commit_interval 20s"); !ok {
		t.Errorf("want commit interval failure: %+v", res.Findings)
	}
}

func TestDoctorFailsOnOldBrokers(t *testing.T) {
	_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs), kfake.MaxVersions(kversion.V2_4_0()))
	res := doctor(t, addr, exitFailure)
	if _, ok := findingWith(res, statusFail, "TxnOffsetCommit v2 < 3"); !ok {
		t.Errorf("want KIP-447 failure: %+v", res.Findings)
	}
	if _, ok := findingWith(res, statusWarn, "predate KIP-890"); !ok {
		t.Errorf("want KIP-890 warning: %+v", res.Findings)
	}
	if _, ok := findingWith(res, statusWarn, "DescribeProducers"); !ok {
		t.Errorf("want KIP-664 warning: %+v", res.Findings)
	}
}

func TestDoctorChecksACLs(t *testing.T) {
	allow := func(rt kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: name, Pattern: pat, Operation: op, Allow: true}
	}
	base := []kfake.ACL{
		allow(kmsg.ACLResourceTypeGroup, "orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, "*", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationWrite),
	}
	mirror := topology.OffsetsTopic("orders")
	full := append([]kfake.ACL{
		allow(kmsg.ACLResourceTypeTransactionalId, "orders:", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationIdempotentWrite),
		allow(kmsg.ACLResourceTypeTopic, mirror, kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationCreate),
		allow(kmsg.ACLResourceTypeTopic, mirror, kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead),
	}, base...)
	denied := append([]kfake.ACL{{Resource: kmsg.ACLResourceTypeTopic, Name: "invoices", Pattern: kmsg.ACLResourcePatternTypeLiteral,
		Operation: kmsg.ACLOperationWrite}}, full...)
	// Granted for transactional ids of the old app_id-instance_id form.
	legacy := append([]kfake.ACL{
		allow(kmsg.ACLResourceTypeTransactionalId, "orders-", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationWrite),
	}, base...)

	for _, tc := range []struct {
		name     string
		acls     []kfake.ACL
		wantCode int
		wantFail string
		wantFix  string
	}{
		{"missing transactional id", base, exitFailure, `lacks Write on TransactionalId "orders:worker-0"`, "--resource-pattern-type prefixed --transactional-id orders:"},
		{"complete", full, exitOK, "", ""},
		{"deny wins", denied, exitFailure, `lacks Write on Topic "invoices"`, "--topic invoices"},
		{"missing offsets mirror", append(full[:2:2], base...), exitFailure, `lacks Read on Topic "` + mirror + `"`, "--operation Read --topic " + mirror},
		{"old transactional id form", legacy, exitFailure, `the ACL matches the old form "orders-worker-0"`, "--transactional-id orders:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs), kfake.EnableSASL(), kfake.EnableACLs(),
				kfake.Superuser("SCRAM-SHA-256", "admin", "admin"), kfake.User("SCRAM-SHA-256", "app", "secret", tc.acls...))
			res := doctor(t, addr, tc.wantCode, "--config", writeConfig(t, addr, ""),
				"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "admin", "--sasl-password", "admin",
				"--principal", "User:app", "--input-topic", "orders", "--output-topic", "invoices")
			if tc.wantFail != "" {
				f, ok := findingWith(res, statusFail, tc.wantFail)
				if !ok || !strings.Contains(f.Fix, "kafka-acls.sh") || !strings.Contains(f.Fix, tc.wantFix) {
					t.Errorf("want failure %q with a kafka-acls.sh fix containing %q: %+v", tc.wantFail, tc.wantFix, res.Findings)
				}
				return
			}
			for _, want := range []string{"Describe on TransactionalId", "Read on Group", "Read on Topic \"orders\"", "Write on Topic \"invoices\"", "IdempotentWrite",
				"Create on Topic \"" + mirror + "\"", "Read on Topic \"" + mirror + "\"", "Write on Topic \"" + mirror + "\""} {
				if _, ok := findingWith(res, statusOK, want); !ok {
					t.Errorf("want ok for %q: %+v", want, res.Findings)
				}
			}
		})
	}
}

// With --store and --repartition the doctor checks the grants of the
// internal topics too, as it does the offsets mirror's: Create granted on
// the cluster covers creating them, and a missing Delete on the
// repartition topic fails with its fix.
func TestDoctorChecksInternalTopicACLs(t *testing.T) {
	lit := kmsg.ACLResourcePatternTypeLiteral
	allow := func(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: name, Pattern: lit, Operation: op, Allow: true}
	}
	changelog, rep := topology.ChangelogTopic("orders", "counts"), topology.RepartitionTopic("orders", "by-value")
	mirror := topology.OffsetsTopic("orders")
	acls := []kfake.ACL{
		{Resource: kmsg.ACLResourceTypeTransactionalId, Name: "orders:", Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationWrite, Allow: true},
		allow(kmsg.ACLResourceTypeGroup, "orders", kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationCreate),
		allow(kmsg.ACLResourceTypeTopic, changelog, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, changelog, kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeTopic, rep, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, rep, kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeTopic, mirror, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, mirror, kmsg.ACLOperationWrite),
	}
	_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"), kfake.User("SCRAM-SHA-256", "app", "secret", acls...))
	res := doctor(t, addr, exitFailure, "--config", writeConfig(t, addr, ""),
		"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "admin", "--sasl-password", "admin",
		"--principal", "User:app", "--store", "counts", "--repartition", "by-value")
	for _, want := range []string{
		`Create on Topic "` + changelog + `"`, `Read on Topic "` + changelog + `"`, `Write on Topic "` + changelog + `"`,
		`Create on Topic "` + rep + `"`, `Read on Topic "` + rep + `"`, `Write on Topic "` + rep + `"`,
		`Create on Topic "` + mirror + `"`, `Read on Topic "` + mirror + `"`, `Write on Topic "` + mirror + `"`,
	} {
		if _, ok := findingWith(res, statusOK, want); !ok {
			t.Errorf("want ok for %s: %+v", want, res.Findings)
		}
	}
	f, ok := findingWith(res, statusFail, `lacks Delete on Topic "`+rep+`"`)
	if !ok || !strings.HasSuffix(f.Fix, "--operation Delete --topic "+rep) {
		t.Errorf("want a failure for Delete on %s with its kafka-acls.sh fix: %+v", rep, res.Findings)
	}
}

func TestDoctorAsPipelinePrincipalDegrades(t *testing.T) {
	_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"), kfake.User("SCRAM-SHA-256", "app", "secret"))
	res := doctor(t, addr, exitOK, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "app", "--sasl-password", "secret")
	if _, ok := findingWith(res, statusWarn, "cannot read them"); !ok {
		t.Errorf("want a broker configs warning: %+v", res.Findings)
	}
	if _, ok := findingWith(res, statusWarn, "may not describe ACLs"); !ok {
		t.Errorf("want an ACL warning: %+v", res.Findings)
	}
}

func TestDoctorExistingTransactionLog(t *testing.T) {
	_, addr := newCluster(t)
	env := &doctorEnv{ctx: context.Background(), adm: newAdmin(t, addr)}
	part := func(replicas, isr int) kadm.PartitionDetail {
		p := kadm.PartitionDetail{}
		for i := range replicas {
			p.Replicas = append(p.Replicas, int32(i))
			if i < isr {
				p.ISR = append(p.ISR, int32(i))
			}
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		parts  []kadm.PartitionDetail
		minISR int
		status string
		detail string
	}{
		{"healthy", []kadm.PartitionDetail{part(3, 3), part(3, 2)}, 2, statusOK, "3 replicas"},
		{"under min isr", []kadm.PartitionDetail{part(3, 3), part(3, 1)}, 2, statusFail, "1 of 2"},
		{"default min isr", []kadm.PartitionDetail{part(1, 1)}, -1, statusFail, "min.insync.replicas=2"},
		{"one replica", []kadm.PartitionDetail{part(1, 1)}, 1, statusWarn, "1 replica(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := kadm.TopicDetail{Topic: txnStateTopic, Partitions: kadm.PartitionDetails{}}
			for i, p := range tc.parts {
				p.Partition = int32(i)
				td.Partitions[int32(i)] = p
			}
			var fs findings
			env.checkExistingTxnLog(&fs, td, tc.minISR)
			if len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Detail, tc.detail) {
				t.Errorf("got %+v, want %s with %q", fs, tc.status, tc.detail)
			}
		})
	}
}
