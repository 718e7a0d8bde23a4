package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runCLI runs eosctl in-process with args and returns stdout, stderr and
// the exit code. stdin may be nil.
func runCLI(t *testing.T, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, stdin, &out, &errOut)
	return out.String(), errOut.String(), code
}

// newCluster starts a one-broker kfake cluster with the given options and
// returns it with its address.
func newCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

// newClient builds a franz-go client for test setup against addr.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUnreachableBrokerFailsFast(t *testing.T) {
	start := time.Now()
	_, errOut, code := runCLI(t, nil, "--brokers", "127.0.0.1:1", "txn", "list")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s, want < 10s", took)
	}
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	for _, want := range []string{"cannot reach broker(s) 127.0.0.1:1:", "check --brokers"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
}

func TestBrokersFromEnv(t *testing.T) {
	t.Setenv("EOS_BROKERS", "127.0.0.1:1")
	_, errOut, code := runCLI(t, nil, "txn", "list")
	if code != exitFailure || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("exit %d, stderr %s: want the EOS_BROKERS address to be used", code, errOut)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"no-such-command"},
		{"txn", "no-such-command"},
		{"--no-such-flag"},
		{"-o", "yaml", "dedup", "size", "--rate", "1", "--window", "1s", "--id-bytes", "1"},
		{"--timeout", "0s", "txn", "list"},
		{"txn", "describe"},
		{"txn", "producers"},
		{"txn", "hanging", "--topic", "a", "--broker", "1"},
		{"txn", "abort", "--topic", "a"},
		{"group", "lag"},
		{"completion", "powershell"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %s", code, exitUsage, errOut)
			}
			if !strings.Contains(errOut, "--help") {
				t.Errorf("stderr does not point at --help: %s", errOut)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	out, _, code := runCLI(t, nil)
	if code != exitOK || !strings.Contains(out, "txn") || !strings.Contains(out, "doctor") {
		t.Errorf("exit %d, output %s", code, out)
	}
	out, _, code = runCLI(t, nil, "txn", "--help")
	if code != exitOK || !strings.Contains(out, "hanging") {
		t.Errorf("exit %d, output %s", code, out)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, errOut, code := runCLI(t, nil, "completion", shell)
		if code != exitOK || !strings.Contains(out, "eosctl") {
			t.Errorf("%s: exit %d, stderr %s", shell, code, errOut)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errFindings, exitFailure},
		{usageErrorf("x"), exitUsage},
		{io.EOF, exitFailure},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
