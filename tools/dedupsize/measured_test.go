package dedupsize

import (
	"fmt"
	"testing"
)

// recorder is a TB that keeps what CheckMeasured reported.
type recorder struct{ fatal, errors []string }

func (r *recorder) Helper()                         {}
func (r *recorder) Fatal(args ...any)               { r.fatal = append(r.fatal, fmt.Sprint(args...)) }
func (r *recorder) Logf(format string, args ...any) {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// CheckMeasured passes a measurement within MeasuredTolerance of the
// estimate, fails one beyond it and refuses a store it cannot size.
func TestCheckMeasured(t *testing.T) {
	const n, idBytes = 1000, 36
	est := float64(n * (idBytes + PostgresRowOverhead))
	for _, c := range []struct {
		measured float64
		fails    bool
	}{{est, false}, {est * 1.2, false}, {est * 0.8, false}, {est * 1.3, true}, {est * 0.7, true}} {
		var r recorder
		CheckMeasured(&r, "postgres", n, idBytes, c.measured)
		if got := len(r.errors) > 0; got != c.fails || len(r.fatal) > 0 {
			t.Errorf("measured %.0f of estimate %.0f: errors %q, fatal %q; want failure %v", c.measured, est, r.errors, r.fatal, c.fails)
		}
	}
	var r recorder
	CheckMeasured(&r, "bloom", n, idBytes, est)
	if len(r.fatal) == 0 {
		t.Error("CheckMeasured of a store ForStore cannot size did not fail")
	}
}
