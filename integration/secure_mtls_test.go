package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// mtlsEnv is the mutual-TLS listener of the secured cluster as the super
// user (by its certificate, CN=admin), or a skip.
func mtlsEnv(t *testing.T) *kafkatest.Env {
	t.Helper()
	env := kafkatest.SecureMTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := env.Client(t).Ping(ctx); err != nil {
		t.Fatalf("the mutual-TLS listener at %s does not answer the super user's certificate %s: %v",
			strings.Join(env.Brokers, ","), env.TLS.CertFile, err)
	}
	return env
}

// newCertPipeline is newPipeline for the mutual-TLS listener: instead of a
// SCRAM user it signs a client certificate with a fresh CN, whose principal
// is User:<CN>, and its config runs with that certificate and no SASL.
func newCertPipeline(t *testing.T, admin *kafkatest.Env, prefix string) pipelineNames {
	t.Helper()
	p := pipelineNames{
		user: admin.Name(prefix + "-user"),
		in:   admin.Name(prefix + "-in"),
		out:  admin.Name(prefix + "-out"),
		app:  admin.Name(prefix + "-app"),
	}
	p.principal = "User:" + p.user
	p.cfg = admin.AsCert(t, p.user).Config(p.app, "1", config.ExactlyOnce)
	admin.CreateTopics(t, 2, p.in, p.out)
	return p
}

// certEnv is admin's listener with p's client certificate.
func certEnv(admin *kafkatest.Env, p pipelineNames) *kafkatest.Env {
	return admin.WithClientCert(kafkatest.ClientCert{CertFile: p.cfg.TLS.CertFile, KeyFile: p.cfg.TLS.KeyFile})
}

// TestSecureMTLSLeastPrivilegeExactlyOnce runs the exactly-once pipeline
// over the mutual-TLS listener, authenticated only by a client
// certificate with CN=<user> and holding exactly the ACLs of
// leastPrivilege granted to User:<user>, and checks every input record
// reached the output once, read_committed.
func TestSecureMTLSLeastPrivilegeExactlyOnce(t *testing.T) {
	admin := mtlsEnv(t)
	p := newCertPipeline(t, admin, "mtls")
	if p.cfg.SASL.Mechanism != "" || p.cfg.TLS.CertFile == "" {
		t.Fatalf("the pipeline config must authenticate by certificate alone: SASL %q, certificate %q", p.cfg.SASL.Mechanism, p.cfg.TLS.CertFile)
	}
	// The certificate's principal is no super user: the broker refuses it
	// what no ACL allows.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := certEnv(admin, p).Admin(t).CreateTopics(ctx, 1, -1, nil, admin.Name("mtls-denied"))
	if err == nil {
		err = created.Error()
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("%s creating a topic: %v, want TOPIC_AUTHORIZATION_FAILED", p.principal, err)
	}

	grantAll(t, admin, p, leastPrivilege)
	const n = 2000
	conformance.Seed(t, admin, p.in, n)
	x := conformance.Start(t, p.cfg, conformance.Upper(p.in, p.out, nil))
	x.WaitCommitted(t, n, 90*time.Second)
	v := conformance.ExactlyOnce(t, admin, p.out, n)
	t.Logf("%s with only %d ACLs over mutual TLS: %v", p.principal, len(leastPrivilege), v)
	if offs := groupOffsets(t, admin, p.app); offs == 0 {
		t.Fatalf("group %s committed no offsets after a full run", p.app)
	}
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run after Stop: %v", err)
	}
}

// TestSecureMTLSCertPrincipals checks the certificates kafka.sh made map
// to the principals its README names: client-admin (CN=admin) is the super
// user, client-app (CN=eosflow-app) is User:eosflow-app and sees a topic
// only once that principal is granted Describe on it.
func TestSecureMTLSCertPrincipals(t *testing.T) {
	admin := mtlsEnv(t)
	topic := admin.Name("mtls-principal")
	admin.CreateTopics(t, 1, topic) // as CN=admin: only a super user may
	app := admin.WithClientCert(admin.Certs.App).Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	describe := func() error {
		details, err := app.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		d, ok := details[topic]
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		return d.Err
	}
	if err := describe(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("User:eosflow-app described %s without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
	}
	// The principal is shared by every run against this broker: the
	// grant is on this run's topic only, and removed again at the end.
	const principal = "User:eosflow-app"
	adm := admin.Admin(t)
	acl := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow(principal).AllowHosts().Topics(topic).Operations(kadm.OpDescribe).
			ResourcePatternType(kadm.ACLPatternLiteral)
	}
	res, err := adm.CreateACLs(ctx, acl())
	for _, r := range res {
		if err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("grant Describe on %s to %s: %v", topic, principal, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := adm.DeleteACLs(ctx, acl())
		for _, r := range res {
			if err == nil {
				err = r.Err
			}
		}
		if err != nil {
			t.Errorf("remove the ACL of %s on %s: %v", principal, topic, err)
		}
	})
	// About 5s: the client answers from its metadata cache (MetadataMinAge)
	// until it asks the broker again.
	conformance.Until(t, 30*time.Second, principal+" to describe "+topic, func() bool { return describe() == nil })
}

// TestSecureMTLSBadCertificates checks that a client certificate from a CA
// the brokers do not trust, and no client certificate at all, each stop
// eos.Run and eosctl on the mutual-TLS listener within the connect timeout
// with a one-line eos.ErrAuthentication naming the setting to fix.
func TestSecureMTLSBadCertificates(t *testing.T) {
	admin := mtlsEnv(t)
	// The key must never show in an error; a line of its PEM stands for it.
	key, err := os.ReadFile(admin.Certs.Untrusted.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.Split(string(key), "\n")[1]
	cases := []struct {
		name    string
		env     *kafkatest.Env
		run     []string // substrings of the runtime's error
		eosctl  []string // substrings of eosctl's
		noCerts bool
	}{
		{"untrusted CA", admin.WithClientCert(admin.Certs.Untrusted),
			[]string{"authentication failed", "refused the client certificate", admin.Certs.Untrusted.CertFile, "tls.cert_file", "EOS_TLS_CERT_FILE", "EOS_TLS_KEY_FILE"},
			[]string{"authentication failed", "refused the client certificate", admin.Certs.Untrusted.CertFile, "--tls-cert", "--tls-key"}, false},
		{"no client certificate", admin.WithClientCert(kafkatest.ClientCert{}),
			[]string{"authentication failed", "require a client certificate", "tls.cert_file", "EOS_TLS_CERT_FILE", "EOS_TLS_KEY_FILE"},
			[]string{"authentication failed", "require a client certificate", "--tls-cert", "--tls-key"}, true},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			cfg := tc.env.Config(admin.Name("bad-app"), "1", config.ExactlyOnce)
			if tc.noCerts != (cfg.TLS.CertFile == "") {
				t.Fatalf("client certificate %q in the config of case %s", cfg.TLS.CertFile, tc.name)
			}
			limit := cfg.ConnectTimeout
			top := conformance.Upper(admin.Name("bad-in"), admin.Name("bad-out"), nil)
			r, err := eos.New(cfg, top)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			begin := time.Now()
			err = r.Run(ctx)
			took := time.Since(begin)
			checkOneLine(t, "eos Run", err, took, limit, tc.run, secret)
			if !errors.Is(err, eos.ErrAuthentication) {
				t.Errorf("Run's error is not eos.ErrAuthentication: %v", err)
			}
			if errors.Is(err, eos.ErrUnreachable) {
				t.Errorf("Run's error also claims the brokers are unreachable: %v", err)
			}
			begin = time.Now()
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if took := time.Since(begin); took > limit {
				t.Errorf("Close after the failed Run took %s, want at most %s", took, limit)
			}

			args := []string{"topic", "list", "--brokers", strings.Join(tc.env.Brokers, ","), "--tls-ca", tc.env.TLS.CAFile,
				"--timeout", cfg.ConnectTimeout.String()}
			if !tc.noCerts {
				args = append(args, "--tls-cert", tc.env.TLS.CertFile, "--tls-key", tc.env.TLS.KeyFile)
			}
			cmd := exec.Command(eosctlBinary(t), args...)
			cmd.Env = os.Environ()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			begin = time.Now()
			out, cerr := cmd.Output()
			took = time.Since(begin)
			if cerr == nil {
				t.Fatalf("eosctl %s succeeded: %s", strings.Join(args, " "), out)
			}
			checkOneLine(t, "eosctl topic list", errors.New(strings.TrimSpace(stderr.String())), took, limit, tc.eosctl, secret)
		})
	}
}

// TestSecureMTLSEosctl runs eosctl's topic commands over the mutual-TLS
// listener as the super user, with --tls-ca, --tls-cert and --tls-key,
// and once with only the EOS_* variables `kafka.sh mtls-env` prints.
func TestSecureMTLSEosctl(t *testing.T) {
	admin := mtlsEnv(t)
	topic := admin.Name("mtls-cli")
	flags := []string{"--brokers", strings.Join(admin.Brokers, ","), "--tls-ca", admin.TLS.CAFile,
		"--tls-cert", admin.TLS.CertFile, "--tls-key", admin.TLS.KeyFile}
	eosctl := func(env []string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(eosctlBinary(t), args...)
		cmd.Env = append(os.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), stderr.String(), code
	}
	for _, tc := range []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"topic", "create", topic, "--partitions", "2"}, topic},
		{[]string{"topic", "list"}, topic},
		{[]string{"topic", "describe", topic}, topic},
	} {
		stdout, stderr, code := eosctl(nil, append(tc.args, flags...)...)
		if code != 0 || !strings.Contains(stdout, tc.want) {
			t.Errorf("eosctl %s: exit %d, stdout lacks %q:\n%s\nstderr: %s", strings.Join(tc.args, " "), code, tc.want, stdout, stderr)
		}
	}
	stdout, stderr, code := eosctl([]string{"EOS_BROKERS=" + strings.Join(admin.Brokers, ","), "EOS_TLS_ENABLED=true",
		"EOS_TLS_CA_FILE=" + admin.TLS.CAFile, "EOS_TLS_CERT_FILE=" + admin.TLS.CertFile, "EOS_TLS_KEY_FILE=" + admin.TLS.KeyFile},
		"topic", "list")
	if code != 0 || !strings.Contains(stdout, topic) {
		t.Errorf("eosctl topic list with EOS_* variables: exit %d, stdout lacks %q:\n%s\nstderr: %s", code, topic, stdout, stderr)
	}
	stdout, stderr, code = eosctl(nil, append([]string{"topic", "delete", topic, "--yes"}, flags...)...)
	if code != 0 || !strings.Contains(stdout, topic) {
		t.Errorf("eosctl topic delete: exit %d, stdout lacks %q:\n%s\nstderr: %s", code, topic, stdout, stderr)
	}
	// The topic is gone for a client of the mutual-TLS listener too.
	adm := admin.Admin(t)
	conformance.Until(t, 30*time.Second, topic+" to disappear", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		details, err := adm.ListTopics(ctx, topic)
		d, ok := details[topic]
		return err == nil && (!ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition))
	})
}
