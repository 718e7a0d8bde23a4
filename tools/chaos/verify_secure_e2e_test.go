package chaos_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// verifyPrefix is what every name of a verify run starts with: its app id
// (group, transactional ids) and its topics.
const verifyPrefix = "eosverify-"

// TestVerifySecureBroker runs the verifier against the secured broker
// (SASL_SSL, SCRAM-SHA-512, an authorizer that denies what no ACL allows)
// with its workers logged in as a user holding only prefixed grants on
// verify's names — Read, Write and Create on topics, Read on groups, Write
// on transactional ids — and the two that let a worker abort its own
// hanging transactions after the broker crash (Read on __consumer_offsets,
// ClusterAction), while verify itself, which
// creates and deletes topics, is the super user. The short form of
// TestVerifyRealBroker: the stateless pipeline through kills, a SIGTERM, a
// rebalance and a hard broker restart, the count with pebble state, and a
// worker user without Write on transactional ids, which must stop the run
// at once naming the grant. Start the broker with `EOS_KAFKA_PORT=29392
// integration/kafka/kafka.sh start --secure`, then run with
// EOS_KAFKA_SECURE_ENV set to the file it prints and
// EOS_KAFKA_RESTART_CMD="EOS_KAFKA_PORT=29392 integration/kafka/kafka.sh restart --hard".
func TestVerifySecureBroker(t *testing.T) {
	env := kafkatest.Secure(t)
	restart := strings.TrimSpace(os.Getenv(EnvRestartCmd))
	if restart == "" {
		t.Skipf("set %s to the command that hard-restarts the secured broker", EnvRestartCmd)
	}
	cl := env.Client(t)
	adm := kadm.NewClient(cl)
	worker, workerPW := newSCRAMUser(t, env, adm, "eosverify-worker")
	principal := "User:" + worker
	grant(t, adm, cl, principal,
		kadm.NewACLs().Allow(principal).Topics(verifyPrefix).ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpRead, kadm.OpWrite, kadm.OpCreate),
		kadm.NewACLs().Allow(principal).Groups(verifyPrefix).ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpRead),
		kadm.NewACLs().Allow(principal).TransactionalIDs(verifyPrefix).ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpWrite),
		// What repairing its own hanging transactions after a broker
		// crash takes (docs/security.md): without it a hard restart can
		// stall a worker until an admin aborts the transaction.
		kadm.NewACLs().Allow(principal).Topics("__consumer_offsets").Operations(kadm.OpRead),
		kadm.NewACLs().Allow(principal).Clusters().Operations(kadm.OpClusterAction),
	)
	secure := []string{"--brokers", strings.Join(env.Brokers, ","), "--tls-ca", env.TLS.CAFile,
		"--sasl-mechanism", env.SASL.Mechanism, "--sasl-user", env.SASL.Username, "--broker-restart-cmd", restart}
	login := func(user, pw string) ([]string, []string) {
		return append(append([]string(nil), secure...), "--worker-sasl-user", user),
			[]string{"EOS_SASL_PASSWORD=" + env.SASL.Password, "EOS_WORKER_SASL_PASSWORD=" + pw}
	}
	args, penv := login(worker, workerPW)

	t.Run("exactly-once", func(t *testing.T) {
		res, _, code := verifyEnv(t, penv, append(args, "--records", "10000", "--workers", "2", "--kills", "3",
			"--broker-restarts", "1", "--terms", "1", "--rebalances", "1", "--abort-rate", "0.05", "--duration", "5m")...)
		if code != 0 || !res.Pass {
			t.Fatalf("exit %d, problems %v", code, res.Problems)
		}
		checkExactlyOnce(t, res, 10000, 3, 1)
	})
	t.Run("count with pebble state", func(t *testing.T) {
		res, raw, code := verifyEnv(t, penv, append(args, "--pipeline", "count", "--state", "pebble", "--records", "5000",
			"--keys", "50", "--workers", "2", "--kills", "3", "--broker-restarts", "0", "--terms", "1", "--rebalances", "2",
			"--abort-rate", "0.05", "--duration", "5m")...)
		checkCountsExactlyOnce(t, res, raw, code, 5000, 50, 3)
	})
	// The workers really run as the worker user: one lacking Write on the
	// transactional ids cannot start a transaction, and verify stops with
	// the fix rather than restarting it until the run times out.
	t.Run("worker without Write on transactional ids", func(t *testing.T) {
		user, pw := newSCRAMUser(t, env, adm, "eosverify-notxn")
		p := "User:" + user
		grant(t, adm, cl, p,
			kadm.NewACLs().Allow(p).Topics(verifyPrefix).ResourcePatternType(kadm.ACLPatternPrefixed).
				Operations(kadm.OpRead, kadm.OpWrite, kadm.OpCreate),
			kadm.NewACLs().Allow(p).Groups(verifyPrefix).ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead),
		)
		args, penv := login(user, pw)
		cmd := exec.Command(eosctl(t), append([]string{"verify", "--log-dir", t.TempDir()}, append(args, "--records", "1000",
			"--workers", "1", "--kills", "0", "--broker-restarts", "0", "--terms", "0", "--rebalances", "0",
			"--abort-rate", "0", "--duration", "2m")...)...)
		cmd.Dir = moduleRoot(t)
		cmd.Env = append(append(os.Environ(), "EOS_BROKERS="), penv...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		t.Logf("verify as %s stopped after %s: %v\n%s", user, took.Round(100*time.Millisecond), err, out.String())
		if _, ok := errors.AsType[*exec.ExitError](err); !ok {
			t.Fatalf("verify as a user without Write on transactional ids: %v, want a failed run", err)
		}
		for _, want := range []string{"TRANSACTIONAL_ID_AUTHORIZATION_FAILED", p, "--transactional-id " + verifyPrefix} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("verify's output does not name %q", want)
			}
		}
		if took > time.Minute {
			t.Errorf("verify took %s to stop on a missing grant, want well under its 2m limit", took)
		}
		if strings.Contains(out.String(), pw) || strings.Contains(out.String(), env.SASL.Password) {
			t.Errorf("verify's output holds a password")
		}
	})
}

// newSCRAMUser makes a SCRAM-SHA-512 user named prefix plus a random
// suffix and waits until it can log in.
func newSCRAMUser(t *testing.T, env *kafkatest.Env, adm *kadm.Client, prefix string) (user, password string) {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	user, password = env.Name(prefix), hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password,
	}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create SCRAM user %s: %v", user, err)
	}
	// A new credential reaches the broker's cache shortly after the
	// controller accepted it.
	as := env.As(user, password)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		cl, cerr := kgo.NewClient(as.ClientOpts(t)...)
		if cerr != nil {
			t.Fatal(cerr)
		}
		pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = cl.Ping(pctx)
		pcancel()
		cl.Close()
		if err == nil {
			return user, password
		}
		if time.Now().After(deadline) {
			t.Fatalf("user %s cannot log in 30s after it was created: %v", user, err)
		}
	}
}

// grant creates the ACLs of one principal and waits until the authorizer
// lists them all.
func grant(t *testing.T, adm *kadm.Client, cl *kgo.Client, principal string, acls ...*kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := 0
	for _, b := range acls {
		res, err := adm.CreateACLs(ctx, b)
		if err == nil {
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			t.Fatalf("create ACLs: %v", err)
		}
		want += len(res)
	}
	var n int
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType = kmsg.ACLResourceTypeAny
		req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		req.Principal = &principal
		req.Operation = kmsg.ACLOperationAny
		req.PermissionType = kmsg.ACLPermissionTypeAny
		var resp *kmsg.DescribeACLsResponse
		if resp, err = req.RequestWith(ctx, cl); err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			n = 0
			for _, r := range resp.Resources {
				n += len(r.ACLs)
			}
			if n == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d ACLs of %s reached the authorizer in 30s (last error %v)", n, want, principal, err)
		}
	}
}
