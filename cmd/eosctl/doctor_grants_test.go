package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
)

func TestDoctorACLsPrintsGrants(t *testing.T) {
	t.Setenv("EOS_APP_ID", "orders")
	out, errOut, code := runCLI(t, nil, "--brokers", "b1:9093,b2:9093", "doctor", "--acls",
		"--principal", "User:orders-app", "--input-topic", "orders", "--output-topic", "invoices")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	const prefix = "kafka-acls.sh --bootstrap-server b1:9093,b2:9093 --add --allow-principal User:orders-app "
	want := []string{
		prefix + "--operation Write --resource-pattern-type prefixed --transactional-id orders:",
		prefix + "--operation Read --group orders",
		"# " + prefix + "--operation IdempotentWrite --cluster",
		prefix + "--operation Read --topic orders",
		prefix + "--operation Write --topic invoices",
		prefix + "--operation Create --topic orders-eos-offsets",
		prefix + "--operation Read --topic orders-eos-offsets",
		prefix + "--operation Write --topic orders-eos-offsets",
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(l, "kafka-acls.sh") {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s\nfull output:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}

	out, _, code = runCLI(t, nil, "-o", "json", "--brokers", "b1:9093", "doctor", "--acls", "--sasl-user", "orders-app",
		"--sasl-mechanism", "SCRAM-SHA-512", "--topic", "loop")
	var grants []aclGrant
	if err := json.Unmarshal([]byte(out), &grants); code != exitOK || err != nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	var loop []string
	for _, g := range grants {
		if !strings.Contains(g.Command, "--allow-principal User:orders-app ") {
			t.Errorf("the principal does not default to the SASL user: %s", g.Command)
		}
		if g.Resource == "Topic" {
			loop = append(loop, g.Operation+" "+g.Name)
		}
	}
	if strings.Join(loop, ",") != "Read loop,Write loop,Create orders-eos-offsets,Read orders-eos-offsets,Write orders-eos-offsets" {
		t.Errorf("topic grants %v, want Read and Write on loop, then Create, Read and Write on the offsets mirror", loop)
	}
}

func TestDoctorACLsNeedsPrincipalAndApp(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"EOS_APP_ID": "orders"}, nil, "--principal"},
		{nil, []string{"--principal", "User:x"}, "app_id"},
		{map[string]string{"EOS_APP_ID": "orders"}, []string{"--principal", "x"}, "TYPE:NAME"},
	} {
		t.Setenv("EOS_APP_ID", tc.env["EOS_APP_ID"])
		_, errOut, code := runCLI(t, nil, append([]string{"doctor", "--acls"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want a usage error naming %s", tc.env, tc.args, code, errOut, tc.want)
		}
	}
}

// A stateful pipeline's internal topics get their grants from --store and
// --repartition: Create, Read and Write on each changelog, and Create,
// Read, Write and Delete on each repartition topic, after the grants of a
// stateless pipeline and before those of the offsets mirror.
func TestDoctorACLsForStoresAndRepartitions(t *testing.T) {
	t.Setenv("EOS_APP_ID", "orders")
	out, errOut, code := runCLI(t, nil, "--brokers", "kafka:9093", "doctor", "--acls", "--principal", "User:orders-app",
		"--input-topic", "orders", "--output-topic", "counts", "--store", "counts", "--store", "totals", "--repartition", "by-customer")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	const cmd = "kafka-acls.sh --bootstrap-server kafka:9093 --add --allow-principal User:orders-app "
	want := strings.Join([]string{
		`# Write on TransactionalId "orders:": to run transactions`,
		cmd + "--operation Write --resource-pattern-type prefixed --transactional-id orders:",
		`# Read on Group "orders": to join the group and commit offsets`,
		cmd + "--operation Read --group orders",
		`# IdempotentWrite on Cluster "kafka-cluster": for idempotent producing on brokers before Kafka 2.8; later ones accept Write on a topic or transactional id`,
		"# " + cmd + "--operation IdempotentWrite --cluster",
		`# Read on Topic "orders": to consume it`,
		cmd + "--operation Read --topic orders",
		`# Write on Topic "counts": to produce to it`,
		cmd + "--operation Write --topic counts",
		`# Create on Topic "orders-counts-changelog": to create the changelog of store counts on first start`,
		cmd + "--operation Create --topic orders-counts-changelog",
		`# Read on Topic "orders-counts-changelog": to restore store counts from its changelog`,
		cmd + "--operation Read --topic orders-counts-changelog",
		`# Write on Topic "orders-counts-changelog": to write the changes of store counts in each transaction`,
		cmd + "--operation Write --topic orders-counts-changelog",
		`# Create on Topic "orders-totals-changelog": to create the changelog of store totals on first start`,
		cmd + "--operation Create --topic orders-totals-changelog",
		`# Read on Topic "orders-totals-changelog": to restore store totals from its changelog`,
		cmd + "--operation Read --topic orders-totals-changelog",
		`# Write on Topic "orders-totals-changelog": to write the changes of store totals in each transaction`,
		cmd + "--operation Write --topic orders-totals-changelog",
		`# Create on Topic "orders-by-customer-repartition": to create the repartition topic of by-customer on first start`,
		cmd + "--operation Create --topic orders-by-customer-repartition",
		`# Read on Topic "orders-by-customer-repartition": to read back the records by-customer sends through it`,
		cmd + "--operation Read --topic orders-by-customer-repartition",
		`# Write on Topic "orders-by-customer-repartition": to write the records by-customer sends through it`,
		cmd + "--operation Write --topic orders-by-customer-repartition",
		`# Delete on Topic "orders-by-customer-repartition": to delete the records the group has consumed (DeleteRecords), without which the topic grows without bound`,
		cmd + "--operation Delete --topic orders-by-customer-repartition",
		`# Create on Topic "orders-eos-offsets": to create the offsets mirror on first start`,
		cmd + "--operation Create --topic orders-eos-offsets",
		`# Read on Topic "orders-eos-offsets": to read where the last commit reached when taking partitions over`,
		cmd + "--operation Read --topic orders-eos-offsets",
		`# Write on Topic "orders-eos-offsets": to mirror the committed input offsets in each transaction`,
		cmd + "--operation Write --topic orders-eos-offsets",
	}, "\n") + "\n"
	if out != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out, want)
	}

	out, errOut, code = runCLI(t, nil, "-o", "json", "--brokers", "kafka:9093", "doctor", "--acls", "--principal", "User:orders-app",
		"--store", "counts", "--repartition", "by-customer")
	var grants []aclGrant
	if err := json.Unmarshal([]byte(out), &grants); code != exitOK || err != nil {
		t.Fatalf("exit %d, %v: %s\n%s", code, err, errOut, out)
	}
	var internal []string
	for _, g := range grants {
		if strings.HasPrefix(g.Name, "orders-") {
			if g.Resource != "Topic" || g.Pattern != "literal" || g.Optional || !strings.HasSuffix(g.Command, "--topic "+g.Name) {
				t.Errorf("grant %+v: want a required literal topic grant whose command names the topic", g)
			}
			internal = append(internal, g.Operation+" "+g.Name)
		}
	}
	if got, want := strings.Join(internal, ", "), "Create orders-counts-changelog, Read orders-counts-changelog, Write orders-counts-changelog, "+
		"Create orders-by-customer-repartition, Read orders-by-customer-repartition, Write orders-by-customer-repartition, Delete orders-by-customer-repartition, "+
		"Create orders-eos-offsets, Read orders-eos-offsets, Write orders-eos-offsets"; got != want {
		t.Errorf("internal topic grants:\n%s\nwant:\n%s", got, want)
	}
}

// A --store or --repartition name that cannot be part of a topic name is a
// usage error, with or without --acls.
func TestDoctorRefusesBadInternalNames(t *testing.T) {
	t.Setenv("EOS_APP_ID", "orders")
	for _, args := range [][]string{
		{"--acls", "--principal", "User:x", "--store", "my store"},
		{"--acls", "--principal", "User:x", "--repartition", "by/customer"},
		{"--acls", "--principal", "User:x", "--store", strings.Repeat("s", 240)},
		{"--store", "a:b"},
	} {
		_, errOut, code := runCLI(t, nil, append([]string{"--brokers", "127.0.0.1:1", "doctor"}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, "--store") && !strings.Contains(errOut, "--repartition") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming the flag", args, code, errOut)
		}
	}
}

// What `doctor --acls` prints for a stateful pipeline with a GroupBy is
// enough to run it: on a broker enforcing ACLs, a user holding exactly
// those grants counts every record, its runtime creates the changelog, the
// repartition topic and the offsets mirror and purges the consumed records
// of the repartition topic.
// Without each internal-topic grant the pipeline stops naming it (without
// Read on the changelog, once a restart restores from it), or, without
// Delete, reports that the purge fails.
func TestDoctorACLsSufficeForAStatefulPipeline(t *testing.T) {
	t.Setenv("EOS_APP_ID", "counter")
	out, errOut, code := runCLI(t, nil, "-o", "json", "--brokers", "127.0.0.1:1", "doctor", "--acls", "--principal", "User:app",
		"--input-topic", "in", "--output-topic", "out", "--store", "counts", "--repartition", "by-value")
	var grants []aclGrant
	if err := json.Unmarshal([]byte(out), &grants); code != exitOK || err != nil {
		t.Fatalf("exit %d, %v: %s\n%s", code, err, errOut, out)
	}
	changelog, rep := topology.ChangelogTopic("counter", "counts"), topology.RepartitionTopic("counter", "by-value")
	mirror := topology.OffsetsTopic("counter")
	for _, tc := range []struct {
		without string // a printed grant left out, as "Operation topic"
		want    string // what then fails: in Run's error, or (Delete) in the log
	}{
		{"", ""},
		{"Create " + changelog, "--operation Create --topic " + changelog},
		{"Write " + changelog, "--operation Write --topic " + changelog},
		{"Read " + changelog, "--operation Read --topic " + changelog},
		{"Create " + rep, "--operation Create --topic " + rep},
		{"Write " + rep, "--operation Write --topic " + rep},
		{"Read " + rep, "--operation Read --topic " + rep},
		{"Delete " + rep, "deleting consumed records of repartition topics failed"},
		{"Create " + mirror, "--operation Create --topic " + mirror},
		{"Write " + mirror, "--operation Write --topic " + mirror},
		{"Read " + mirror, "--operation Read --topic " + mirror},
	} {
		name := "all grants"
		if tc.without != "" {
			name = "without " + tc.without
		}
		t.Run(name, func(t *testing.T) {
			var acls []kfake.ACL
			left := false
			for _, g := range grants {
				if g.Optional {
					continue
				}
				if g.Operation+" "+g.Name == tc.without {
					left = true
					continue
				}
				acls = append(acls, kfakeACL(t, g))
			}
			if tc.without != "" && !left {
				t.Fatalf("doctor --acls printed no %s", tc.without)
			}
			env := kafkatest.Fake(t, kfake.EnableSASL(), kfake.EnableACLs(),
				kfake.Superuser(config.SASLScramSHA512, "admin", "admin-secret"),
				kfake.User(config.SASLScramSHA512, "app", "app-secret", acls...))
			env.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "admin", Password: "admin-secret"}
			env.CreateTopics(t, 2, "in", "out")
			const n = 30
			conformance.SeedValues(t, env, "in", 0, n)
			cfg := env.As("app", "app-secret").Config("counter", "1", config.ExactlyOnce)
			var logs syncBuffer
			logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(&logs), zap.InfoLevel))
			x := conformance.Start(t, cfg, conformance.GroupedCountTopology("in", "out", state.Memory()), eos.Logger(logger), eos.PurgeInterval(0))
			switch {
			case tc.without == "":
				x.WaitCommitted(t, 2*n, 60*time.Second) // each record twice: from in, then from the repartition topic
				conformance.CheckCounts(t, env, "out", changelog, n)
				conformance.Until(t, 30*time.Second, "the consumed records of "+rep+" to be deleted", func() bool {
					starts, err := env.Admin(t).ListStartOffsets(context.Background(), rep)
					purged := false
					starts.Each(func(o kadm.ListedOffset) { purged = purged || o.Offset > 0 })
					return err == nil && purged
				})
				for _, l := range strings.Split(logs.String(), "\n") {
					internal := strings.Contains(l, changelog) || strings.Contains(l, rep) || strings.Contains(l, mirror) || strings.Contains(l, "repartition topics")
					if internal && (strings.Contains(l, "AUTHORIZATION") || strings.Contains(l, "failed")) {
						t.Errorf("with every printed grant the runtime logged a failure on an internal topic: %s", l)
					}
				}
			case tc.without == "Read "+changelog:
				// Only a restore reads the changelog: the first run
				// works, and a restart of its in-memory store fails
				// once new records make it restore.
				x.WaitCommitted(t, 2*n, 60*time.Second)
				x.Stop()
				if err := x.Wait(t, 30*time.Second); err != nil {
					t.Fatalf("the first run, which restores nothing, failed: %v", err)
				}
				conformance.SeedValues(t, env, "in", n, n+10)
				x = conformance.Start(t, cfg, conformance.GroupedCountTopology("in", "out", state.Memory()), eos.Logger(logger))
				err := x.Wait(t, 30*time.Second)
				if !errors.Is(err, eos.ErrNotAuthorized) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("the restart's Run = %v\nwant an authorization error containing %q", err, tc.want)
				}
			case strings.HasPrefix(tc.without, "Delete "):
				x.WaitCommitted(t, 2*n, 60*time.Second)
				conformance.Until(t, 30*time.Second, "the failed purge to be logged", func() bool {
					return strings.Contains(logs.String(), tc.want)
				})
			default:
				err := x.Wait(t, 30*time.Second)
				if !errors.Is(err, eos.ErrNotAuthorized) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Run = %v\nwant an authorization error containing %q", err, tc.want)
				}
			}
		})
	}
}

// kfakeACL is the ACL a doctor --acls grant adds, for seeding kfake.
func kfakeACL(t *testing.T, g aclGrant) kfake.ACL {
	t.Helper()
	op, err := kmsg.ParseACLOperation(g.Operation)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kmsg.ParseACLResourceType(g.Resource)
	if err != nil {
		t.Fatal(err)
	}
	pat, err := kmsg.ParseACLResourcePatternType(g.Pattern)
	if err != nil {
		t.Fatal(err)
	}
	return kfake.ACL{Resource: res, Name: g.Name, Pattern: pat, Operation: op, Allow: true}
}
