package eos_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A pipeline whose principal lacks one ACL stops at once with an
// *AuthorizationError that names the missing grant as a kafka-acls.sh
// command, instead of retrying, and commits nothing. (A wrong password is
// tested on the real broker in integration/: kfake closes the connection
// instead of answering SASL_AUTHENTICATION_FAILED.)
func TestMissingACLStopsWithTheGrant(t *testing.T) {
	allow := func(r kmsg.ACLResourceType, name string, p kmsg.ACLResourcePatternType, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: r, Name: name, Pattern: p, Operation: op, Allow: true}
	}
	lit := kmsg.ACLResourcePatternTypeLiteral
	grants := map[string]kfake.ACL{
		"--operation Read --topic in":   allow(kmsg.ACLResourceTypeTopic, "in", lit, kmsg.ACLOperationRead),
		"--operation Write --topic out": allow(kmsg.ACLResourceTypeTopic, "out", lit, kmsg.ACLOperationWrite),
		"--operation Read --group app":  allow(kmsg.ACLResourceTypeGroup, "app", lit, kmsg.ACLOperationRead),
		"--operation Write --resource-pattern-type prefixed --transactional-id app:": allow(kmsg.ACLResourceTypeTransactionalId, "app:",
			kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationWrite),
		// The offsets mirror, made at the first start.
		"--operation Create --topic app-eos-offsets": allow(kmsg.ACLResourceTypeTopic, "app-eos-offsets", lit, kmsg.ACLOperationCreate),
		"--operation Read --topic app-eos-offsets":   allow(kmsg.ACLResourceTypeTopic, "app-eos-offsets", lit, kmsg.ACLOperationRead),
		"--operation Write --topic app-eos-offsets":  allow(kmsg.ACLResourceTypeTopic, "app-eos-offsets", lit, kmsg.ACLOperationWrite),
	}
	for missing := range grants {
		t.Run(missing, func(t *testing.T) {
			var acls []kfake.ACL
			for fix, a := range grants {
				if fix != missing {
					acls = append(acls, a)
				}
			}
			admin := kafkatest.Fake(t, kfake.EnableSASL(), kfake.EnableACLs(),
				kfake.Superuser(config.SASLScramSHA512, "admin", "admin-secret"),
				kfake.User(config.SASLScramSHA512, "app-user", "app-secret", acls...))
			admin.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "admin", Password: "admin-secret"}
			admin.CreateTopics(t, 1, "in", "out")
			conformance.Seed(t, admin, "in", 10)
			cfg := admin.As("app-user", "app-secret").Config("app", "1", config.ExactlyOnce)
			x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
			err := x.Wait(t, 30*time.Second)
			var ae *eos.AuthorizationError
			if !errors.As(err, &ae) || !errors.Is(err, eos.ErrNotAuthorized) {
				t.Fatalf("Run = %v, want an *eos.AuthorizationError", err)
			}
			want := "kafka-acls.sh --bootstrap-server " + strings.Join(admin.Brokers, ",") + " --add --allow-principal User:app-user " + missing
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not contain %q:\n%v", want, err)
			}
			if !strings.Contains(err.Error(), "eosctl doctor --acls") || strings.Contains(err.Error(), "app-secret") {
				t.Errorf("want the doctor command and no password in:\n%v", err)
			}
			if !kfakeIsAuthError(err) {
				t.Errorf("the broker's authorization error is not wrapped: %v", err)
			}
			if n := len(conformance.Drain(t, admin, "out", 0)); n != 0 {
				t.Errorf("%d records committed to out without %s", n, missing)
			}
		})
	}
}

func kfakeIsAuthError(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

// A repartition topic is both read and written by the app: a refused
// produce to it names Write (not Read, as for a topic it only consumes),
// and the suggested doctor command names the store and the GroupBy node.
func TestMissingWriteOnRepartitionTopicNamesWrite(t *testing.T) {
	lit := kmsg.ACLResourcePatternTypeLiteral
	allow := func(r kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: r, Name: name, Pattern: lit, Operation: op, Allow: true}
	}
	rep, changelog := topology.RepartitionTopic("app", "by-value"), topology.ChangelogTopic("app", "counts")
	acls := []kfake.ACL{
		allow(kmsg.ACLResourceTypeTopic, "in", kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, "out", kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeTopic, rep, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, changelog, kmsg.ACLOperationAll),
		allow(kmsg.ACLResourceTypeTopic, topology.OffsetsTopic("app"), kmsg.ACLOperationAll),
		allow(kmsg.ACLResourceTypeGroup, "app", kmsg.ACLOperationRead),
		{Resource: kmsg.ACLResourceTypeTransactionalId, Name: "app:", Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationWrite, Allow: true},
	}
	admin := kafkatest.Fake(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(config.SASLScramSHA512, "admin", "admin-secret"),
		kfake.User(config.SASLScramSHA512, "app-user", "app-secret", acls...))
	admin.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "admin", Password: "admin-secret"}
	admin.CreateTopics(t, 1, "in", "out")
	admin.CreateTopicsWith(t, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, changelog)
	admin.CreateTopicsWith(t, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("delete"), "retention.ms": kmsg.StringPtr("-1")}, rep)
	conformance.SeedValues(t, admin, "in", 0, 10)
	cfg := admin.As("app-user", "app-secret").Config("app", "1", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.GroupedCountTopology("in", "out", state.Memory()))
	err := x.Wait(t, 30*time.Second)
	if !errors.Is(err, eos.ErrNotAuthorized) || !strings.Contains(err.Error(), "--operation Write --topic "+rep) {
		t.Fatalf("Run = %v\nwant an authorization error naming Write on %s", err, rep)
	}
	// The doctor command it suggests prints the internal topics' grants
	// too, so it names the store and the GroupBy node.
	doctor := "`EOS_APP_ID=app eosctl doctor --acls --principal User:app-user --input-topic in --output-topic out --store counts --repartition by-value`"
	if !strings.Contains(err.Error(), doctor) {
		t.Errorf("the error does not suggest %s:\n%v", doctor, err)
	}
}

// An input that gained partitions while the app may not add them to the
// offsets mirror (no Alter) does not stop the app: it runs on, logs which
// partitions go unmirrored and how to add them, and stays exactly-once.
func TestMirrorThatCannotGrowIsLoggedNotFatal(t *testing.T) {
	lit := kmsg.ACLResourcePatternTypeLiteral
	allow := func(r kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: r, Name: name, Pattern: lit, Operation: op, Allow: true}
	}
	mirror := topology.OffsetsTopic("app")
	acls := []kfake.ACL{
		allow(kmsg.ACLResourceTypeTopic, "in", kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, "out", kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeTopic, mirror, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, mirror, kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeGroup, "app", kmsg.ACLOperationRead),
		{Resource: kmsg.ACLResourceTypeTransactionalId, Name: "app:", Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationWrite, Allow: true},
	}
	admin := kafkatest.Fake(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(config.SASLScramSHA512, "admin", "admin-secret"),
		kfake.User(config.SASLScramSHA512, "app-user", "app-secret", acls...))
	admin.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "admin", Password: "admin-secret"}
	admin.CreateTopics(t, 2, "in", "out")
	admin.CreateTopicsWith(t, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, mirror)
	conformance.Seed(t, admin, "in", 100)
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := admin.As("app-user", "app-secret").Config("app", "1", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Logger(zap.New(core)))
	x.WaitCommitted(t, 100, 30*time.Second)
	conformance.ExactlyOnce(t, admin, "out", 100)
	grow := logs.FilterMessage("the offsets mirror has fewer partitions than the inputs, and this app may not add them; the new input partitions go unmirrored until they are added")
	unmirrored := logs.FilterMessage("an input partition has no offsets mirror partition yet (partitions were added to the input); restart to add it")
	if grow.Len() == 0 || unmirrored.Len() != 1 {
		t.Fatalf("logged the refused growth %d times and the unmirrored partition %d times; want at least once and once", grow.Len(), unmirrored.Len())
	}
}
