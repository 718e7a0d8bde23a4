package eos

import (
	"fmt"

	"github.com/eosflow/eosflow/internal/runcfg"

	"github.com/eosflow/eosflow/config"
	"go.uber.org/zap"
)

// NewLogger builds the logger the runtime uses when New is given none:
// zap's production encoding (one JSON object per line) on stderr, at
// cfg's log_level (EOS_LOG_LEVEL), unsampled so that no repeated warning
// is dropped. Build it yourself to add fields or sinks and pass it with
// Logger: log_level then still filters it.
func NewLogger(cfg config.Config) (*zap.Logger, error) {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(runcfg.Level(cfg))
	zc.Sampling = nil
	l, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("eos: building the default logger: %w", err)
	}
	return l, nil
}

// runnerLogger is the logger of a runner given l (nil: none given),
// filtered by log_level. log_level can only quiet a logger: one built at
// info stays at info under log_level debug (zap refuses to lower a
// level), so a logger of your own must be built at the lowest level you
// want; NewLogger's follows log_level.
func runnerLogger(cfg config.Config, l *zap.Logger) (*zap.Logger, error) {
	if l == nil {
		return NewLogger(cfg)
	}
	if l.Core().Enabled(runcfg.Level(cfg)) {
		l = l.WithOptions(zap.IncreaseLevel(runcfg.Level(cfg)))
	}
	return l, nil
}
