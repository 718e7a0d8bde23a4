package eos

import (
	"testing"

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
