package eos

import (
	"testing"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The client's transaction lines (begin, end, the EndTxn answer) reach a
// debug log, so a failed chaos run's logs show how each batch ended; above
// debug the client logs only its warnings.
func TestClientLogLevelFollowsTheLogger(t *testing.T) {
	for _, tc := range []struct {
		level zapcore.Level
		want  kgo.LogLevel
	}{
		{zapcore.DebugLevel, kgo.LogLevelInfo},
		{zapcore.InfoLevel, kgo.LogLevelWarn},
		{zapcore.WarnLevel, kgo.LogLevelWarn},
		{zapcore.ErrorLevel, kgo.LogLevelError},
	} {
		core, _ := observer.New(tc.level)
		r := &Runner{log: zap.New(core)}
		if got := r.clientLogLevel(); got != tc.want {
			t.Errorf("logger at %v: client log level %v, want %v", tc.level, got, tc.want)
		}
	}
	if got := (&Runner{log: zap.NewNop()}).clientLogLevel(); got != kgo.LogLevelNone {
		t.Errorf("no logger: client log level %v, want none", got)
	}
}

// log_level filters a logger the user gives: one built at debug logs
// only warnings under log_level warn. It cannot lower one built at info.
func TestLogLevelFiltersTheUsersLogger(t *testing.T) {
	for _, tc := range []struct {
		built          zapcore.Level
		logLevel       string
		debug, info, w bool
	}{
		{zapcore.DebugLevel, "warn", false, false, true},
		{zapcore.DebugLevel, "debug", true, true, true},
		{zapcore.InfoLevel, "debug", false, true, true},
	} {
		core, _ := observer.New(tc.built)
		l, err := runnerLogger(config.Config{LogLevel: tc.logLevel}, zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		got := [3]bool{l.Core().Enabled(zapcore.DebugLevel), l.Core().Enabled(zapcore.InfoLevel), l.Core().Enabled(zapcore.WarnLevel)}
		if got != [3]bool{tc.debug, tc.info, tc.w} {
			t.Errorf("built at %v, log_level %s: debug, info, warn enabled %v; want %v", tc.built, tc.logLevel, got, [3]bool{tc.debug, tc.info, tc.w})
		}
	}
}
