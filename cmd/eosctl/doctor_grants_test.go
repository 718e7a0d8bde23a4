package main

import (
	"encoding/json"
	"strings"
	"testing"
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
	if strings.Join(loop, ",") != "Read loop,Write loop" {
		t.Errorf("--topic grants %v, want Read and Write on loop", loop)
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
