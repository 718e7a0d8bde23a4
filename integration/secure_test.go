package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// grant is one ACL of the least-privilege set of an exactly-once pipeline.
type grant struct {
	name string // how the missing-ACL table names it
	acl  func(p pipelineNames) *kadm.ACLBuilder
	// want are substrings the error of a pipeline lacking this grant
	// must contain: the resource, and the fix.
	want func(p pipelineNames) []string
	// describe, for a topic, is the Describe-only ACL that a second row
	// grants in its place: the pipeline then passes its start-up checks
	// and meets the refusal when it fetches or produces.
	describe func(p pipelineNames) *kadm.ACLBuilder
}

// pipelineNames are the fresh names of one least-privilege pipeline.
type pipelineNames struct {
	user, password, principal string
	in, out, app              string
	cfg                       config.Config
}

// leastPrivilege is every ACL a stateless exactly-once pipeline needs, and
// nothing else: Read and Write imply Describe, and Kafka 2.8+ brokers accept
// Write on the transactional id instead of IdempotentWrite on the cluster.
// The last three are on the offsets mirror (app_id-eos-offsets), which the
// runtime makes on first start, writes in each transaction and reads when
// it takes partitions over.
var leastPrivilege = []grant{
	{
		name: "Read on input topic",
		acl: func(p pipelineNames) *kadm.ACLBuilder {
			return kadm.NewACLs().Allow(p.principal).Topics(p.in).Operations(kadm.OpRead)
		},
		want: func(p pipelineNames) []string {
			return []string{"TOPIC_AUTHORIZATION_FAILED", p.in, "kafka-acls", "--operation Read --topic " + p.in}
		},
		describe: func(p pipelineNames) *kadm.ACLBuilder {
			return kadm.NewACLs().Allow(p.principal).Topics(p.in).Operations(kadm.OpDescribe)
		},
	},
	{
		name: "Write on output topic",
		acl: func(p pipelineNames) *kadm.ACLBuilder {
			return kadm.NewACLs().Allow(p.principal).Topics(p.out).Operations(kadm.OpWrite)
		},
		want: func(p pipelineNames) []string {
			return []string{"TOPIC_AUTHORIZATION_FAILED", p.out, "kafka-acls", "--operation Write --topic " + p.out}
		},
		describe: func(p pipelineNames) *kadm.ACLBuilder {
			return kadm.NewACLs().Allow(p.principal).Topics(p.out).Operations(kadm.OpDescribe)
		},
	},
	{
		name: "Read on group (app_id)",
		acl: func(p pipelineNames) *kadm.ACLBuilder {
			return kadm.NewACLs().Allow(p.principal).Groups(p.app).Operations(kadm.OpRead)
		},
		want: func(p pipelineNames) []string {
			return []string{"GROUP_AUTHORIZATION_FAILED", p.app, "kafka-acls", "--operation Read --group " + p.app}
		},
	},
	{
		name: "Write on transactional id prefix app_id:",
		acl: func(p pipelineNames) *kadm.ACLBuilder {
			return kadm.NewACLs().Allow(p.principal).TransactionalIDs(p.app + config.TransactionalIDSeparator).
				ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite)
		},
		want: func(p pipelineNames) []string {
			return []string{"TRANSACTIONAL_ID_AUTHORIZATION_FAILED", runcfg.TransactionalID(p.cfg), "kafka-acls",
				"--operation Write --resource-pattern-type prefixed --transactional-id " + p.app + config.TransactionalIDSeparator}
		},
	},
	mirrorGrant(kadm.OpCreate),
	mirrorGrant(kadm.OpRead),
	mirrorGrant(kadm.OpWrite),
}

// mirrorGrant is op on the pipeline's offsets mirror. It has no Describe
// row: the other two mirror grants imply Describe.
func mirrorGrant(op kadm.ACLOperation) grant {
	return grant{
		name: camelOp(op) + " on offsets mirror",
		acl: func(p pipelineNames) *kadm.ACLBuilder {
			return kadm.NewACLs().Allow(p.principal).Topics(topology.OffsetsTopic(p.app)).Operations(op)
		},
		want: func(p pipelineNames) []string {
			m := topology.OffsetsTopic(p.app)
			return []string{"TOPIC_AUTHORIZATION_FAILED", m, "kafka-acls", "--operation " + camelOp(op) + " --topic " + m}
		},
	}
}

// secureEnv is the secured cluster as its super user, or a skip.
func secureEnv(t *testing.T) *kafkatest.Env {
	t.Helper()
	env := kafkatest.Secure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := env.Client(t).Ping(ctx); err != nil {
		t.Fatalf("the secured broker at %s does not answer the super user: %v", strings.Join(env.Brokers, ","), err)
	}
	return env
}

// newPipeline makes a SCRAM user and fresh topic and app names, and creates
// the topics as the super user. Its config runs as the new user.
func newPipeline(t *testing.T, admin *kafkatest.Env, prefix string) pipelineNames {
	t.Helper()
	p := pipelineNames{
		user:     admin.Name(prefix + "-user"),
		password: randomHex(t),
		in:       admin.Name(prefix + "-in"),
		out:      admin.Name(prefix + "-out"),
		app:      admin.Name(prefix + "-app"),
	}
	p.principal = "User:" + p.user
	p.cfg = admin.As(p.user, p.password).Config(p.app, "1", config.ExactlyOnce)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin.Admin(t).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: p.user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: p.password,
	}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create SCRAM user %s: %v", p.user, err)
	}
	admin.CreateTopics(t, 2, p.in, p.out)
	waitAuthenticates(t, admin.As(p.user, p.password))
	return p
}

// waitAuthenticates waits until env's user can log in: a new SCRAM
// credential reaches the broker's cache shortly after the controller
// accepted it.
func waitAuthenticates(t *testing.T, env *kafkatest.Env) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cl, cerr := kgo.NewClient(env.ClientOpts(t)...)
		if cerr != nil {
			t.Fatal(cerr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = cl.Ping(ctx)
		cancel()
		cl.Close()
		if err == nil {
			return
		}
	}
	t.Fatalf("user %s cannot log in 30s after it was created: %v", env.SASL.Username, err)
}

// grantAll creates the ACLs and waits until the broker's authorizer lists
// all of them, so the pipeline sees them from its first request.
func grantAll(t *testing.T, admin *kafkatest.Env, p pipelineNames, grants []grant) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := admin.Admin(t)
	want := 0
	for _, g := range grants {
		res, err := adm.CreateACLs(ctx, g.acl(p))
		want += len(res)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("grant %s to %s: %v", g.name, p.principal, err)
		}
	}
	conformance.Until(t, 30*time.Second, "the ACLs to reach the authorizer", func() bool {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType = kmsg.ACLResourceTypeAny
		req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		req.Principal = &p.principal
		req.Operation = kmsg.ACLOperationAny
		req.PermissionType = kmsg.ACLPermissionTypeAny
		resp, err := req.RequestWith(ctx, admin.Client(t))
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		n := 0
		for _, r := range resp.Resources {
			n += len(r.ACLs)
		}
		return n == want
	})
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestSecureLeastPrivilegeExactlyOnce runs the exactly-once pipeline over
// SASL_SSL as a user holding exactly the ACLs of leastPrivilege, and
// checks every input record reached the output once.
func TestSecureLeastPrivilegeExactlyOnce(t *testing.T) {
	admin := secureEnv(t)
	p := newPipeline(t, admin, "lp")
	grantAll(t, admin, p, leastPrivilege)
	const n = 2000
	conformance.Seed(t, admin, p.in, n)
	x := conformance.Start(t, p.cfg, conformance.Upper(p.in, p.out, nil))
	x.WaitCommitted(t, n, 90*time.Second)
	v := conformance.ExactlyOnce(t, admin, p.out, n)
	t.Logf("%s with only %d ACLs over SASL_SSL: %v", p.principal, len(leastPrivilege), v)
	if offs := groupOffsets(t, admin, p.app); offs == 0 {
		t.Fatalf("group %s committed no offsets after a full run", p.app)
	}

	// The doctor prints exactly these grants, and finds them all in place.
	out, errOut, code := secureEosctl(t, admin, []string{"EOS_APP_ID=" + p.app},
		"doctor", "--acls", "--principal", p.principal, "--input-topic", p.in, "--output-topic", p.out)
	if code != 0 {
		t.Fatalf("eosctl doctor --acls: exit %d: %s", code, errOut)
	}
	var printed, granted []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "kafka-acls.sh ") {
			printed = append(printed, l)
		}
	}
	for _, g := range leastPrivilege {
		w := g.want(p)
		granted = append(granted, "kafka-acls.sh --bootstrap-server "+strings.Join(admin.Brokers, ",")+" --add --allow-principal "+p.principal+" "+w[len(w)-1])
	}
	slices.Sort(printed)
	slices.Sort(granted)
	if !slices.Equal(printed, granted) {
		t.Errorf("eosctl doctor --acls printed:\n%s\nthe grants this test proved sufficient are:\n%s", strings.Join(printed, "\n"), strings.Join(granted, "\n"))
	}
	out, errOut, _ = secureEosctl(t, admin, []string{"EOS_APP_ID=" + p.app}, "-o", "json",
		"doctor", "--principal", p.principal, "--input-topic", p.in, "--output-topic", p.out)
	var res struct {
		Findings []struct{ Check, Status, Detail string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("eosctl doctor -o json: %v: %s %s", err, out, errOut)
	}
	acls := 0
	for _, f := range res.Findings {
		if f.Check == "acl" {
			acls++
			if f.Status == "fail" {
				t.Errorf("eosctl doctor finds an ACL missing although the pipeline ran: %s", f.Detail)
			}
		}
	}
	if acls == 0 {
		t.Errorf("eosctl doctor checked no ACLs: %s", out)
	}
}

// TestSecureConformance runs conformance scenarios on the secured broker
// with their pipelines as a user holding only prefixed least-privilege
// grants: Read on topics in-*, Write on out-* and dlq-*, Read on groups
// app-*, Write on transactional ids app-* and Create, Read and Write on
// topics app-* (their offsets mirrors). Topics are made and read back by
// the super user.
func TestSecureConformance(t *testing.T) {
	admin := secureEnv(t)
	user, password := admin.Name("conf-user"), randomHex(t)
	principal := "User:" + user
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin.Admin(t).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create SCRAM user %s: %v", user, err)
	}
	waitAuthenticates(t, admin.As(user, password))
	prefixed := func(b *kadm.ACLBuilder) *kadm.ACLBuilder {
		return b.ResourcePatternType(kadm.ACLPatternPrefixed)
	}
	grants := []grant{
		{name: "Read on topics in-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).Topics("in-").Operations(kadm.OpRead))
		}},
		{name: "Write on topics out-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).Topics("out-").Operations(kadm.OpWrite))
		}},
		{name: "Write on topics dlq-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).Topics("dlq-").Operations(kadm.OpWrite))
		}},
		{name: "Read on groups app-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).Groups("app-").Operations(kadm.OpRead))
		}},
		{name: "Write on transactional ids app-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).TransactionalIDs("app-").Operations(kadm.OpWrite))
		}},
		// The exactly-once apps app-* make, write and read their offsets
		// mirror app-*-eos-offsets.
		{name: "Create, Read and Write on topics app-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).Topics("app-").Operations(kadm.OpCreate, kadm.OpRead, kadm.OpWrite))
		}},
		// The stateful scenario's app is count-*: its changelog
		// count-*-counts-changelog and offsets mirror
		// count-*-eos-offsets are made, written and read by the
		// pipeline itself.
		{name: "Read on groups count-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).Groups("count-").Operations(kadm.OpRead))
		}},
		{name: "Write on transactional ids count-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).TransactionalIDs("count-").Operations(kadm.OpWrite))
		}},
		{name: "Create, Read and Write on topics count-*", acl: func(pipelineNames) *kadm.ACLBuilder {
			return prefixed(kadm.NewACLs().Allow(principal).Topics("count-").Operations(kadm.OpCreate, kadm.OpRead, kadm.OpWrite))
		}},
	}
	grantAll(t, admin, pipelineNames{principal: principal}, grants)
	// The user may not even create the topics it reads: the broker
	// enforces the ACLs for it.
	created, err := admin.As(user, password).Admin(t).CreateTopics(ctx, 1, -1, nil, admin.Name("in"))
	if err == nil {
		err = created.Error()
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("%s creating a topic: %v, want TOPIC_AUTHORIZATION_FAILED", principal, err)
	}
	env := *admin
	env.AppSASL = config.SASL{Mechanism: admin.SASL.Mechanism, Username: user, Password: password}
	for _, s := range []struct {
		name string
		fn   func(*testing.T, *kafkatest.Env)
	}{
		{"ExactlyOnceAcrossRestart", conformance.ExactlyOnceAcrossRestart},
		{"FailAbortsBatchInvisibly", conformance.FailAbortsBatchInvisibly},
		{"DeadLetterCommitsWithOffsets", conformance.DeadLetterCommitsWithOffsets},
		{"ZombieIsFenced", conformance.ZombieIsFenced},
		{"RebalanceTwoInstances", func(t *testing.T, env *kafkatest.Env) { conformance.Rebalance(t, env, 2) }},
		{"StatefulCountAcrossRestartMemory", func(t *testing.T, env *kafkatest.Env) {
			conformance.StatefulCountAcrossRestart(t, env, state.Memory())
		}},
	} {
		t.Run(s.name, func(t *testing.T) { s.fn(t, &env) })
	}
}

// secureEosctl runs eosctl as env's user over SASL_SSL (password in
// EOS_SASL_PASSWORD, as the docs advise) with more environment variables.
func secureEosctl(t *testing.T, env *kafkatest.Env, vars []string, args ...string) (string, string, int) {
	t.Helper()
	all := append([]string{"--brokers", strings.Join(env.Brokers, ","), "--tls-ca", env.TLS.CAFile,
		"--sasl-mechanism", env.SASL.Mechanism, "--sasl-user", env.SASL.Username}, args...)
	cmd := exec.Command(eosctlBinary(t), all...)
	cmd.Env = append(append(os.Environ(), "EOS_SASL_PASSWORD="+env.SASL.Password), vars...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), stderr.String(), code
}

// TestSecureMissingACL removes each grant of leastPrivilege in turn (and,
// for a topic, replaces it with Describe only) and checks the pipeline
// stops within a bound with an error naming what is missing and how to
// grant it, having committed neither output nor offsets.
func TestSecureMissingACL(t *testing.T) {
	admin := secureEnv(t)
	type row struct {
		name    string
		missing grant
		grants  []grant
	}
	var rows []row
	for i, missing := range leastPrivilege {
		var rest []grant
		for j, g := range leastPrivilege {
			if j != i {
				rest = append(rest, g)
			}
		}
		rows = append(rows, row{missing.name, missing, rest})
		if missing.describe != nil {
			with := append(append([]grant{}, rest...), grant{name: "Describe only", acl: missing.describe})
			rows = append(rows, row{missing.name + ", Describe kept", missing, with})
		}
	}
	const bound = 15 * time.Second
	var table []string
	for _, tc := range rows {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			p := newPipeline(t, admin, "acl")
			grantAll(t, admin, p, tc.grants)
			conformance.Seed(t, admin, p.in, 100)
			begin := time.Now()
			x := conformance.Start(t, p.cfg, conformance.Upper(p.in, p.out, nil))
			err := x.Wait(t, bound)
			took := time.Since(begin)
			if err == nil {
				t.Fatalf("without %s, Run returned nil after %s", tc.name, took)
			}
			table = append(table, "| "+tc.name+" | "+took.Round(100*time.Millisecond).String()+" | "+err.Error()+" |")
			if !errors.Is(err, eos.ErrNotAuthorized) {
				t.Errorf("without %s the error is not an eos.AuthorizationError: %v", tc.name, err)
			}
			for _, w := range tc.missing.want(p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("without %s the error does not contain %q:\n%v", tc.name, w, err)
				}
			}
			if strings.Contains(err.Error(), p.password) {
				t.Errorf("the error shows the password: %v", err)
			}
			if got := committedRecords(t, admin, p.out); got != 0 {
				t.Errorf("without %s, %d records were committed to %s", tc.name, got, p.out)
			}
			if got := groupOffsets(t, admin, p.app); got != 0 {
				t.Errorf("without %s, group %s committed %d offsets", tc.name, p.app, got)
			}
		})
	}
	t.Logf("missing-ACL table:\n| permission removed | Run returned after | error |\n|---|---|---|\n%s", strings.Join(table, "\n"))
}

// committedRecords counts the records of topic a read_committed consumer
// sees. With no records written at all it does not need to read.
func committedRecords(t *testing.T, admin *kafkatest.Env, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := admin.Admin(t).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	written := int64(0)
	ends.Each(func(o kadm.ListedOffset) { written += o.Offset })
	if written == 0 {
		return 0
	}
	recs, err := verdict.Drain(ctx, admin.ClientOpts(t), topic, 0, 3*time.Second)
	if err != nil {
		t.Fatalf("drain %s: %v", topic, err)
	}
	return len(recs)
}

// groupOffsets counts the partitions group has committed offsets for.
func groupOffsets(t *testing.T, admin *kafkatest.Env, group string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := admin.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	if err := offs.Error(); err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	n := 0
	offs.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			n++
		}
	})
	return n
}

// TestSecureBadCredentials checks that a wrong password and a CA that did
// not sign the broker's certificate each stop eos.Run and eosctl with a
// one-line error within the connect timeout.
func TestSecureBadCredentials(t *testing.T) {
	admin := secureEnv(t)
	other := untrustedCA(t)
	cases := []struct {
		name string
		env  *kafkatest.Env
		want []string // substrings of the runtime's and eosctl's errors
	}{
		{"wrong password", admin.As(admin.SASL.Username, "not-the-password"), []string{"authentication failed", "SASL", admin.SASL.Username}},
		{"untrusted CA", withCA(admin, other), []string{"authentication failed", "certificate", "not trusted"}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			cfg := tc.env.Config(admin.Name("bad-app"), "1", config.ExactlyOnce)
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
			checkOneLine(t, "eos Run", err, took, limit, tc.want, admin.SASL.Password)
			if !errors.Is(err, eos.ErrAuthentication) {
				t.Errorf("Run's error is not eos.ErrAuthentication: %v", err)
			}
			begin = time.Now()
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			t.Logf("Close after the failed Run took %s", time.Since(begin).Round(time.Millisecond))
			if took := time.Since(begin); took > limit {
				t.Errorf("Close after the failed Run took %s, want at most %s", took, limit)
			}

			args := []string{"topic", "list", "--brokers", strings.Join(tc.env.Brokers, ","),
				"--tls-ca", tc.env.TLS.CAFile, "--sasl-mechanism", tc.env.SASL.Mechanism, "--sasl-user", tc.env.SASL.Username,
				"--timeout", cfg.ConnectTimeout.String()}
			cmd := exec.Command(eosctlBinary(t), args...)
			cmd.Env = append(os.Environ(), "EOS_SASL_PASSWORD="+tc.env.SASL.Password)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			begin = time.Now()
			out, cerr := cmd.Output()
			took = time.Since(begin)
			if cerr == nil {
				t.Fatalf("eosctl %s succeeded: %s", strings.Join(args, " "), out)
			}
			checkOneLine(t, "eosctl topic list", errors.New(strings.TrimSpace(stderr.String())), took, limit, tc.want, admin.SASL.Password)
		})
	}
}

// checkOneLine asserts err is set, came within limit, is one line, names
// the cause and does not show the password.
func checkOneLine(t *testing.T, who string, err error, took, limit time.Duration, want []string, password string) {
	t.Helper()
	if err == nil || err.Error() == "" {
		t.Fatalf("%s: no error after %s", who, took)
	}
	msg := err.Error()
	t.Logf("%s failed after %s: %s", who, took.Round(time.Millisecond), msg)
	if took > limit {
		t.Errorf("%s took %s to fail, want at most %s", who, took, limit)
	}
	if strings.Count(msg, "\n") > 0 {
		t.Errorf("%s: the error has %d lines, want one:\n%s", who, strings.Count(msg, "\n")+1, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: the error does not contain %q: %s", who, w, msg)
		}
	}
	if strings.Contains(msg, password) {
		t.Errorf("%s: the error shows the password: %s", who, msg)
	}
}

// withCA returns a copy of env that trusts only the CA in file.
func withCA(env *kafkatest.Env, file string) *kafkatest.Env {
	c := *env
	c.TLS.CAFile = file
	return &c
}

// untrustedCA writes a fresh self-signed CA, which signed nothing the
// broker presents, and returns its PEM file.
func untrustedCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "untrusted test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "untrusted-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSecureMissingACLStateful is the missing-ACL table of a stateful
// pipeline: besides the grants of a stateless one (leastPrivilege, the
// offsets mirror's included) it needs Create, Read and Write on its
// changelog (app_id-STORE-changelog), which it makes on first start,
// writes in each transaction and restores from. Each row
// grants all but one of those three; with all of them, `eosctl doctor
// --acls --store` prints exactly the grants the pipeline ran with.
func TestSecureMissingACLStateful(t *testing.T) {
	admin := secureEnv(t)
	ops := []kadm.ACLOperation{kadm.OpCreate, kadm.OpRead, kadm.OpWrite}
	var table []string
	for _, missing := range append([]kadm.ACLOperation{kadm.OpUnknown}, ops...) {
		name := "none (all granted)"
		if missing != kadm.OpUnknown {
			name = camelOp(missing) + " on changelog"
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			p := newPipeline(t, admin, "st")
			changelog := topology.ChangelogTopic(p.app, "counts")
			var keep []kadm.ACLOperation
			for _, op := range ops {
				if op != missing {
					keep = append(keep, op)
				}
			}
			grants := append(append([]grant{}, leastPrivilege...), grant{name: "changelog", acl: func(p pipelineNames) *kadm.ACLBuilder {
				return kadm.NewACLs().Allow(p.principal).Topics(changelog).Operations(keep...)
			}})
			grantAll(t, admin, p, grants)
			const n = 200
			conformance.Seed(t, admin, p.in, n)
			p.cfg.StateDir = t.TempDir()
			begin := time.Now()
			x := conformance.Start(t, p.cfg, conformance.CountTopology(p.in, p.out, state.Memory()))
			if missing == kadm.OpUnknown {
				x.WaitCommitted(t, n, 90*time.Second)
				conformance.CheckCounts(t, admin, p.out, changelog, n)
				// doctor --acls --store prints exactly the grants
				// this run had.
				var flags []string
				for _, g := range leastPrivilege {
					w := g.want(p)
					flags = append(flags, w[len(w)-1])
				}
				for _, op := range ops {
					flags = append(flags, "--operation "+camelOp(op)+" --topic "+changelog)
				}
				checkDoctorGrants(t, admin, p, []string{"--store", "counts"}, flags)
				return
			}
			committed := 0
			if missing == kadm.OpRead {
				// Only a restore reads the changelog: the first run works,
				// and a restart of the in-memory store must restore.
				x.WaitCommitted(t, n, 90*time.Second)
				x.Stop()
				if err := x.Wait(t, 30*time.Second); err != nil {
					t.Fatalf("the first run, which restores nothing, failed: %v", err)
				}
				committed = committedRecords(t, admin, p.out)
				conformance.Seed(t, admin, p.in, 10)
				begin = time.Now()
				x = conformance.Start(t, p.cfg, conformance.CountTopology(p.in, p.out, state.Memory()))
			}
			err := x.Wait(t, 15*time.Second)
			took := time.Since(begin)
			if err == nil {
				t.Fatalf("without %s, Run returned nil after %s", name, took)
			}
			table = append(table, "| "+name+" | "+took.Round(100*time.Millisecond).String()+" | "+err.Error()+" |")
			if !errors.Is(err, eos.ErrNotAuthorized) {
				t.Errorf("without %s the error is not an eos.AuthorizationError: %v", name, err)
			}
			for _, w := range []string{changelog, "kafka-acls", "--operation " + camelOp(missing) + " --topic " + changelog} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("without %s the error does not contain %q:\n%v", name, w, err)
				}
			}
			if got := committedRecords(t, admin, p.out); got != committed {
				t.Errorf("without %s, %d records were committed to %s, want %d", name, got, p.out, committed)
			}
			if got := groupOffsets(t, admin, p.app); committed == 0 && got != 0 {
				t.Errorf("without %s, group %s committed %d offsets", name, p.app, got)
			}
		})
	}
	t.Logf("missing-ACL table, stateful:\n| permission removed | Run returned after | error |\n|---|---|---|\n%s", strings.Join(table, "\n"))
}

// checkDoctorGrants runs `eosctl doctor --acls` for p with extra flags and
// fails t unless it prints exactly one kafka-acls.sh command for each of
// flags (e.g. "--operation Read --topic in"), the grants the pipeline
// just ran with.
func checkDoctorGrants(t *testing.T, admin *kafkatest.Env, p pipelineNames, extra, flags []string) {
	t.Helper()
	args := append([]string{"doctor", "--acls", "--principal", p.principal, "--input-topic", p.in, "--output-topic", p.out}, extra...)
	out, errOut, code := secureEosctl(t, admin, []string{"EOS_APP_ID=" + p.app}, args...)
	if code != 0 {
		t.Fatalf("eosctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	var printed, granted []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "kafka-acls.sh ") {
			printed = append(printed, l)
		}
	}
	for _, f := range flags {
		granted = append(granted, "kafka-acls.sh --bootstrap-server "+strings.Join(admin.Brokers, ",")+" --add --allow-principal "+p.principal+" "+f)
	}
	slices.Sort(printed)
	slices.Sort(granted)
	if !slices.Equal(printed, granted) {
		t.Errorf("eosctl %s printed:\n%s\nthe grants the pipeline ran with are:\n%s", strings.Join(args, " "), strings.Join(printed, "\n"), strings.Join(granted, "\n"))
	}
}

// camelOp spells an ACL operation as kafka-acls.sh does: Create, Read, Write.
func camelOp(op kadm.ACLOperation) string {
	s := strings.ToLower(op.String())
	return strings.ToUpper(s[:1]) + s[1:]
}

// TestSecureEosctlCommands runs eosctl's inspection and topic commands as
// the super user over SASL_SSL, with flags, and once with only the EOS_*
// variables, after a pipeline left a group and a transactional id behind.
func TestSecureEosctlCommands(t *testing.T) {
	admin := secureEnv(t)
	in, out, app := admin.Name("cli-in"), admin.Name("cli-out"), admin.Name("cli-app")
	admin.CreateTopics(t, 1, in, out)
	conformance.Seed(t, admin, in, 50)
	cfg := admin.Config(app, "1", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.Upper(in, out, nil))
	x.WaitCommitted(t, 50, 60*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	extra := admin.Name("cli-extra")
	for _, tc := range []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"topic", "create", extra, "--partitions", "2"}, extra},
		{[]string{"topic", "list"}, extra},
		{[]string{"topic", "describe", in}, in},
		{[]string{"txn", "list"}, runcfg.TransactionalID(cfg)},
		{[]string{"txn", "describe", runcfg.TransactionalID(cfg)}, runcfg.TransactionalID(cfg)},
		{[]string{"txn", "producers", "--topic", out}, out},
		{[]string{"txn", "hanging", "--topic", out}, ""},
		{[]string{"group", "lag", app}, in},
		{[]string{"app", "describe", app}, app},
		{[]string{"topic", "delete", extra, "--yes"}, extra},
	} {
		stdout, stderr, code := secureEosctl(t, admin, nil, tc.args...)
		if code != 0 || !strings.Contains(stdout, tc.want) {
			t.Errorf("eosctl %s: exit %d, stdout lacks %q:\n%s\nstderr: %s", strings.Join(tc.args, " "), code, tc.want, stdout, stderr)
		}
	}
	// The same connection from EOS_* variables alone.
	cmd := exec.Command(eosctlBinary(t), "topic", "list")
	cmd.Env = append(os.Environ(), "EOS_BROKERS="+strings.Join(admin.Brokers, ","), "EOS_TLS_ENABLED=true",
		"EOS_TLS_CA_FILE="+admin.TLS.CAFile, "EOS_SASL_MECHANISM="+admin.SASL.Mechanism,
		"EOS_SASL_USERNAME="+admin.SASL.Username, "EOS_SASL_PASSWORD="+admin.SASL.Password)
	stdout, err := cmd.Output()
	if err != nil || !strings.Contains(string(stdout), in) {
		t.Errorf("eosctl topic list with EOS_* variables: %v:\n%s", err, stdout)
	}
}
