package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// joinStatic starts a consumer of topic in group as the static member
// instance (group.instance.id, as the runtime joins) and keeps it polling
// until t ends or the returned client is closed.
func joinStatic(t *testing.T, addr, group, topic, instance string) *kgo.Client {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.InstanceID(instance))
	go func() {
		for {
			if cl.PollFetches(context.Background()).IsClientClosed() {
				return
			}
		}
	}()
	return cl
}

// staticMembers returns the sorted instance ids of group's members.
func staticMembers(t *testing.T, adm *kadm.Client, group string) []string {
	t.Helper()
	ds, err := adm.DescribeGroups(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ds[group].Members {
		if m.InstanceID != nil {
			ids = append(ids, *m.InstanceID)
		}
	}
	slices.Sort(ids)
	return ids
}

// waitMembers waits until group's static members are want.
func waitMembers(t *testing.T, adm *kadm.Client, group string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := staticMembers(t, adm, group)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s has static members %v, want %v", group, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// twoStaticMembers starts a cluster whose group "pipe" has the static
// members w-0 and w-1, consuming "orders" with partitions; it returns w-1's
// client for the test to stop.
func twoStaticMembers(t *testing.T, partitions int32) (string, *kadm.Client, *kgo.Client) {
	t.Helper()
	_, addr := newCluster(t, kfake.SeedTopics(partitions, "orders"))
	adm := newAdmin(t, addr)
	joinStatic(t, addr, "pipe", "orders", "w-0")
	stopped := joinStatic(t, addr, "pipe", "orders", "w-1")
	waitMembers(t, adm, "pipe", "w-0", "w-1")
	return addr, adm, stopped
}

func TestGroupLeaveRemovesStoppedStaticMember(t *testing.T) {
	addr, adm, stopped := twoStaticMembers(t, 2)

	// A static member does not leave on close: the group keeps waiting
	// for it, which is why a scale-down needs the explicit leave.
	stopped.Close()
	time.Sleep(100 * time.Millisecond)
	if got := staticMembers(t, adm, "pipe"); !slices.Equal(got, []string{"w-0", "w-1"}) {
		t.Fatalf("after closing w-1 the members are %v; the test needs a static member that stays", got)
	}

	out, errOut, code := runCLI(t, nil, "--brokers", addr, "-o", "json", "group", "leave", "pipe", "--instance", "w-1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res groupLeaveJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if res.Group != "pipe" || len(res.Members) != 1 || res.Members[0].InstanceID != "w-1" || !res.Members[0].Left || res.Members[0].Error != "" {
		t.Errorf("got %+v, want w-1 to have left pipe", res)
	}
	waitMembers(t, adm, "pipe", "w-0")
}

func TestGroupLeaveNamesUnknownInstance(t *testing.T) {
	addr, adm, stopped := twoStaticMembers(t, 1)
	stopped.Close()

	// The known instance leaves even though the other is unknown; the
	// table says which, and the error names the group and the instance.
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "group", "leave", "pipe", "--instance", "w-1", "--instance", "ghost")
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stdout %s stderr %s", code, exitFailure, out, errOut)
	}
	if !strings.Contains(errOut, `"ghost"`) || !strings.Contains(errOut, `group "pipe"`) || !strings.Contains(errOut, "UNKNOWN_MEMBER_ID") {
		t.Errorf("stderr does not name the group and the unknown instance: %s", errOut)
	}
	if strings.Contains(errOut, `"w-1"`) {
		t.Errorf("stderr blames w-1, which left: %s", errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "INSTANCE") ||
		!strings.HasPrefix(lines[1], "ghost") || !strings.Contains(lines[1], "UNKNOWN_MEMBER_ID") ||
		!strings.HasPrefix(lines[2], "w-1") || !strings.Contains(lines[2], "left") {
		t.Errorf("table:\n%s", out)
	}
	waitMembers(t, adm, "pipe", "w-0")
}

func TestGroupLeaveUnknownGroup(t *testing.T) {
	_, addr := newCluster(t)
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "group", "leave", "nobody", "--instance", "w-0")
	if code != exitFailure || !strings.Contains(errOut, `group "nobody"`) || !strings.Contains(errOut, `"w-0"`) {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

func TestGroupLeaveUsage(t *testing.T) {
	for _, args := range [][]string{
		{"group", "leave", "pipe"},
		{"group", "leave", "pipe", "--instance", ""},
		{"group", "leave", "pipe", "--instance", "w-0,"},
		{"group", "leave", "--instance", "w-0"},
		{"group", "leave", "", "--instance", "w-0"},
	} {
		// No broker is contacted: the command line is wrong.
		_, errOut, code := runCLI(t, nil, append([]string{"--brokers", "127.0.0.1:1"}, args...)...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, exitUsage, errOut)
		}
	}
}
