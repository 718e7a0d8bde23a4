package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// topicsOn returns the topics of the cluster at addr, internal ones too.
func topicsOn(t *testing.T, addr string) kadm.TopicDetails {
	t.Helper()
	details, err := newAdmin(t, addr).ListTopicsWithInternal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return details
}

// squeeze trims a table and collapses its column padding to one space, so
// tests compare content rather than alignment.
func squeeze(table string) string {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func TestTopicNames(t *testing.T) {
	longest := strings.Repeat("x", maxTopicNameLen)
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		wantErr string // part of the usage error; "" for none
	}{
		{"allowed characters", []string{"orders", "orders.v2", "orders_dlq", "Orders-1"}, []string{"orders", "orders.v2", "orders_dlq", "Orders-1"}, ""},
		{"duplicates dropped in order", []string{"b", "a", "b"}, []string{"b", "a"}, ""},
		{"longest", []string{longest}, []string{longest}, ""},
		{"empty", []string{""}, nil, "must not be empty"},
		{"dot", []string{"."}, nil, "reserves"},
		{"dot dot", []string{".."}, nil, "reserves"},
		{"space", []string{"my topic"}, nil, `contains ' '`},
		{"non-ASCII", []string{"orders", "ordérs"}, nil, `"ordérs"`},
		{"too long", []string{longest + "x"}, nil, "at most 249"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := topicNames(tc.args)
			if tc.wantErr != "" {
				if exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v (exit %d), want a usage error containing %q", err, exitCode(err), tc.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestTopicHelpListsSubcommands(t *testing.T) {
	out, _, code := runCLI(t, nil, "topic")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, sub := range []string{"create", "list", "describe", "delete"} {
		if !strings.Contains(out, sub) {
			t.Errorf("help lacks %q:\n%s", sub, out)
		}
	}
	if _, errOut, code := runCLI(t, nil, "topic", "alter"); code != exitUsage || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown subcommand: exit %d, stderr %s", code, errOut)
	}
}
