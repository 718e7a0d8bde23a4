package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestSecureContainer starts the secured broker as a container (SASL_SSL,
// SCRAM-SHA-512, ACLs with the super user admin; kafkatest.SecureContainer)
// and, as a SCRAM user created by the super user with exactly the ACLs of
// leastPrivilege, runs the exactly-once pipeline and checks every record
// arrives once; that user is refused what no ACL grants, and a wrong
// password stops Run with eos.ErrAuthentication. It skips unless
// EOS_KAFKA_IMAGE and DOCKER_HOST are set, so the `-run '^TestSecure'`
// step for kafka.sh --secure, which sets neither, does not run it; and it
// starts its own broker, never the one EOS_KAFKA_SECURE_ENV names.
func TestSecureContainer(t *testing.T) {
	admin := kafkatest.SecureContainer(t)
	p := newPipeline(t, admin, "ctr")
	grantAll(t, admin, p, leastPrivilege)

	t.Run("LeastPrivilegeExactlyOnce", func(t *testing.T) {
		const n = 2000
		conformance.Seed(t, admin, p.in, n)
		x := conformance.Start(t, p.cfg, conformance.Upper(p.in, p.out, nil))
		x.WaitCommitted(t, n, 90*time.Second)
		v := conformance.ExactlyOnce(t, admin, p.out, n)
		t.Logf("%s with only %d ACLs over SASL_SSL to the container: %v", p.principal, len(leastPrivilege), v)
		if offs := groupOffsets(t, admin, p.app); offs == 0 {
			t.Fatalf("group %s committed no offsets after a full run", p.app)
		}
	})

	// Without this the pipeline above could pass on a broker that allows
	// everyone: the authorizer must refuse what no ACL grants.
	t.Run("NoACLNoAccess", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		topic := admin.Name("ctr-ungranted")
		res, err := admin.As(p.user, p.password).Admin(t).CreateTopics(ctx, 1, -1, nil, topic)
		if err == nil {
			err = res.Error()
		}
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s creating topic %s: %v, want TOPIC_AUTHORIZATION_FAILED", p.principal, topic, err)
		}
	})

	t.Run("WrongPassword", func(t *testing.T) {
		cfg := admin.As(p.user, "not-the-password").Config(admin.Name("ctr-bad-app"), "1", config.ExactlyOnce)
		r, err := eos.New(cfg, conformance.Upper(p.in, admin.Name("ctr-bad-out"), nil))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		begin := time.Now()
		err = r.Run(ctx)
		checkOneLine(t, "eos Run", err, time.Since(begin), cfg.ConnectTimeout,
			[]string{"authentication failed", "SASL", p.user}, p.password)
		if !errors.Is(err, eos.ErrAuthentication) {
			t.Errorf("Run's error is not eos.ErrAuthentication: %v", err)
		}
	})
}
