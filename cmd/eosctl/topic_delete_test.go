package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTopicDelete(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(2, "orders", "orders-dlq", "audit"))
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "topic", "delete", "orders", "orders-dlq", "--yes")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := squeeze(out); got != "TOPIC RESULT\norders deleted\norders-dlq deleted" {
		t.Errorf("table:\n%s", got)
	}
	details := topicsOn(t, addr)
	for _, name := range []string{"orders", "orders-dlq"} {
		if _, ok := details[name]; ok {
			t.Errorf("%s still exists", name)
		}
	}
	if _, ok := details["audit"]; !ok {
		t.Error("audit was deleted too")
	}
}

func TestTopicDeleteUnknown(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "-o", "json", "topic", "delete", "nope", "orders", "--yes")
	if code != exitFailure {
		t.Fatalf("exit %d, want %d: %s", code, exitFailure, errOut)
	}
	if !strings.Contains(errOut, `topic "nope" does not exist`) || strings.Contains(errOut, `"orders"`) {
		t.Errorf("stderr must name nope only: %s", errOut)
	}
	var got []deletedTopicJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	want := []deletedTopicJSON{{Topic: "nope", Error: "does not exist"}, {Topic: "orders", Deleted: true}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, ok := topicsOn(t, addr)["orders"]; ok {
		t.Error("orders was not deleted")
	}
}

func TestTopicDeleteNeedsYes(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"orders"}, "add --yes"},
		{[]string{"orders", "--yes=false"}, "add --yes"},
		{[]string{"--yes"}, "requires at least 1 arg"},
		{[]string{"bad name", "--yes"}, `"bad name"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, append([]string{"--brokers", addr, "topic", "delete"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
				t.Errorf("exit %d, want %d; stdout %q; stderr %s (want %q)", code, exitUsage, out, errOut, tc.want)
			}
		})
	}
	if _, ok := topicsOn(t, addr)["orders"]; !ok {
		t.Error("orders was deleted without --yes")
	}
}

// A cluster with delete.topic.enable=false refuses every delete.
func TestTopicDeleteRefusedByBroker(t *testing.T) {
	c, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	c.ControlKey(20, func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.DeleteTopicsRequest)
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		names := req.TopicNames // before v6
		for _, rt := range req.Topics {
			if rt.Topic != nil {
				names = append(names, *rt.Topic)
			}
		}
		for _, name := range names {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			rt.ErrorCode = kerr.TopicDeletionDisabled.Code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "topic", "delete", "orders", "--yes")
	if code != exitFailure || !strings.Contains(errOut, `"orders"`) || !strings.Contains(errOut, "delete.topic.enable") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}
