package eos_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
)

// Without eos.Logger the runtime logs JSON lines to stderr at log_level:
// at debug its debug lines show, at info the partitions it was assigned,
// at warn none of its info lines do.
func TestWithoutALoggerTheRuntimeLogsToStderrAtLogLevel(t *testing.T) {
	for _, tc := range []struct {
		level      string
		info, dbug bool
	}{{"debug", true, true}, {"info", true, false}, {"warn", false, false}} {
		t.Run(tc.level, func(t *testing.T) {
			levels, msgs := stderrLines(t, func() { runBriefly(t, tc.level) })
			if levels["info"] != tc.info || levels["debug"] != tc.dbug {
				t.Fatalf("log_level %s: levels logged to stderr %v; want info %v, debug %v", tc.level, levels, tc.info, tc.dbug)
			}
			if msgs["partitions assigned"] != tc.info {
				t.Fatalf("log_level %s: a line says the partitions assigned: %v, want %v (messages %v)", tc.level, msgs["partitions assigned"], tc.info, msgs)
			}
		})
	}
}

// runBriefly runs a stateless pipeline without a logger until it
// committed its input, at log level level.
func runBriefly(t *testing.T, level string) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 10)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.LogLevel = level
	r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for r.Stats().Committed == 0 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// stderrLines runs fn with stderr going to a pipe, and returns the levels
// and messages of the JSON lines written there; a line that is not JSON
// fails the test.
func stderrLines(t *testing.T, fn func()) (levels, msgs map[string]bool) {
	t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = wr
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, rd); close(copied) }()
	func() {
		defer func() { os.Stderr = saved }()
		fn()
	}()
	wr.Close()
	<-copied
	levels, msgs = map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct{ Level, Msg string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", sc.Text(), err)
		}
		levels[line.Level], msgs[line.Msg] = true, true
	}
	return levels, msgs
}
