package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eosflow/eosflow/config"
)

// produce and consume connect with the SASL flags every command takes, and
// a denied ACL is an error that says so.
func TestProduceConsumeSASLAndDeniedACLs(t *testing.T) {
	topicACL := func(op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "orders", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(config.SASLScramSHA512, "admin", "admin-secret"),
		kfake.User(config.SASLScramSHA512, "app", "app-secret",
			topicACL(kmsg.ACLOperationDescribe), topicACL(kmsg.ACLOperationWrite), topicACL(kmsg.ACLOperationRead)),
		kfake.User(config.SASLScramSHA512, "viewer", "viewer-secret", topicACL(kmsg.ACLOperationDescribe)))
	as := func(user, pass string, args ...string) []string {
		return append([]string{"--brokers", addr, "--sasl-mechanism", "scram-sha-512", "--sasl-user", user, "--sasl-password", pass}, args...)
	}

	if _, errOut, code := runCLI(t, strings.NewReader("k:v\n"), as("app", "app-secret", "produce", "orders", "-K", ":")...); code != exitOK {
		t.Fatalf("produce with the ACLs: exit %d: %s", code, errOut)
	}
	out, errOut, code := runCLI(t, nil, as("app", "app-secret", "consume", "orders", "-K", "=")...)
	if code != exitOK || out != "k=v\n" {
		t.Errorf("consume with the ACLs: exit %d, stdout %q: %s", code, out, errOut)
	}

	acl := map[string]string{"produce": "needs WRITE on it", "consume": "needs READ on it"}
	for _, args := range [][]string{{"produce", "orders"}, {"consume", "orders"}} {
		_, errOut, code := runCLI(t, strings.NewReader("x\n"), as("viewer", "viewer-secret", args...)...)
		if code != exitFailure || !strings.Contains(errOut, "AUTHORIZATION_FAILED") || !strings.Contains(errOut, "lack the ACL") || !strings.Contains(errOut, acl[args[0]]) {
			t.Errorf("%s without the ACL: exit %d: %s", args[0], code, errOut)
		}
	}
	// kfake drops the connection where Kafka answers with an error: either
	// way the message points at the SASL settings.
	_, errOut, code = runCLI(t, strings.NewReader("x\n"), as("app", "wrong", "produce", "orders")...)
	if code != exitFailure || !strings.Contains(strings.ToLower(errOut), "sasl") {
		t.Errorf("produce with a wrong password: exit %d: %s", code, errOut)
	}
}
